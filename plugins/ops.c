/*
 * ops.c - the shipped plugin "ops": everyday stateless operators over JSON
 * values, configured in YAML only (docs/operators.md).
 *
 *   ops.filter      keep the records whose value satisfies `where:`
 *   ops.map         build a new JSON object from fields, constants, the key
 *   ops.select_key  a new key from a field of the value (or the value)
 *   ops.flat_map    one record per element of an array in the value
 *   ops.branch      send each record to the first route whose `where:` holds
 *
 * Nested config values (predicates, field lists) reach init() as JSON text
 * (the host renders a YAML mapping or list under `config:` that way); init
 * compiles them once (ops_config.h) and refuses a bad config with a message
 * naming the config key and the place inside it. `kstreams check` runs the
 * same compilers and reports at FILE:LINE:COL. Per record nothing is
 * parsed: the value is checked with ks_json_valid() (the json serde's own
 * check) and read in place with json_ptr.h.
 *
 * Verdicts: a value that is not JSON is poison (KS_SKIP, the pipeline's
 * poison policy), logged with the check's reason and byte position; a missing
 * field is never an error by itself (see each operator); out of memory and
 * failed forwards are KS_RETRY; a branch route naming no child is KS_FATAL.
 * Tombstones (NULL values) pass through filter, map and flat_map unchanged,
 * go to branch's default, and are "missing" for select_key.
 *
 * Serdes (host input_serde/child_serde, ABI 1.6; on an older engine
 * everything is as if they were unknown): an input whose values are int64
 * is warned about at init (every record would be poison); map's
 * `{ key: auto }` renders the key by the input's key serde; select_key's
 * `format: auto` writes the new key in the serde its children take (int64:
 * 8 bytes big-endian; json: the JSON text as written; else the text).
 */
#include <kstreams/kstreams.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/json_valid.h"
#include "json/json_ptr.h"
#include "ops/ops_config.h"
#include "ops/ops_map.h"
#include "ops/ops_pred.h"

static const ks_host_api *host;

/* select_key's way of writing the new key */
typedef enum key_format { KEY_TEXT, KEY_JSON, KEY_INT64 } key_format;

typedef struct ops_state {
    const char *who; /* "ops.filter", ... for messages */
    ks_pred *where;  /* filter */
    ks_routes routes; /* branch */
    const char *dflt; /* branch default child; NULL: drop */
    ks_map *map;      /* map */
    const char *path; /* select_key, flat_map: a pointer */
    size_t path_len;
    ks_on_missing missing;
    key_format format;  /* select_key */
    int checked;        /* the engine checked every input value (input_checked) */
    ks_scratch scratch; /* decoded strings */
    ks_scratch out;     /* built values and keys */
} ops_state;

static void ops_close(ks_ctx *ctx, void *state)
{
    (void)ctx;
    ops_state *st = state;
    if (!st)
        return;
    ks_pred_free(st->where);
    ks_routes_free(&st->routes);
    ks_map_free(st->map);
    ks_scratch_free(&st->scratch);
    ks_scratch_free(&st->out);
    free(st);
}

/* The serdes of the node's input (UNKNOWN on an engine before 1.6). */
static void input_serde(ks_ctx *ctx, ks_serde_kind *key, ks_serde_kind *value)
{
    *key = *value = KS_SERDE_KIND_UNKNOWN;
    if (KS_API_HAS(host, input_serde))
        host->input_serde(ctx, key, value);
}

static ops_state *new_state(ks_ctx *ctx, const char *who)
{
    ops_state *st = calloc(1, sizeof *st);
    if (!st) {
        host->log(ctx, KS_LOG_ERROR, "%s: out of memory", who);
        return NULL;
    }
    st->who = who;
    st->checked = KS_API_HAS(host, input_checked) && host->input_checked(ctx) == 1;
    ks_serde_kind k, v;
    input_serde(ctx, &k, &v);
    if (v == KS_SERDE_KIND_INT64)
        host->log(ctx, KS_LOG_WARN, "%s: node '%s' reads JSON values, but its input's values "
                  "are int64 (8 bytes): every record will be poison", who,
                  host->node_name(ctx));
    return st;
}

