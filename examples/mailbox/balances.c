/*
 * balances.c - the handler of examples/mailbox: a per-user balance.
 *
 * Function "apply" (KS_FN_HANDLER) for the shipped `mailbox` processor.
 * A command is the outbox event's payload:
 *
 *   {"op": "deposit", "amount": 5}   balance += 5                 -> SUCCESS
 *   {"op": "debit",   "amount": 3}   balance -= 3 if it is enough -> SUCCESS
 *                                    else unchanged               -> PUSHED_FAILURE
 *
 * The balance lives in the node's store "balances" (key = user id, value =
 * int64 big-endian), written through the task's batch: the same LMDB
 * transaction as the mailbox's idempotency ledger row. The result payload
 * is {"balance": N} (and "error" for a refused debit).
 */
#include <kstreams/kstreams.h>

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static const ks_host_api *host;

static ks_verdict result(ks_buf *out, const char *error, int64_t balance)
{
    char text[160];
    int n = error ? snprintf(text, sizeof text, "{\"error\":\"%s\",\"balance\":%lld}", error,
                             (long long)balance)
                  : snprintf(text, sizeof text, "{\"balance\":%lld}", (long long)balance);
    host->buf_set(out, text, (size_t)n);
    return error ? KS_SKIP : KS_OK;
}

static ks_verdict apply(ks_ctx *ctx, const ks_record *cmd, ks_buf *out)
{
    ks_store *st;
    if (host->store(ctx, "balances", &st) != 0) {
        host->log(ctx, KS_LOG_ERROR, "balances: the node needs a store named 'balances'");
        return KS_FATAL;
    }
    json_error_t jerr;
    json_t *j = cmd->value ? json_loadb(cmd->value, cmd->value_len, 0, &jerr) : NULL;
    const char *op = j ? json_string_value(json_object_get(j, "op")) : NULL;
    json_t *amt = j ? json_object_get(j, "amount") : NULL;
    ks_bytes user = {cmd->key, cmd->key_len}, old;
    int64_t balance = 0;
    int rc = host->store_get(st, user, &old);
    if (rc == 0 && old.len == 8)
        balance = ks_int64_decode(old.data);
    else if (rc != 0 && rc != KS_ERR_NOT_FOUND) {
        json_decref(j);
        return KS_RETRY;
    }
    if (!op || !json_is_integer(amt) || json_integer_value(amt) < 0 ||
        (strcmp(op, "deposit") != 0 && strcmp(op, "debit") != 0)) {
        json_decref(j);
        return result(out, "expected {\"op\":\"deposit\"|\"debit\",\"amount\":N >= 0}",
                      balance);
    }
    int64_t amount = json_integer_value(amt);
    int debit = strcmp(op, "debit") == 0;
    json_decref(j);
    if (debit && amount > balance)
        return result(out, "insufficient funds", balance);
    balance += debit ? -amount : amount;
    unsigned char v[8];
    ks_int64_encode(balance, v);
    if (host->store_put(st, user, (ks_bytes){v, 8}) != 0)
        return KS_RETRY;
    return result(out, NULL, balance);
}

static const ks_function functions[] = {
    {"apply", KS_FN_HANDLER, (void (*)(void))apply},
};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "balances",
    .version = "0.1.0",
    .build_id = KS_BUILD_ID,
    .processors = NULL,
    .processor_count = 0,
    .functions = functions,
    .function_count = 1,
};

KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *api)
{
    host = api;
    return &descriptor;
}
