/*
 * join.c - the shipped plugin "join": processor type "join", a stream-table
 * join, and "tables", a table-table join (docs/tables-and-joins.md).
 *
 * The node names a table (`table:`); the engine makes the table's store the
 * node's first store. Each stream record looks its key up there, as of now
 * (the updates the task applied before this record), as Kafka Streams'
 * KStream#join / #leftJoin with a KTable:
 *  - `kind: inner` forwards only records whose key has a table value;
 *    `kind: left` forwards every record, the table side null when absent;
 *  - a record without a key, or a tombstone, is dropped (null_keys,
 *    null_values); a key over the store's 500 bytes is poison (KS_SKIP);
 *  - the output has the stream record's key and the later of the two
 *    timestamps (the stream record's, the table record's).
 * The joined value comes from the joiner: `functions: { joiner: p.fn }` (a
 * ks_joiner_fn, ABI 1.4), else the built-in JSON joiner `joiner:`
 *  - `pair`:  {"left": <stream value>, "right": <table value or null>}
 *  - `merge`: the stream value's members, then the table value's members the
 *    stream value lacks (both must be JSON objects, else the record is
 *    poison: KS_SKIP).
 *
 * join.tables reads the updates of two tables (`from: [a, b]`, config
 * `left: a`, `right: b`; the engine gives the node both tables' stores):
 * after each change of either, the join of both tables' current values for
 * the key (`kind: inner` both present, `left` the left one, `outer`
 * either), else a tombstone, at the latest of the three timestamps; as
 * Kafka Streams' KTable#join / #leftJoin / #outerJoin without old values
 * (a tombstone also when the key had no result before).
 *
 * Table store values are the table record's timestamp, 8 bytes big-endian,
 * then its value (engine/runtime/table.h). State: none of its own
 * (state_version 1; the table's store carries no version).
 */
#include <kstreams/kstreams.h>

#include <stdlib.h>
#include <string.h>

#include "keyed.h"

static const ks_host_api *host;

#define TABLE_TS_LEN 8 /* the timestamp before a table store's value */

typedef enum joiner_kind { JOIN_PAIR, JOIN_MERGE, JOIN_FUNCTION } joiner_kind;

typedef struct join_state {
    ks_store *table;     /* the table; a table-table join's left one */
    ks_store *right;     /* a table-table join's right table */
    int left;            /* 1: left join, 0: inner */
    int outer;           /* 1: outer (table-table joins only) */
    joiner_kind joiner;
    ks_joiner_fn fn;     /* JOIN_FUNCTION */
    ks_buf *out;         /* JOIN_FUNCTION's output */
    ks_keyed keyed;
} join_state;

static const ks_config_field fields[] = {
    {"kind", KS_CONFIG_STRING, 0, "inner",
     "inner: only records whose key is in the table; left: every record"},
    {"joiner", KS_CONFIG_STRING, 0, "pair",
     "built-in JSON joiner: pair ({\"left\":..,\"right\":..}) or merge (object members); "
     "ignored when functions: { joiner: ... } names one"},
};

/* The index of config `key`'s value among `choices` (NULL-terminated; 0
 * when unset), or -1 (logged) when it is none of them. */
static int config_choice(ks_ctx *ctx, const char *key, const char *const *choices)
{
    const char *v = NULL;
    if (host->config_string(ctx, key, &v) != 0 || !v)
        return 0;
    for (int i = 0; choices[i]; i++)
        if (strcmp(v, choices[i]) == 0)
            return i;
    host->log(ctx, KS_LOG_ERROR, "join: node '%s': %s '%s' is not one of %s, %s%s%s",
              host->node_name(ctx), key, v, choices[0], choices[1], choices[2] ? ", " : "",
              choices[2] ? choices[2] : "");
    return -1;
}