/* Log a refused config key and fail init. */
static ks_verdict bad_config(ks_ctx *ctx, ops_state *st, const char *key, const ks_cfg_err *e)
{
    host->log(ctx, KS_LOG_ERROR, "%s: node '%s': config '%s': %s", st->who,
              host->node_name(ctx), key, e->msg);
    ops_close(ctx, st);
    return KS_FATAL;
}

/* The config string `key`; NULL (after logging) when the host has none. */
static const char *config(ks_ctx *ctx, ops_state *st, const char *key)
{
    const char *v = NULL;
    if (host->config_string(ctx, key, &v) != 0)
        host->log(ctx, KS_LOG_ERROR, "%s: node '%s' needs config key '%s'", st->who,
                  host->node_name(ctx), key);
    return v;
}

/* ---- record checks -------------------------------------------------------- */

/* The value an ops node is forwarding right now, which it checked or
 * built itself and so knows to be JSON: an ops child handed the same bytes
 * need not check them again (a pipeline filter -> map -> branch checks
 * each value once). Set only around a forward call and restored after it,
 * so it never outlives the call; one per thread, as the children run on
 * the forwarding thread. */
static __thread const void *known_json;
static __thread size_t known_len;

/* forward (child NULL) or forward_to, with rec's value marked as JSON */
static int fwd(ks_ctx *ctx, const char *child, const ks_record *rec)
{
    const void *saved = known_json;
    size_t saved_len = known_len;
    known_json = rec->value;
    known_len = rec->value_len;
    int rc = child ? host->forward_to(ctx, child, rec) : host->forward(ctx, rec);
    known_json = saved;
    known_len = saved_len;
    return rc;
}

/* The record's value as JSON in *doc: 1; 0 for a tombstone; -1 when it is
 * not JSON (logged with the reason: the caller returns KS_SKIP). */
static int value_json(ks_ctx *ctx, const ops_state *st, const ks_record *rec, ks_json_span *doc)
{
    if (!rec->value)
        return 0;
    ks_json_error e;
    if ((st->checked || (rec->value == known_json && rec->value_len == known_len)) &&
        ks_json_root(rec->value, rec->value_len, doc) == 0)
        return 1;
    if (ks_json_check(rec->value, rec->value_len, &e) == 0 &&
        ks_json_root(rec->value, rec->value_len, doc) == 0)
        return 1;
    host->log(ctx, KS_LOG_WARN, "%s: poison record %s[%d]@%lld: value is not JSON: %s",
              st->who, rec->topic ? rec->topic : "-", (int)rec->partition,
              (long long)rec->offset, e.text);
    if (KS_API_HAS(host, skip_reason)) { /* for the engine's log and the dead letter */
        char why[160];
        snprintf(why, sizeof why, "%s: value is not JSON: %s", st->who, e.text);
        host->skip_reason(ctx, why);
    }
    host->metric_add(ctx, "invalid_json", 1);
    return -1;
}

/* What select_key and flat_map do when their path is missing. */
static ks_verdict missing(ks_ctx *ctx, const ops_state *st, const ks_record *rec,
                          const char *what)
{
    switch (st->missing) {
    case KS_MISSING_DROP:
        host->metric_add(ctx, "missing_dropped", 1);
        return KS_OK;
    case KS_MISSING_POISON:
        host->log(ctx, KS_LOG_WARN, "%s: poison record %s[%d]@%lld: %s '%s'", st->who,
                  rec->topic ? rec->topic : "-", (int)rec->partition, (long long)rec->offset,
                  what, st->path);
        return KS_SKIP;
    default:
        host->log(ctx, KS_LOG_ERROR, "%s: record %s[%d]@%lld: %s '%s' (on_missing: fail)",
                  st->who, rec->topic ? rec->topic : "-", (int)rec->partition,
                  (long long)rec->offset, what, st->path);
        return KS_FATAL;
    }
}

static ks_verdict forwarded(int rc)
{
    return rc == 0 ? KS_OK : KS_RETRY;
}

/* ---- filter --------------------------------------------------------------- */

