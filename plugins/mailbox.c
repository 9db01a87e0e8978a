/*
 * mailbox.c - the shipped plugin "mailbox", processor type "mailbox".
 *
 * Consumes the mailbox topic the outbox dispatcher publishes to: key = the
 * canonical user id, header `ks.event_id` = the outbox event id. Per
 * command, in the partition's (= the user's) order:
 *
 *  1. look the command up in the idempotency ledger, keyed by
 *     consumer group (the application id) + topic + partition + offset;
 *  2. not there: run the user's handler (`functions: { handler: p.fn }`,
 *     KS_FN_HANDLER): KS_OK -> SUCCESS, KS_SKIP -> PUSHED_FAILURE,
 *     KS_RETRY / KS_FATAL are returned as they are (the batch aborts and
 *     nothing of it is kept); then write the ledger row;
 *  3. there ("already processed"): log, count `already_processed`, do not
 *     run the handler;
 *  4. either way forward the result record: key = event id, value
 *     {"status":"SUCCESS"|"PUSHED_FAILURE","result":...,"user":...}, to the
 *     node's children (a sink on `<application>-outbox-results`). The
 *     engine owning the outbox applies it to the row by compare-and-set;
 *     re-forwarding the stored result in case 3 is what reconciles a
 *     success transition that went missing, without redoing the work.
 *
 * The ledger row and the handler's store writes go through the task's
 * store batch: ONE LMDB transaction, committed together or not at all
 * (with exactly-once also together with the result record and the input
 * offset in the Kafka transaction).
 *
 * State format (state_version 1): ledger store key
 * "ks.ledger/<group>/<topic>/<partition>/<offset>" (offset 20 digits),
 * value = the result record's JSON.
 */
#include <kstreams/kstreams.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const ks_host_api *host;

#define EVENT_ID_HEADER "ks.event_id"
#define EVENT_ID_LEN 32
#define LEDGER_PREFIX "ks.ledger/"

typedef struct mailbox_state {
    ks_store *ledger;
    ks_handler_fn handler;
    ks_buf *out;
    char group[256];
    uint64_t already; /* repeats seen (logged sampled) */
} mailbox_state;

static ks_verdict mailbox_init(ks_ctx *ctx, void **state)
{
    mailbox_state *st = calloc(1, sizeof *st);
    if (!st) {
        host->log(ctx, KS_LOG_ERROR, "mailbox: out of memory");
        return KS_FATAL;
    }
    const char *ledger = NULL;
    if (host->config_string(ctx, "ledger", &ledger) != 0 || !ledger || !*ledger)
        ledger = NULL; /* the node's first store */
    int rc = host->store(ctx, ledger, &st->ledger);
    if (rc != 0) {
        host->log(ctx, KS_LOG_ERROR,
                  "mailbox: node '%s' has no store %s%s%s for the idempotency ledger "
                  "(error %d); name one with `stores:`",
                  host->node_name(ctx), ledger ? "'" : "", ledger ? ledger : "",
                  ledger ? "'" : "", rc);
        free(st);
        return KS_FATAL;
    }
    void (*fn)(void) = NULL;
    rc = host->function(ctx, "handler", KS_FN_HANDLER, &fn);
    if (rc != 0 || !fn) {
        host->log(ctx, KS_LOG_ERROR,
                  "mailbox: node '%s' needs `functions: { handler: plugin.function }` "
                  "naming a KS_FN_HANDLER (error %d)",
                  host->node_name(ctx), rc);
        free(st);
        return KS_FATAL;
    }
    st->handler = (ks_handler_fn)fn;
    /* the consumer group is the application id (ABI 1.1); `group:` may
     * override it (a ledger shared by several applications' tasks) */
    const char *group = NULL;
    if (host->config_string(ctx, "group", &group) != 0 || !group || !*group)
        group = KS_API_HAS(host, application_id) ? host->application_id(ctx) : NULL;
    snprintf(st->group, sizeof st->group, "%s", group ? group : "");
    if (!(st->out = host->buf_new())) {
        free(st);
        return KS_FATAL;
    }
    *state = st;
    return KS_OK;
}

static int find_event_id(const ks_record *rec, char id[EVENT_ID_LEN + 1])
{
    int found = 0;
    for (size_t i = 0; i < rec->header_count; i++) {
        const ks_header *h = &rec->headers[i];
        if (h->name && strcmp(h->name, EVENT_ID_HEADER) == 0 && h->value_len == EVENT_ID_LEN) {
            memcpy(id, h->value, EVENT_ID_LEN);
            id[EVENT_ID_LEN] = '\0';
            found = 1; /* the last one wins, as rd_kafka_header_get_last */
        }
    }
    return found;
}