/* The joiner: `functions: { joiner: ... }`, else `joiner:`. */
static ks_verdict joiner_init(ks_ctx *ctx, join_state *s)
{
    static const char *const joiners[] = {"pair", "merge", NULL};
    int merge = config_choice(ctx, "joiner", joiners);
    if (merge < 0)
        return KS_FATAL;
    s->joiner = merge ? JOIN_MERGE : JOIN_PAIR;
    void (*fn)(void) = NULL;
    int rc = host->function(ctx, "joiner", KS_FN_JOINER, &fn);
    if (rc == KS_ERR_NOT_FOUND)
        return KS_OK;
    if (rc != 0)
        return KS_FATAL; /* logged by the host: not a joiner */
    s->fn = (ks_joiner_fn)fn;
    s->joiner = JOIN_FUNCTION;
    return (s->out = host->buf_new()) ? KS_OK : KS_FATAL;
}

static ks_verdict join_init(ks_ctx *ctx, void **state)
{
    join_state *s = calloc(1, sizeof *s);
    if (!s)
        return KS_FATAL;
    *state = s;
    ks_keyed_init(&s->keyed, host, "join");
    if (host->store(ctx, NULL, &s->table) != 0) {
        host->log(ctx, KS_LOG_ERROR, "join: node '%s' has no table (`table:`)",
                  host->node_name(ctx));
        return KS_FATAL;
    }
    static const char *const kinds[] = {"inner", "left", NULL};
    int left = config_choice(ctx, "kind", kinds);
    if (left < 0)
        return KS_FATAL;
    s->left = left;
    return joiner_init(ctx, s);
}

static void join_close(ks_ctx *ctx, void *state)
{
    (void)ctx;
    join_state *s = state;
    if (s)
        host->buf_free(s->out);
    free(s);
}

/* The decoded name of member key `k` into buf (NUL-terminated); NULL when
 * it does not fit or is not a string. */
static const char *member_name(const ks_json_span *k, char *buf, size_t cap)
{
    size_t len;
    if (host->json_string(k, buf, cap - 1, &len) != 0 || len >= cap - 1)
        return NULL;
    buf[len] = '\0';
    return buf;
}

static int has_member(const ks_json_span *obj, const char *name)
{
    ks_json_iter it;
    ks_json_span k, v;
    char buf[512];
    if (host->json_iter_init(&it, obj) != KS_JSON_FOUND)
        return 0;
    while (host->json_iter_next(&it, &k, &v) == 1) {
        const char *n = member_name(&k, buf, sizeof buf);
        if (n && strcmp(n, name) == 0)
            return 1;
    }
    return 0;
}

/* Add every member of object `obj` to w, or those `skip` (an object, may
 * be NULL) lacks. 0, or -1 when a text is not a JSON object. */
static int put_members(ks_json_writer *w, const ks_json_span *obj, const ks_json_span *skip)
{
    ks_json_iter it;
    ks_json_span k, v;
    char buf[512];
    if (obj->type != KS_JSON_OBJECT || host->json_iter_init(&it, obj) != KS_JSON_FOUND)
        return -1;
    int r;
    while ((r = host->json_iter_next(&it, &k, &v)) == 1) {
        const char *n = member_name(&k, buf, sizeof buf);
        if (!n)
            return -1; /* a name over 510 bytes: not worth a second path */
        if (skip && has_member(skip, n))
            continue;
        if (host->json_put_raw(w, n, &v) != 0)
            return -1;
    }
    return r == 0 ? 0 : -1;
}

/* The whole text as a span (its type read from the text). */
static int whole(const void *data, size_t len, ks_json_span *out)
{
    return host->json_find(data, len, "", out) == KS_JSON_FOUND ? 0 : -1;
}

/* The built-in joiners: the joined JSON of `left` and `right` (either
 * NULL: none) into *json (owned by the host until the next json_writer
 * call). 0, or -1 when the values are not what the joiner needs. */