static ks_verdict filter_init(ks_ctx *ctx, void **state)
{
    ops_state *st = new_state(ctx, "ops.filter");
    const char *where = st ? config(ctx, st, "where") : NULL;
    if (!where) {
        ops_close(ctx, st);
        return KS_FATAL;
    }
    ks_cfg_err e;
    if (ks_pred_compile_text(where, &st->where, &e) != 0)
        return bad_config(ctx, st, "where", &e);
    *state = st;
    return KS_OK;
}

static ks_verdict filter_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    ops_state *st = state;
    ks_json_span doc;
    int have = value_json(ctx, st, rec, &doc);
    if (have < 0)
        return KS_SKIP;
    if (have == 0)
        return forwarded(fwd(ctx, NULL, rec));
    int keep = ks_pred_eval(st->where, &doc, &st->scratch);
    if (keep < 0)
        return KS_RETRY;
    return keep ? forwarded(fwd(ctx, NULL, rec)) : KS_OK;
}

/* ---- branch --------------------------------------------------------------- */

static ks_verdict branch_init(ks_ctx *ctx, void **state)
{
    ops_state *st = new_state(ctx, "ops.branch");
    const char *routes = st ? config(ctx, st, "routes") : NULL;
    if (!routes) {
        ops_close(ctx, st);
        return KS_FATAL;
    }
    ks_cfg_err e;
    if (ks_routes_compile(routes, &st->routes, &e) != 0)
        return bad_config(ctx, st, "routes", &e);
    if (host->config_string(ctx, "default", &st->dflt) != 0 || !st->dflt[0])
        st->dflt = NULL;
    *state = st;
    return KS_OK;
}

static ks_verdict route_to(ks_ctx *ctx, const ops_state *st, const char *child,
                           const ks_record *rec)
{
    int rc = fwd(ctx, child, rec);
    if (rc == KS_ERR_NOT_FOUND) {
        host->log(ctx, KS_LOG_ERROR, "%s: node '%s' has no child '%s': give a node or sink "
                  "`from: %s` and `name: %s`", st->who, host->node_name(ctx), child,
                  host->node_name(ctx), child);
        return KS_FATAL;
    }
    return forwarded(rc);
}

static ks_verdict branch_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    ops_state *st = state;
    ks_json_span doc;
    int have = value_json(ctx, st, rec, &doc);
    if (have < 0)
        return KS_SKIP;
    for (size_t i = 0; have && i < st->routes.n; i++) {
        int r = ks_pred_eval(st->routes.r[i].where, &doc, &st->scratch);
        if (r < 0)
            return KS_RETRY;
        if (r)
            return route_to(ctx, st, st->routes.r[i].to, rec);
    }
    if (st->dflt)
        return route_to(ctx, st, st->dflt, rec);
    host->metric_add(ctx, "unrouted", 1);
    return KS_OK;
}

/* ---- map ------------------------------------------------------------------ */

static ks_verdict map_init(ks_ctx *ctx, void **state)
{
    ops_state *st = new_state(ctx, "ops.map");
    const char *fields = st ? config(ctx, st, "fields") : NULL;
    if (!fields) {
        ops_close(ctx, st);
        return KS_FATAL;
    }
    ks_cfg_err e;
    if (ks_map_compile(fields, &st->map, &e) != 0)
        return bad_config(ctx, st, "fields", &e);
    ks_serde_kind k, v;
    input_serde(ctx, &k, &v);
    ks_map_key_serde(st->map, k == KS_SERDE_KIND_INT64  ? KS_MAP_KEY_INT64
                              : k == KS_SERDE_KIND_JSON ? KS_MAP_KEY_JSON
                                                        : KS_MAP_KEY_STRING);
    *state = st;
    return KS_OK;
}

static ks_verdict map_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    ops_state *st = state;
    ks_json_span doc;
    int have = value_json(ctx, st, rec, &doc);
    if (have < 0)
        return KS_SKIP;
    if (have == 0)
        return forwarded(fwd(ctx, NULL, rec));
    const char *why = NULL;
    int rc = ks_map_build(st->map, &doc, rec->key, rec->key_len, &st->out, &why);
    if (rc < 0)
        return KS_RETRY;
    if (why) {
        host->log(ctx, KS_LOG_WARN, "%s: poison record %s[%d]@%lld: %s", st->who,
                  rec->topic ? rec->topic : "-", (int)rec->partition, (long long)rec->offset,
                  why);
        return KS_SKIP;
    }
    ks_record out = *rec;
    out.value = st->out.data;
    out.value_len = st->out.len;
    return forwarded(fwd(ctx, NULL, &out));
}