/* The result record's JSON; NULL when out of memory. Free with free(). */
static char *result_json(const char *status, ks_bytes result, const ks_record *rec)
{
    json_t *o = json_object();
    json_t *r = NULL;
    if (result.len) {
        json_error_t e;
        r = json_loadb(result.data, result.len, JSON_DECODE_ANY, &e);
        if (!r)
            r = json_stringn(result.data, result.len);
    }
    json_object_set_new(o, "status", json_string(status));
    json_object_set_new(o, "result", r ? r : json_null());
    json_object_set_new(o, "user", json_stringn(rec->key, rec->key_len));
    json_object_set_new(o, "partition", json_integer(rec->partition));
    json_object_set_new(o, "offset", json_integer(rec->offset));
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

static ks_verdict forward_result(ks_ctx *ctx, const ks_record *rec, const char *id,
                                 const void *value, size_t len)
{
    ks_header h = {"ks.user", rec->key, rec->key_len};
    ks_record out = {.key = id,
                     .key_len = EVENT_ID_LEN,
                     .value = value,
                     .value_len = len,
                     .timestamp = rec->timestamp,
                     .headers = &h,
                     .header_count = 1};
    return host->forward(ctx, &out) == 0 ? KS_OK : KS_RETRY;
}

static ks_verdict mailbox_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    mailbox_state *st = state;
    char id[EVENT_ID_LEN + 1];
    if (!rec->key || rec->key_len == 0 || !find_event_id(rec, id)) {
        host->log(ctx, KS_LOG_WARN,
                  "mailbox: command at %s[%d]@%lld has no %s; it did not come "
                  "from an outbox and has no row to report to",
                  rec->topic ? rec->topic : "-", (int)rec->partition,
                  (long long)rec->offset, !rec->key || !rec->key_len ? "user key" : "ks.event_id header");
        host->metric_add(ctx, "no_event_id", 1);
        return KS_SKIP;
    }
    char lk[500];
    int n = snprintf(lk, sizeof lk, LEDGER_PREFIX "%s/%s/%d/%020lld", st->group,
                     rec->topic ? rec->topic : "-", (int)rec->partition,
                     (long long)rec->offset);
    if (n < 0 || (size_t)n >= sizeof lk) {
        host->log(ctx, KS_LOG_ERROR, "mailbox: ledger key over 500 bytes (group %s)",
                  st->group);
        return KS_FATAL;
    }
    ks_bytes key = {lk, (size_t)n}, done;
    int rc = host->store_get(st->ledger, key, &done);
    if (rc == 0) {
        /* already processed: reconcile by sending the stored result again */
        if (st->already++ % 1000 == 0)
            host->log(ctx, KS_LOG_INFO,
                      "mailbox: event %s (%s[%d]@%lld) already processed; result sent "
                      "again, handler not run (%llu so far)",
                      id, rec->topic ? rec->topic : "-", (int)rec->partition,
                      (long long)rec->offset, (unsigned long long)st->already);
        host->metric_add(ctx, "already_processed", 1);
        /* copy: the borrowed value ends with the next store write */
        char *copy = malloc(done.len ? done.len : 1);
        if (!copy)
            return KS_RETRY;
        memcpy(copy, done.data, done.len);
        ks_verdict v = forward_result(ctx, rec, id, copy, done.len);
        free(copy);
        return v;
    }
    if (rc != KS_ERR_NOT_FOUND) {
        host->log(ctx, KS_LOG_WARN, "mailbox: ledger read failed (error %d); retrying", rc);
        return KS_RETRY;
    }
    host->buf_set(st->out, NULL, 0);
    ks_verdict v = st->handler(ctx, rec, st->out);
    const char *status;
    if (v == KS_OK)
        status = "SUCCESS";
    else if (v == KS_SKIP)
        status = "PUSHED_FAILURE";
    else
        return v; /* RETRY / FATAL: the batch aborts, nothing is kept */
    char *text = result_json(status, host->buf_get(st->out), rec);
    if (!text)
        return KS_RETRY;
    size_t len = strlen(text);
    rc = host->store_put(st->ledger, key, (ks_bytes){text, len});
    if (rc != 0) {
        free(text);
        if (rc == KS_ERR_STORE_FULL) {
            host->log(ctx, KS_LOG_ERROR,
                      "mailbox: the ledger store is full; raise its `map_size`");
            return KS_FATAL;
        }
        return KS_RETRY;
    }
    host->metric_add(ctx, v == KS_OK ? "success" : "pushed_failure", 1);
    ks_verdict fv = forward_result(ctx, rec, id, text, len);
    free(text);
    return fv;
}

static void mailbox_close(ks_ctx *ctx, void *state)
{
    (void)ctx;
    mailbox_state *st = state;
    if (st)
        host->buf_free(st->out);
    free(st);
}

static const ks_config_field mailbox_config[] = {
    {"ledger", KS_CONFIG_STRING, 0, "",
     "store of the idempotency ledger; default: the node's first store"},
    {"group", KS_CONFIG_STRING, 0, "",
     "consumer group in the ledger key; default: the application id"},
};

static const ks_processor_type mailbox_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "mailbox",
    .description = "runs a user's handler per command once (idempotency ledger) and "
                   "forwards (event id, result) for the outbox row",
    .flags = KS_PROC_NEEDS_STORE | KS_PROC_KEYED | KS_PROC_NEEDS_FUNCTIONS |
             KS_PROC_CHANGES_KEY,
    .config = mailbox_config,
    .config_count = sizeof mailbox_config / sizeof mailbox_config[0],
    .state_version = 1,
    .init = mailbox_init,
    .process = mailbox_process,
    .close = mailbox_close,
};

static const ks_processor_type *const processors[] = {&mailbox_type};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "mailbox",
    .version = "0.1.0",
    .build_id = KS_BUILD_ID,
    .processors = processors,
    .processor_count = 1,
    .functions = NULL,
    .function_count = 0,
};

KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *api)
{
    host = api;
    return &descriptor;
}