static int json_join(ks_ctx *ctx, const join_state *s, const ks_bytes *left,
                     const ks_bytes *right, const void **json, size_t *len)
{
    ks_json_writer *w = host->json_writer(ctx);
    ks_json_span l, r;
    if (!w || (left && whole(left->data, left->len, &l) != 0) ||
        (right && whole(right->data, right->len, &r) != 0))
        return -1;
    int rc;
    if (s->joiner == JOIN_PAIR) {
        rc = left ? host->json_put_raw(w, "left", &l) : host->json_put_null(w, "left");
        if (rc == 0)
            rc = right ? host->json_put_raw(w, "right", &r) : host->json_put_null(w, "right");
    } else {
        rc = left ? put_members(w, &l, NULL) : 0;
        if (rc == 0 && right)
            rc = put_members(w, &r, left ? &l : NULL);
    }
    return rc == 0 && host->json_finish(w, json, len) == 0 ? 0 : -1;
}

/* Forward, under rec's key at `ts`, the joined value of `left` and
 * `right` (either NULL: none). */
static ks_verdict emit(ks_ctx *ctx, join_state *s, const ks_record *rec, const ks_bytes *left,
                       const ks_bytes *right, int64_t ts)
{
    ks_record out = *rec;
    out.timestamp = ts;
    if (s->joiner == JOIN_FUNCTION) {
        host->buf_set(s->out, NULL, 0);
        ks_bytes key = {rec->key, rec->key_len};
        ks_bytes l = left ? *left : (ks_bytes){NULL, 0};
        ks_verdict v = s->fn(host, key, l, right, s->out);
        if (v != KS_OK)
            return v;
        ks_bytes b = host->buf_get(s->out);
        out.value = b.len ? b.data : NULL; /* left empty: a tombstone */
        out.value_len = b.len;
    } else if (json_join(ctx, s, left, right, &out.value, &out.value_len) != 0) {
        host->log(ctx, KS_LOG_WARN,
                  "join: node '%s': the %s joiner needs JSON %s on both sides; record "
                  "at offset %lld is poison",
                  host->node_name(ctx), s->joiner == JOIN_PAIR ? "pair" : "merge",
                  s->joiner == JOIN_PAIR ? "values" : "objects", (long long)rec->offset);
        return KS_SKIP;
    }
    return host->forward(ctx, &out) == 0 ? KS_OK : KS_RETRY;
}

/* Look key up in table store st: 0 with *value (borrowed) and the table
 * record's timestamp folded into *ts (the later one wins), 1 when the
 * table has no value, or a verdict + 2 when the store failed. */
static int table_get(ks_ctx *ctx, join_state *s, ks_store *st, ks_bytes key, ks_bytes *value,
                     int64_t *ts)
{
    ks_bytes stored;
    int rc = host->store_get(st, key, &stored);
    if (rc == KS_ERR_NOT_FOUND)
        return 1;
    if (rc != 0)
        return 2 + (int)ks_keyed_store_failed(&s->keyed, ctx, "get", rc);
    if (stored.len < TABLE_TS_LEN) {
        host->log(ctx, KS_LOG_ERROR, "join: node '%s': table value of %zu bytes has no "
                                     "timestamp; is this the store of a table?",
                  host->node_name(ctx), stored.len);
        return 2 + (int)KS_FATAL;
    }
    int64_t table_ts = ks_int64_decode(stored.data);
    if (table_ts > *ts)
        *ts = table_ts;
    *value = (ks_bytes){(const unsigned char *)stored.data + TABLE_TS_LEN,
                        stored.len - TABLE_TS_LEN};
    return 0;
}

static ks_verdict join_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    join_state *s = state;
    ks_verdict v;
    if (ks_keyed_check(&s->keyed, ctx, rec, &v))
        return v;
    ks_bytes key = {rec->key, rec->key_len}, left = {rec->value, rec->value_len}, right;
    int64_t ts = rec->timestamp;
    int rc = table_get(ctx, s, s->table, key, &right, &ts);
    if (rc >= 2)
        return (ks_verdict)(rc - 2);
    if (rc == 1 && !s->left) {
        host->metric_add(ctx, "unmatched", 1);
        return KS_OK;
    }
    return emit(ctx, s, rec, &left, rc == 0 ? &right : NULL, ts);
}