/* ---- select_key and flat_map: a path and on_missing ------------------------- */

static ks_verdict path_init(ks_ctx *ctx, void **state, const char *who)
{
    ops_state *st = new_state(ctx, who);
    const char *miss = NULL;
    if (!st || !(st->path = config(ctx, st, "path")) || !(miss = config(ctx, st, "on_missing"))) {
        ops_close(ctx, st);
        return KS_FATAL;
    }
    ks_cfg_err e;
    st->path_len = strlen(st->path);
    if (ks_ops_path_check(st->path, &e) != 0)
        return bad_config(ctx, st, "path", &e);
    if (ks_ops_on_missing(miss, &st->missing, &e) != 0)
        return bad_config(ctx, st, "on_missing", &e);
    *state = st;
    return KS_OK;
}

static ks_verdict select_key_init(ks_ctx *ctx, void **state)
{
    ks_verdict v = path_init(ctx, state, "ops.select_key");
    if (v != KS_OK)
        return v;
    ops_state *st = *state;
    const char *format = config(ctx, st, "format");
    ks_serde_kind k = KS_SERDE_KIND_UNKNOWN;
    if (format && strcmp(format, "auto") == 0) {
        if (KS_API_HAS(host, child_serde))
            host->child_serde(ctx, NULL, &k, NULL);
        st->format = k == KS_SERDE_KIND_INT64 ? KEY_INT64
                     : k == KS_SERDE_KIND_JSON ? KEY_JSON
                                               : KEY_TEXT;
    } else if (format && strcmp(format, "text") == 0) {
        st->format = KEY_TEXT;
    } else if (format && strcmp(format, "json") == 0) {
        st->format = KEY_JSON;
    } else if (format && strcmp(format, "int64") == 0) {
        st->format = KEY_INT64;
    } else {
        ks_cfg_err e;
        *state = NULL;
        if (!format) {
            ops_close(ctx, st);
            return KS_FATAL;
        }
        ks_ops_key_format(format, &e);
        return bad_config(ctx, st, "format", &e);
    }
    return KS_OK;
}

static ks_verdict flat_map_init(ks_ctx *ctx, void **state)
{
    return path_init(ctx, state, "ops.flat_map");
}

static ks_verdict select_key_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    ops_state *st = state;
    ks_json_span doc, v;
    int have = value_json(ctx, st, rec, &doc);
    if (have < 0)
        return KS_SKIP;
    if (!have || ks_json_at(&doc, st->path, st->path_len, &v) != KS_JSON_FOUND)
        return missing(ctx, st, rec, "no field at");
    ks_record out = *rec;
    if (st->format == KEY_INT64) { /* 8 bytes big-endian, as the int64 serde */
        int64_t n;
        if (v.type != KS_JSON_NUMBER || ks_json_int64(&v, &n) != 0) {
            host->log(ctx, KS_LOG_WARN, "%s: poison record %s[%d]@%lld: the value at '%s' is "
                      "not an integer within int64, and the key is int64", st->who,
                      rec->topic ? rec->topic : "-", (int)rec->partition,
                      (long long)rec->offset, st->path);
            return KS_SKIP;
        }
        if (ks_scratch_reserve(&st->out, 8) != 0)
            return KS_RETRY;
        ks_int64_encode(n, (unsigned char *)st->out.data);
        out.key = st->out.data;
        out.key_len = 8;
    } else if (st->format == KEY_JSON) { /* the JSON as written */
        out.key = v.data;
        out.key_len = v.len;
    } else if (v.type == KS_JSON_STRING) { /* the text, not its JSON quoting */
        size_t n;
        if (ks_json_string(&v, NULL, 0, &n) != 0 || ks_scratch_reserve(&st->out, n + 1) != 0)
            return KS_RETRY;
        ks_json_string(&v, st->out.data, n, &n);
        out.key = st->out.data;
        out.key_len = n;
    } else {
        out.key = v.data;
        out.key_len = v.len;
    }
    return forwarded(fwd(ctx, NULL, &out));
}

