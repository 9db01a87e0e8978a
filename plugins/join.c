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
 * With a global table (`global_tables:`, read whole by every process) the
 * lookup key may come from the stream record's value: config `key:` is a
 * JSON pointer (`/customer_id`; a string member gives its text, another
 * value its JSON text), as Kafka Streams' KStream#join(GlobalKTable,
 * KeyValueMapper, ...). The record key is then not needed (a record
 * without one is joined too); a value without that member has no match
 * (inner: no output, metric unmatched; left: the table side null), a
 * value that is not JSON is poison.
 *
 * join.streams, the windowed stream-stream join, is in join_streams.c;
 * the foreign-key join join.fk_subscribe / fk_register / fk_resolve in
 * join_fk.c; the joiners they all share in joiner.c.
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
 *
 * A table may also be a node's store (`table: counts`, or a side of
 * join.tables naming the node): a count's, aggregate's or reduce's values
 * as that node wrote them, no timestamp (the output keeps the record's or
 * change's own); the host says which (store_values, ABI 1.6). A count is
 * an int64: the JSON joiners write it as a JSON number, a joiner function
 * gets its 8 bytes big-endian.
 */
#include <kstreams/kstreams.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "join_fk.h"
#include "join_streams.h"
#include "joiner.h"
#include "keyed.h"

static const ks_host_api *host;

#define TABLE_TS_LEN 8 /* the timestamp before a table store's value */

typedef struct join_state {
    ks_store *table;     /* the table; a table-table join's left one */
    ks_store *right;     /* a table-table join's right table */
    int left;            /* 1: left join, 0: inner */
    int outer;           /* 1: outer (table-table joins only) */
    ks_joiner joiner;
    ks_keyed keyed;
    int values[2];       /* ks_store_values of table and right */
    char num[2][24];     /* a count's value as JSON text, per side */
    const char *key_ptr; /* `key:` (borrowed from the config), or NULL */
    ks_key_mapper_fn key_fn; /* `functions: { key: }`, or NULL */
    ks_buf *key_out;         /* key_fn's output; owned */
    char *key_buf;       /* the decoded lookup key; owned */
    size_t key_cap;
} join_state;

static const ks_config_field fields[] = {
    {"kind", KS_CONFIG_STRING, 0, "inner",
     "inner: only records whose key is in the table; left: every record"},
    {"joiner", KS_CONFIG_STRING, 0, "pair",
     "built-in JSON joiner: pair ({\"left\":..,\"right\":..}) or merge (object members); "
     "ignored when functions: { joiner: ... } names one"},
    {"key", KS_CONFIG_STRING, 0, NULL,
     "global tables: JSON pointer into the stream value giving the lookup key "
     "(default: the record key)"},
};

/* What store st's values hold: a table's on a host before ABI 1.6. */
static int values_of(ks_store *st)
{
    int v = KS_API_HAS(host, store_values) ? host->store_values(st) : KS_STORE_VALUES_TABLE;
    return v < 0 ? KS_STORE_VALUES_TABLE : v;
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
    s->values[0] = values_of(s->table);
    static const char *const kinds[] = {"inner", "left", NULL};
    int left = ks_join_config_choice(host, ctx, "kind", kinds);
    if (left < 0)
        return KS_FATAL;
    s->left = left;
    const char *ptr = NULL;
    if (host->config_string(ctx, "key", &ptr) == 0 && ptr) {
        if (!KS_API_HAS(host, json_find) || (ptr[0] && ptr[0] != '/')) {
            host->log(ctx, KS_LOG_ERROR, "join: node '%s': key '%s' is not a JSON pointer "
                                         "(\"/field\", or \"\" for the whole value)",
                      host->node_name(ctx), ptr);
            return KS_FATAL;
        }
        s->key_ptr = ptr;
    }
    void (*fn)(void) = NULL;
    int rc = host->function(ctx, "key", KS_FN_KEY_MAPPER, &fn);
    if (rc != 0 && rc != KS_ERR_NOT_FOUND)
        return KS_FATAL; /* logged by the host: not a key mapper */
    if (rc == 0 && !(s->key_out = host->buf_new()))
        return KS_FATAL;
    s->key_fn = (ks_key_mapper_fn)fn;
    return ks_joiner_init(&s->joiner, host, ctx);
}

static void join_close(ks_ctx *ctx, void *state)
{
    (void)ctx;
    join_state *s = state;
    if (s) {
        ks_joiner_free(&s->joiner);
        free(s->key_buf);
        host->buf_free(s->key_out);
    }
    free(s);
}

/* A value of a node's table (no timestamp) of side `side`: a count's as
 * JSON text for the JSON joiners. 0, or a verdict + 2. */
static int node_value(ks_ctx *ctx, join_state *s, int side, ks_bytes stored, ks_bytes *value)
{
    *value = stored;
    if (s->values[side] != KS_STORE_VALUES_INT64 || s->joiner.kind == KS_JOIN_FUNCTION)
        return 0;
    if (stored.len != 8) {
        host->log(ctx, KS_LOG_ERROR, "join: node '%s': count value of %zu bytes is not an "
                                     "int64",
                  host->node_name(ctx), stored.len);
        return 2 + (int)KS_FATAL;
    }
    int n = snprintf(s->num[side], sizeof s->num[side], "%" PRId64,
                     ks_int64_decode(stored.data));
    *value = (ks_bytes){s->num[side], (size_t)n};
    return 0;
}

/* Look key up in the table of side `side` (0: s->table, 1: s->right): 0
 * with *value (borrowed) and a table record's timestamp folded into *ts
 * (the later one wins), 1 when the table has no value, or a verdict + 2
 * when the store failed. */
static int table_get(ks_ctx *ctx, join_state *s, int side, ks_bytes key, ks_bytes *value,
                     int64_t *ts)
{
    ks_bytes stored;
    int rc = host->store_get(side ? s->right : s->table, key, &stored);
    if (rc == KS_ERR_NOT_FOUND)
        return 1;
    if (rc != 0)
        return 2 + (int)ks_keyed_store_failed(&s->keyed, ctx, "get", rc);
    if (s->values[side] != KS_STORE_VALUES_TABLE)
        return node_value(ctx, s, side, stored, value);
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

/* The lookup key at s->key_ptr in rec's value: 0 with *key (borrowed
 * from rec or s->key_buf), 1 when the value has none (or one the store
 * cannot hold), or a verdict + 2. */
static int extract_key(ks_ctx *ctx, join_state *s, const ks_record *rec, ks_bytes *key)
{
    ks_json_span v;
    int rc = host->json_find(rec->value, rec->value_len, s->key_ptr, &v);
    if (rc == KS_JSON_MISSING || (rc == KS_JSON_FOUND && v.type == KS_JSON_NULL))
        return 1;
    if (rc != KS_JSON_FOUND) {
        host->log(ctx, KS_LOG_WARN, "join: node '%s': poison record %s[%d]@%lld: value is "
                                    "not JSON, no key at '%s'",
                  host->node_name(ctx), rec->topic ? rec->topic : "-", (int)rec->partition,
                  (long long)rec->offset, s->key_ptr);
        return 2 + (int)KS_SKIP;
    }
    *key = (ks_bytes){v.data, v.len};
    if (v.type == KS_JSON_STRING) { /* the text, not its JSON quoting */
        size_t n = 0;
        if (host->json_string(&v, NULL, 0, &n) != 0)
            return 2 + (int)KS_SKIP;
        if (n > s->key_cap) {
            char *b = realloc(s->key_buf, n);
            if (!b)
                return 2 + (int)KS_RETRY;
            s->key_buf = b;
            s->key_cap = n;
        }
        host->json_string(&v, s->key_buf, s->key_cap, &n);
        *key = (ks_bytes){s->key_buf, n};
    }
    return key->len == 0 || key->len > KS_KEY_MAX ? 1 : 0;
}

/* The lookup key the node's key mapper function gives rec: as
 * extract_key. */
static int mapped_key(ks_ctx *ctx, join_state *s, const ks_record *rec, ks_bytes *key)
{
    ks_bytes k = {rec->key, rec->key_len}, v = {rec->value, rec->value_len};
    host->buf_set(s->key_out, NULL, 0);
    ks_verdict verdict = s->key_fn(host, k, v, s->key_out);
    if (verdict == KS_SKIP)
        host->log(ctx, KS_LOG_WARN, "join: node '%s': poison record %s[%d]@%lld: the key "
                                    "function refused it",
                  host->node_name(ctx), rec->topic ? rec->topic : "-", (int)rec->partition,
                  (long long)rec->offset);
    if (verdict != KS_OK)
        return 2 + (int)verdict;
    *key = host->buf_get(s->key_out);
    return key->len == 0 || key->len > KS_KEY_MAX ? 1 : 0;
}

/* The lookup key of rec: the record key, or the one `key:` or the key
 * function gives. 0, 1 (no key: no match) or a verdict + 2 (v: KS_OK
 * drops the record). */
static int lookup_key(ks_ctx *ctx, join_state *s, const ks_record *rec, ks_bytes *key)
{
    ks_verdict v;
    if (s->key_fn)
        return mapped_key(ctx, s, rec, key);
    if (!s->key_ptr) {
        if (ks_keyed_check(&s->keyed, ctx, rec, &v))
            return 2 + (int)v;
        *key = (ks_bytes){rec->key, rec->key_len};
        return 0;
    }
    if (!rec->value) { /* a tombstone joins nothing, as with the record key */
        host->metric_add(ctx, "null_values", 1);
        return 2 + (int)KS_OK;
    }
    return extract_key(ctx, s, rec, key);
}

static ks_verdict join_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    join_state *s = state;
    ks_bytes key, left = {rec->value, rec->value_len}, right;
    int rc = lookup_key(ctx, s, rec, &key);
    if (rc >= 2)
        return (ks_verdict)(rc - 2);
    int64_t ts = rec->timestamp;
    if (rc == 0)
        rc = table_get(ctx, s, 0, key, &right, &ts);
    if (rc >= 2)
        return (ks_verdict)(rc - 2);
    if (rc == 1 && !s->left) {
        host->metric_add(ctx, "unmatched", 1);
        return KS_OK;
    }
    return ks_joiner_emit(&s->joiner, ctx, rec, &left, rc == 0 ? &right : NULL, ts);
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
              "join: node '%s': %s '%s' is not a table the node reads (list both tables, "
              "or a node and a table, in `from:`)",
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
    int kind = ks_join_config_choice(host, ctx, "kind", kinds);
    if (kind < 0 || side_store(ctx, "left", &s->table) != KS_OK ||
        side_store(ctx, "right", &s->right) != KS_OK)
        return KS_FATAL;
    s->values[0] = values_of(s->table);
    s->values[1] = values_of(s->right);
    s->left = kind == 1;
    s->outer = kind == 2;
    return ks_joiner_init(&s->joiner, host, ctx);
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
    int lrc = table_get(ctx, s, 0, key, &l, &ts);
    int rrc = lrc >= 2 ? lrc : table_get(ctx, s, 1, key, &r, &ts);
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
    return ks_joiner_emit(&s->joiner, ctx, rec, has_l ? &l : NULL, has_r ? &r : NULL, ts);
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

static const ks_processor_type *const types[] = {
    &join_type, &tables_type, &ks_join_streams_type, &ks_join_fk_subscribe_type,
    &ks_join_fk_register_type, &ks_join_fk_resolve_type};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "join",
    .version = "1.4",
    .build_id = KS_BUILD_ID,
    .processors = types,
    .processor_count = sizeof types / sizeof types[0],
};

KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *api)
{
    host = api;
    ks_join_streams_set_host(api);
    ks_join_fk_set_host(api);
    return &descriptor;
}