static const ks_processor_type join_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "join",
    .description = "stream-table join (inner, left) with a named or the JSON joiner",
    .flags = KS_PROC_NEEDS_STORE,
    .config = fields,
    .config_count = sizeof fields / sizeof fields[0],
    .state_version = 1,
    .init = join_init,
    .process = join_process,
    .close = join_close,
};

/* ---- table-table joins ------------------------------------------------- */

static const ks_config_field table_fields[] = {
    {"left", KS_CONFIG_STRING, 1, NULL, "the left table (one of the node's from:)"},
    {"right", KS_CONFIG_STRING, 1, NULL, "the right table (one of the node's from:)"},
    {"kind", KS_CONFIG_STRING, 0, "inner",
     "inner: a result when both tables have the key; left: when the left one has it; "
     "outer: when either has it"},
    {"joiner", KS_CONFIG_STRING, 0, "pair",
     "built-in JSON joiner: pair or merge; ignored when functions: { joiner: ... } names one"},
};

/* Table `key` of the node's config, which must be one of its tables. */
static ks_verdict side_store(ks_ctx *ctx, const char *key, ks_store **out)
{
    const char *name = NULL;
    if (host->config_string(ctx, key, &name) == 0 && host->store(ctx, name, out) == 0)
        return KS_OK;
    host->log(ctx, KS_LOG_ERROR,
              "join: node '%s': %s '%s' is not a table the node reads (list both tables "
              "in `from:`)",
              host->node_name(ctx), key, name ? name : "");
    return KS_FATAL;
}

static ks_verdict tables_init(ks_ctx *ctx, void **state)
{
    join_state *s = calloc(1, sizeof *s);
    if (!s)
        return KS_FATAL;
    *state = s;
    ks_keyed_init(&s->keyed, host, "join");
    static const char *const kinds[] = {"inner", "left", "outer", NULL};
    int kind = config_choice(ctx, "kind", kinds);
    if (kind < 0 || side_store(ctx, "left", &s->table) != KS_OK ||
        side_store(ctx, "right", &s->right) != KS_OK)
        return KS_FATAL;
    s->left = kind == 1;
    s->outer = kind == 2;
    return joiner_init(ctx, s);
}

/* A change of either table (already applied to its store): the join of
 * both tables' values for the key as they are now, or a tombstone when
 * the kind gives no result (also when it gave none before either). The
 * timestamp: the latest of the change and the two values. */
static ks_verdict tables_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    join_state *s = state;
    if (!rec->key || rec->key_len == 0)
        return KS_OK; /* the table ignored it too */
    ks_bytes key = {rec->key, rec->key_len}, l, r;
    int64_t ts = rec->timestamp;
    int lrc = table_get(ctx, s, s->table, key, &l, &ts);
    int rrc = lrc >= 2 ? lrc : table_get(ctx, s, s->right, key, &r, &ts);
    if (lrc >= 2 || rrc >= 2)
        return (ks_verdict)((lrc >= 2 ? lrc : rrc) - 2);
    int has_l = lrc == 0, has_r = rrc == 0;
    int result = s->outer ? has_l || has_r : s->left ? has_l : has_l && has_r;
    if (!result) {
        ks_record out = *rec;
        out.value = NULL;
        out.value_len = 0;
        out.timestamp = ts;
        return host->forward(ctx, &out) == 0 ? KS_OK : KS_RETRY;
    }
    return emit(ctx, s, rec, has_l ? &l : NULL, has_r ? &r : NULL, ts);
}

static const ks_processor_type tables_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "tables",
    .description = "table-table join (inner, left, outer) of the two tables in from:",
    .flags = KS_PROC_NEEDS_STORE,
    .config = table_fields,
    .config_count = sizeof table_fields / sizeof table_fields[0],
    .state_version = 1,
    .init = tables_init,
    .process = tables_process,
    .close = join_close,
};

static const ks_processor_type *const types[] = {&join_type, &tables_type};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "join",
    .version = "1.1",
    .build_id = KS_BUILD_ID,
    .processors = types,
    .processor_count = 2,
};

KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *api)
{
    host = api;
    return &descriptor;
}