static ks_verdict flat_map_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    ops_state *st = state;
    ks_json_span doc, v, e;
    ks_json_iter it;
    int have = value_json(ctx, st, rec, &doc);
    if (have < 0)
        return KS_SKIP;
    if (have == 0)
        return forwarded(fwd(ctx, NULL, rec));
    int rc = ks_json_at(&doc, st->path, st->path_len, &v);
    if (rc != KS_JSON_FOUND)
        return missing(ctx, st, rec, "no array at");
    if (v.type != KS_JSON_ARRAY || ks_json_iter_init(&it, &v) != 0)
        return missing(ctx, st, rec, "not an array at");
    ks_record out = *rec;
    while (ks_json_iter_next(&it, NULL, &e) == 1) {
        out.value = e.data;
        out.value_len = e.len;
        if (fwd(ctx, NULL, &out) != 0)
            return KS_RETRY;
    }
    return KS_OK;
}

/* ---- the descriptor ---------------------------------------------------------- */

static const ks_config_field filter_config[] = {
    {"where", KS_CONFIG_STRING, 1, NULL, "predicate: records for which it holds are kept"},
};
static const ks_config_field branch_config[] = {
    {"routes", KS_CONFIG_STRING, 1, NULL,
     "list of { to: CHILD, where: PREDICATE }; the first that holds gets the record"},
    {"default", KS_CONFIG_STRING, 0, "", "child for records no route takes; empty: drop"},
};
static const ks_config_field map_config[] = {
    {"fields", KS_CONFIG_STRING, 1, NULL,
     "mapping of output field -> /pointer, { path, default }, { const } or { key }"},
};
static const ks_config_field path_config[] = {
    {"path", KS_CONFIG_STRING, 1, NULL, "JSON pointer into the value (\"\" = the value)"},
    {"on_missing", KS_CONFIG_STRING, 0, "drop", "drop, poison or fail"},
};
static const ks_config_field select_key_config[] = {
    {"path", KS_CONFIG_STRING, 1, NULL, "JSON pointer into the value (\"\" = the value)"},
    {"on_missing", KS_CONFIG_STRING, 0, "drop", "drop, poison or fail"},
    {"format", KS_CONFIG_STRING, 0, "auto",
     "the new key: auto (in the key serde of the children), text, json or int64"},
};

#define OPS_TYPE(n, desc, fl, cfg, i, p)                                               \
    {                                                                                   \
        .struct_size = sizeof(ks_processor_type), .name = n, .description = desc,      \
        .flags = fl, .config = cfg, .config_count = sizeof cfg / sizeof cfg[0],        \
        .state_version = 1, .init = i, .process = p, .close = ops_close,                \
    }

static const ks_processor_type filter_type =
    OPS_TYPE("filter", "keeps the records whose JSON value satisfies `where`", 0,
             filter_config, filter_init, filter_process);
static const ks_processor_type branch_type =
    OPS_TYPE("branch", "sends each record to the first route whose `where` holds", 0,
             branch_config, branch_init, branch_process);
static const ks_processor_type map_type =
    OPS_TYPE("map", "builds a new JSON object from fields, constants and the key", 0,
             map_config, map_init, map_process);
static const ks_processor_type select_key_type =
    OPS_TYPE("select_key", "re-keys records by a field of their JSON value",
             KS_PROC_CHANGES_KEY, select_key_config, select_key_init, select_key_process);
static const ks_processor_type flat_map_type =
    OPS_TYPE("flat_map", "one record per element of a JSON array in the value", 0,
             path_config, flat_map_init, flat_map_process);

static const ks_processor_type *const processors[] = {
    &filter_type, &map_type, &select_key_type, &flat_map_type, &branch_type};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "ops",
    .version = "0.1.0",
    .build_id = KS_BUILD_ID,
    .processors = processors,
    .processor_count = sizeof processors / sizeof processors[0],
};

KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *api)
{
    host = api;
    return &descriptor;
}
