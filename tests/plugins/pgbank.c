/*
 * pgbank.c - test plugin "pgbank": the mailbox handler pgbank.apply
 * (KS_FN_HANDLER) that keeps its effect in PostgreSQL through the host's
 * sql_exec (ABI 1.7), in the ledger's transaction.
 *
 * Per command (JSON {"amount": N, "retry": true|false, "bad": true|false}):
 * INSERT one row into `balances` (event id, user, amount, a note full of
 * quotes and backslashes, and 255 raw bytes 0x01..0xff as bytea), then
 * read back this user's total with a SELECT. "retry": the first attempt
 * in this process returns KS_RETRY after its INSERT (which must then be
 * rolled back). "bad": a second INSERT breaks a CHECK constraint, the
 * handler returns KS_SKIP (PUSHED_FAILURE; its first INSERT rolled back).
 * "commit": after its INSERT it tries to COMMIT through sql_exec, which
 * is refused (KS_FATAL), and returns that verdict.
 * Result: {"total": <the user's sum so far>}.
 */
#include <kstreams/kstreams.h>

#include <stdio.h>
#include <string.h>

static const ks_host_api *host;

#define NOTE "O'Brien said \"hi\"; -- \\ DROP TABLE balances; '' \\x41"

/* Whether the JSON value at `ptr` is true. */
static int flag(const ks_record *c, const char *ptr)
{
    ks_json_span s;
    return c->value && host->json_find(c->value, c->value_len, ptr, &s) == KS_JSON_FOUND &&
           s.len == 4 && memcmp(s.data, "true", 4) == 0;
}

/* The event id header (32 hex digits) into id. */
static int event_id(const ks_record *c, char id[33])
{
    for (size_t i = 0; i < c->header_count; i++)
        if (!strcmp(c->headers[i].name, "ks.event_id") && c->headers[i].value_len == 32) {
            memcpy(id, c->headers[i].value, 32);
            id[32] = '\0';
            return 1;
        }
    return 0;
}

/* Events that already failed once with KS_RETRY in this process. */
#define RETRIED_MAX 64
static char retried[RETRIED_MAX][33];
static int retried_n;

static int retried_before(const char *id)
{
    for (int i = 0; i < retried_n; i++)
        if (!strcmp(retried[i], id))
            return 1;
    if (retried_n < RETRIED_MAX)
        memcpy(retried[retried_n++], id, 33);
    return 0;
}

static ks_verdict apply(ks_ctx *ctx, const ks_record *c, ks_buf *out)
{
    char id[33], user[256], amount[32] = "0";
    if (!event_id(c, id) || c->key_len >= sizeof user)
        return KS_SKIP;
    memcpy(user, c->key, c->key_len);
    user[c->key_len] = '\0';
    ks_json_span s;
    int64_t a;
    if (c->value && host->json_find(c->value, c->value_len, "/amount", &s) == KS_JSON_FOUND &&
        host->json_int64(&s, &a) == 0)
        snprintf(amount, sizeof amount, "%lld", (long long)a);
    unsigned char blob[255];
    for (int i = 0; i < 255; i++)
        blob[i] = (unsigned char)(i + 1);
    const char *v[] = {id, user, amount, NOTE, (const char *)blob};
    const int len[] = {-1, -1, -1, -1, (int)sizeof blob};
    ks_verdict r = host->sql_exec(ctx,
                                  "INSERT INTO balances (event_id, user_id, amount, note, blob) "
                                  "VALUES ($1, $2, $3::bigint, $4, $5)",
                                  5, v, len, NULL);
    if (r != KS_OK)
        return r;
    if (flag(c, "/retry") && !retried_before(id))
        return KS_RETRY;
    if (flag(c, "/commit"))
        return host->sql_exec(ctx, "COMMIT", 0, NULL, NULL, NULL);
    if (flag(c, "/bad")) {
        const char *b[] = {id, user};
        r = host->sql_exec(ctx,
                           "INSERT INTO balances (event_id, user_id, amount, note) "
                           "VALUES ($1, $2, -1, 'negative')",
                           2, b, NULL, NULL);
        return r == KS_OK ? KS_FATAL : r; /* the CHECK must refuse it */
    }
    ks_sql_result *res = NULL;
    const char *q[] = {user};
    r = host->sql_exec(ctx, "SELECT sum(amount)::text FROM balances WHERE user_id = $1", 1, q,
                       NULL, &res);
    if (r != KS_OK)
        return r;
    ks_bytes total = {"0", 1};
    (void)host->sql_value(res, 0, 0, &total);
    char json[64];
    int n = snprintf(json, sizeof json, "{\"total\":%.*s}", (int)total.len,
                     (const char *)total.data);
    host->sql_free(res);
    host->buf_set(out, json, (size_t)n);
    return KS_OK;
}

static const ks_function functions[] = {
    {"apply", KS_FN_HANDLER, (void (*)(void))apply},
};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "pgbank",
    .version = "1.0.0",
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
