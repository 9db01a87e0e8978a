/*
 * config_graph.c - the data flow of a pipeline: `stores:`, `sources:`,
 * `nodes:` and `sinks:`, each mapped onto ks_pipeline with its schema
 * checks. References between them are checked later (config_checks.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"

/* ------------------------------------------------------------------ */
/* Stores                                                              */
/* ------------------------------------------------------------------ */

ks_cfg_store *ks_cfg_store_add(pctx *c, const ks_ynode *at, const char *name,
                               ks_mark mark, int declared)
{
    ks_pipeline *p = c->p;
    ks_cfg_store *st;
    if (p->store_count == c->store_cap) {
        size_t cap = c->store_cap ? c->store_cap * 2 : 8;
        ks_cfg_store *n = realloc(p->stores, cap * sizeof *n);
        if (!n) {
            oom(c, at);
            return NULL;
        }
        p->stores = n;
        c->store_cap = cap;
    }
    st = &p->stores[p->store_count];
    memset(st, 0, sizeof *st);
    st->name = dup_at(c, at, name);
    if (!st->name)
        return NULL;
    p->store_count++;
    st->map_size = UINT64_C(1) << 30;
    st->changelog = 1;
    st->declared = declared;
    st->mark = mark;
    return st;
}

int ks_cfg_parse_stores(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    static const char *const keys[] = {"map_size", "changelog"};
    int r = want_map(c, kn, v, 1);
    if (r != 0)
        return r < 0 ? -1 : 0;
    for (size_t i = 0; i < v->count; i++) {
        const ks_ynode *k = v->pairs[i].key, *sv = v->pairs[i].value;
        char what[300];
        fields f;
        ks_cfg_store *st;

        if (k->kind != KS_Y_SCALAR || ks_ynode_is_null(k))
            return FAIL_AT(c, k, "expected a string key in 'stores'");
        if (!is_name(k->text))
            return FAIL_AT(c, k,
                           "invalid store name '%s'; expected [A-Za-z0-9_-]+",
                           k->text);
        st = store_add(c, k, k->text, mark_of(c, k), 1);
        if (!st)
            return -1;
        r = want_map(c, k, sv, 1);
        if (r < 0)
            return -1;
        if (r == 1)
            continue;
        snprintf(what, sizeof what, "store '%s'", k->text);
        if (take_fields(c, sv, what, keys, 2, &f) != 0)
            return -1;
        if (f.val[0]) {
            char buf[80];
            if (want_scalar(c, f.key[0], f.val[0],
                            "a size (e.g. 512MiB, 4GiB)") != 0)
                return -1;
            if (ks_parse_size(f.val[0]->text, &st->map_size) != 0)
                return FAIL_AT(c, f.val[0],
                               "expected a size (e.g. 512MiB, 4GiB) for "
                               "'map_size', found %s",
                               found(f.val[0], buf, sizeof buf));
            if (st->map_size == 0)
                return FAIL_AT(c, f.val[0],
                               "'map_size' must be greater than 0, found '%s'",
                               f.val[0]->text);
        }
        if (f.val[1] && want_bool(c, f.key[1], f.val[1], &st->changelog) != 0)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Sources                                                             */
/* ------------------------------------------------------------------ */

enum { SRC_TOPIC, SRC_KEY, SRC_VALUE, SRC_CREATE, SRC_PARTITIONS, SRC_N };
static const char *const SRC_KEYS[SRC_N] = {"topic", "key", "value", "create",
                                            "partitions"};

/* One entry of `sources:` or `tables:` (`kind`: "source" or "table"). */
static int parse_source(pctx *c, const ks_ynode *k, const ks_ynode *sv, ks_cfg_source *s,
                        const char *kind)
{
    char what[300];
    fields f;
    int64_t x;

    if (k->kind != KS_Y_SCALAR || ks_ynode_is_null(k))
        return FAIL_AT(c, k, "expected a string key in '%ss'", kind);
    if (!is_name(k->text))
        return FAIL_AT(c, k, "invalid %s name '%s'; expected [A-Za-z0-9_-]+", kind,
                       k->text);
    s->name = dup_at(c, k, k->text);
    if (!s->name)
        return -1;
    s->mark = mark_of(c, k);
    s->partitions = 1;
    if (want_map(c, k, sv, 0) != 0)
        return -1;
    snprintf(what, sizeof what, "%s '%s'", kind, k->text);
    if (take_fields(c, sv, what, SRC_KEYS, SRC_N, &f) != 0)
        return -1;
    if (f.val[SRC_TOPIC]) {
        if (want_topic(c, f.key[SRC_TOPIC], f.val[SRC_TOPIC], &s->topic))
            return -1;
        s->topic_mark = mark_of(c, f.val[SRC_TOPIC]);
    }
    if (f.val[SRC_KEY] &&
        want_serde(c, f.key[SRC_KEY], f.val[SRC_KEY], &s->key_serde))
        return -1;
    if (f.val[SRC_VALUE] &&
        want_serde(c, f.key[SRC_VALUE], f.val[SRC_VALUE], &s->value_serde))
        return -1;
    if (f.val[SRC_CREATE] &&
        want_bool(c, f.key[SRC_CREATE], f.val[SRC_CREATE], &s->create))
        return -1;
    if (f.val[SRC_PARTITIONS]) {
        if (want_int(c, f.key[SRC_PARTITIONS], f.val[SRC_PARTITIONS], 1,
                     INT32_MAX, &x))
            return -1;
        s->partitions = (int32_t)x;
    }
    if (!s->topic)
        return missing(c, sv, what, "topic");
    return 0;
}

int ks_cfg_parse_sources(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    ks_pipeline *p = c->p;
    if (want_map(c, kn, v, 0) != 0)
        return -1;
    if (v->count == 0)
        return FAIL_AT(c, v, "'sources' must name at least one source");
    p->sources = calloc(v->count, sizeof *p->sources);
    if (!p->sources)
        return oom(c, v);
    p->source_count = v->count;
    for (size_t i = 0; i < v->count; i++)
        if (parse_source(c, v->pairs[i].key, v->pairs[i].value, &p->sources[i], "source") != 0)
            return -1;
    return 0;
}

/* `tables:` - appended to the sources with `table` set, each with a store
 * of its name (declared under `stores:` for its map_size, or made here)
 * whose changelog is the table's own topic. */
int ks_cfg_parse_tables(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    ks_pipeline *p = c->p;
    int r = want_map(c, kn, v, 1);
    if (r != 0)
        return r < 0 ? -1 : 0;
    ks_cfg_source *all = realloc(p->sources, (p->source_count + v->count + 1) * sizeof *all);
    if (!all)
        return oom(c, v);
    p->sources = all;
    for (size_t i = 0; i < v->count; i++) {
        ks_cfg_source *s = &p->sources[p->source_count];
        memset(s, 0, sizeof *s);
        p->source_count++;
        if (parse_source(c, v->pairs[i].key, v->pairs[i].value, s, "table") != 0)
            return -1;
        /* the worker tells a table's records from a stream's by topic */
        for (size_t j = 0; j + 1 < p->source_count; j++)
            if (strcmp(p->sources[j].topic, s->topic) == 0)
                return FAIL_MARK(c, s->topic_mark,
                                 "table '%s': topic '%s' is already read by %s '%s'; a "
                                 "topic is read either as a stream or as one table",
                                 s->name, s->topic, p->sources[j].table ? "table" : "source",
                                 p->sources[j].name);
        const ks_cfg_store *known = ks_pipeline_store(p, s->name);
        ks_cfg_store *st = known ? &p->stores[known - p->stores]
                                 : store_add(c, v->pairs[i].key, s->name, s->mark, 1);
        if (!st)
            return -1;
        st->table = 1;
        st->changelog = 0; /* the table's topic is its changelog */
        s->table = 1;
        s->table_store = (int)(st - p->stores);
    }
    return 0;
}

/* `global_tables:` - in pipeline->globals, each with a store of its name
 * (global, read-only to plugins, no changelog: the topic is read whole).
 * Topics are read by one kind only, as for tables. */
int ks_cfg_parse_global_tables(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    ks_pipeline *p = c->p;
    int r = want_map(c, kn, v, 1);
    if (r != 0)
        return r < 0 ? -1 : 0;
    p->globals = calloc(v->count + 1, sizeof *p->globals);
    if (!p->globals)
        return oom(c, v);
    for (size_t i = 0; i < v->count; i++) {
        ks_cfg_source *s = &p->globals[p->global_count++];
        if (parse_source(c, v->pairs[i].key, v->pairs[i].value, s, "global table") != 0)
            return -1;
        for (size_t j = 0; j < p->source_count + p->global_count - 1; j++) {
            const ks_cfg_source *o = j < p->source_count ? &p->sources[j]
                                                         : &p->globals[j - p->source_count];
            if (strcmp(o->topic, s->topic) == 0)
                return FAIL_MARK(c, s->topic_mark,
                                 "global table '%s': topic '%s' is already read by %s '%s'; "
                                 "a topic is read either as a stream or as one table",
                                 s->name, s->topic,
                                 o->global ? "global table" : o->table ? "table" : "source",
                                 o->name);
        }
        const ks_cfg_store *known = ks_pipeline_store(p, s->name);
        ks_cfg_store *st = known ? &p->stores[known - p->stores]
                                 : store_add(c, v->pairs[i].key, s->name, s->mark, 1);
        if (!st)
            return -1;
        st->table = 1; /* plugins read it only */
        st->global = 1;
        st->changelog = 0;
        s->table = 1;
        s->global = 1;
        s->table_store = (int)(st - p->stores);
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Nodes                                                               */
/* ------------------------------------------------------------------ */

enum {
    N_NAME, N_TYPE, N_FROM, N_CONFIG, N_STORE, N_STORES, N_FUNCTIONS,
    N_WINDOW, N_REPARTITION, N_TABLE, N_CACHE, N_N
};
static const char *const NODE_KEYS[N_N] = {
    "name", "type", "from", "config", "store", "stores", "functions", "window",
    "repartition", "table", "cache_bytes"};

static int before(const ks_ynode *a, const ks_ynode *b)
{
    return a->line < b->line || (a->line == b->line && a->col < b->col);
}

static int parse_functions(pctx *c, ks_cfg_node *n, const ks_ynode *kn,
                           const ks_ynode *v)
{
    int r = want_map(c, kn, v, 1);
    if (r != 0)
        return r < 0 ? -1 : 0;
    n->functions = calloc(v->count ? v->count : 1, sizeof *n->functions);
    if (!n->functions)
        return oom(c, v);
    n->function_count = v->count;
    for (size_t i = 0; i < v->count; i++) {
        const ks_ynode *k = v->pairs[i].key, *fv = v->pairs[i].value;
        ks_cfg_function *fn = &n->functions[i];
        int s;
        if (k->kind != KS_Y_SCALAR || ks_ynode_is_null(k))
            return FAIL_AT(c, k, "expected a string key in 'functions'");
        fn->role = dup_at(c, k, k->text);
        if (!fn->role)
            return -1;
        if (want_scalar(c, k, fv, "plugin.function") != 0)
            return -1;
        fn->mark = mark_of(c, fv);
        s = split_ref(fv->text, 1, 0, &fn->plugin, &fn->name);
        if (s == -2)
            return oom(c, fv);
        if (s != 0)
            return FAIL_AT(c, fv,
                           "invalid function '%s' for '%s'; expected "
                           "plugin.function (plugin in [a-z0-9_]+)",
                           fv->text, k->text);
    }
    return 0;
}

/* `repartition: true|false` or `repartition: { partitions: N }` (the map
 * forces one too). */
static int parse_repartition(pctx *c, ks_cfg_node *n, const ks_ynode *kn,
                             const ks_ynode *v)
{
    static const char *const keys[] = {"partitions"};
    n->repartition_mark = mark_of(c, kn);
    if (v->kind == KS_Y_SCALAR && !ks_ynode_is_null(v))
        return want_bool(c, kn, v, &n->repartition);
    if (want_map(c, kn, v, 0) != 0)
        return -1;
    fields f;
    if (take_fields(c, v, "repartition", keys, 1, &f) != 0)
        return -1;
    n->repartition = 1;
    if (f.val[0]) {
        int64_t x;
        if (want_int(c, f.key[0], f.val[0], 1, 100000, &x) != 0)
            return -1;
        n->repartition_partitions = (int32_t)x;
    }
    return 0;
}

static int parse_node(pctx *c, ks_cfg_node *n, const ks_ynode *map)
{
    fields f;
    int s;

    n->mark = mark_of(c, map);
    if (take_fields(c, map, "node", NODE_KEYS, N_N, &f) != 0)
        return -1;
    if (f.val[N_NAME]) {
        if (want_string(c, f.key[N_NAME], f.val[N_NAME], &n->name) != 0)
            return -1;
        if (!is_name(n->name))
            return FAIL_AT(c, f.val[N_NAME],
                           "invalid node name '%s'; expected [A-Za-z0-9_-]+",
                           n->name);
        n->name_mark = mark_of(c, f.val[N_NAME]);
    }
    if (f.val[N_TYPE]) {
        if (want_string(c, f.key[N_TYPE], f.val[N_TYPE], &n->type) != 0)
            return -1;
        n->type_mark = mark_of(c, f.val[N_TYPE]);
        s = split_ref(n->type, 0, 1, &n->plugin, &n->processor);
        if (s == -2)
            return oom(c, f.val[N_TYPE]);
        if (s != 0)
            return FAIL_AT(c, f.val[N_TYPE],
                           "invalid type '%s'; expected plugin.processor or "
                           "plugin (plugin in [a-z0-9_]+)",
                           n->type);
    }
    if (f.val[N_FROM]) {
        if (ks_ynode_is_null(f.val[N_FROM]))
            return FAIL_AT(c, f.key[N_FROM], "missing value for 'from'");
        if (want_strings(c, f.key[N_FROM], f.val[N_FROM],
                         "a name or a list of names", &n->from, &n->from_marks,
                         &n->from_count) != 0)
            return -1;
        if (n->from_count == 0)
            return FAIL_AT(c, f.val[N_FROM],
                           "'from' must name at least one input");
    }
    if (f.val[N_CONFIG] &&
        want_scalars(c, f.key[N_CONFIG], f.val[N_CONFIG], &n->config, 1) != 0)
        return -1;
    if (f.val[N_STORE] && f.val[N_STORES]) {
        const ks_ynode *later = before(f.key[N_STORE], f.key[N_STORES])
                                    ? f.key[N_STORES]
                                    : f.key[N_STORE];
        return FAIL_AT(c, later,
                       "node sets both 'store' and 'stores'; use one of them");
    }
    if (f.val[N_STORE]) {
        if (ks_ynode_is_null(f.val[N_STORE]))
            return FAIL_AT(c, f.key[N_STORE], "missing value for 'store'");
        if (f.val[N_STORE]->kind != KS_Y_SCALAR) {
            char buf[80];
            return FAIL_AT(c, f.val[N_STORE],
                           "expected a store name for 'store', found %s",
                           found(f.val[N_STORE], buf, sizeof buf));
        }
    }
    if (f.val[N_STORE] || f.val[N_STORES]) {
        int k = f.val[N_STORE] ? N_STORE : N_STORES;
        if (want_strings(c, f.key[k], f.val[k], "a list of store names",
                         &n->stores, &n->store_marks, &n->store_count) != 0)
            return -1;
        for (size_t i = 0; i < n->store_count; i++)
            if (!is_name(n->stores[i]))
                return FAIL_MARK(c, n->store_marks[i],
                                 "invalid store name '%s'; expected "
                                 "[A-Za-z0-9_-]+",
                                 n->stores[i]);
    }
    if (f.val[N_FUNCTIONS] &&
        parse_functions(c, n, f.key[N_FUNCTIONS], f.val[N_FUNCTIONS]) != 0)
        return -1;
    if (f.val[N_WINDOW] &&
        want_scalars(c, f.key[N_WINDOW], f.val[N_WINDOW], &n->window, 0) != 0)
        return -1;
    if (f.val[N_REPARTITION] &&
        parse_repartition(c, n, f.key[N_REPARTITION], f.val[N_REPARTITION]) != 0)
        return -1;
    if (f.val[N_TABLE]) {
        if (want_string(c, f.key[N_TABLE], f.val[N_TABLE], &n->table) != 0)
            return -1;
        n->table_mark = mark_of(c, f.val[N_TABLE]);
    }
    if (f.val[N_CACHE]) {
        char buf[80];
        if (want_scalar(c, f.key[N_CACHE], f.val[N_CACHE], "a size (e.g. 0, 512KiB, 4MiB)") != 0)
            return -1;
        if (ks_parse_size(f.val[N_CACHE]->text, &n->cache_bytes) != 0)
            return FAIL_AT(c, f.val[N_CACHE],
                           "expected a size (e.g. 0, 512KiB, 4MiB) for 'cache_bytes', found %s",
                           found(f.val[N_CACHE], buf, sizeof buf));
        n->cache_set = 1;
        n->cache_mark = mark_of(c, f.val[N_CACHE]);
    }
    for (int k = N_NAME; k <= N_FROM; k++)
        if (!f.val[k])
            return missing(c, map, "node", NODE_KEYS[k]);
    return 0;
}

int ks_cfg_parse_nodes(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    ks_pipeline *p = c->p;
    char buf[80];
    int r = want_seq(c, kn, v, 1);
    if (r != 0)
        return r < 0 ? -1 : 0;
    p->nodes = calloc(v->count ? v->count : 1, sizeof *p->nodes);
    if (!p->nodes)
        return oom(c, v);
    p->node_count = v->count;
    for (size_t i = 0; i < v->count; i++) {
        const ks_ynode *it = v->items[i];
        if (it->kind != KS_Y_MAP)
            return FAIL_AT(c, it,
                           "expected a mapping for each entry of 'nodes', "
                           "found %s",
                           found(it, buf, sizeof buf));
        if (parse_node(c, &p->nodes[i], it) != 0)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Sinks                                                               */
/* ------------------------------------------------------------------ */

enum {
    K_FROM, K_TOPIC, K_KEY, K_VALUE, K_NAME, K_CREATE, K_PARTITIONS, K_N
};
static const char *const SINK_KEYS[K_N] = {
    "from", "topic", "key", "value", "name", "create", "partitions"};

static int parse_sink(pctx *c, ks_cfg_sink *s, size_t index,
                      const ks_ynode *map)
{
    fields f;
    int64_t x;

    s->mark = mark_of(c, map);
    s->partitions = 0; /* created with the sources' partition count */
    if (take_fields(c, map, "sink", SINK_KEYS, K_N, &f) != 0)
        return -1;
    if (f.val[K_FROM]) {
        if (want_string(c, f.key[K_FROM], f.val[K_FROM], &s->from) != 0)
            return -1;
        s->from_mark = mark_of(c, f.val[K_FROM]);
    }
    if (f.val[K_TOPIC]) {
        if (want_topic(c, f.key[K_TOPIC], f.val[K_TOPIC], &s->topic) != 0)
            return -1;
        s->topic_mark = mark_of(c, f.val[K_TOPIC]);
    }
    if (f.val[K_KEY] &&
        want_serde(c, f.key[K_KEY], f.val[K_KEY], &s->key_serde) != 0)
        return -1;
    if (f.val[K_VALUE] &&
        want_serde(c, f.key[K_VALUE], f.val[K_VALUE], &s->value_serde) != 0)
        return -1;
    if (f.val[K_NAME]) {
        if (want_string(c, f.key[K_NAME], f.val[K_NAME], &s->name) != 0)
            return -1;
        if (!is_name(s->name))
            return FAIL_AT(c, f.val[K_NAME],
                           "invalid sink name '%s'; expected [A-Za-z0-9_-]+",
                           s->name);
        s->name_mark = mark_of(c, f.val[K_NAME]);
    } else {
        char def[32];
        snprintf(def, sizeof def, "sink-%zu", index + 1);
        s->name = dup_at(c, map, def);
        if (!s->name)
            return -1;
        s->name_mark = s->mark;
    }
    if (f.val[K_CREATE] &&
        want_bool(c, f.key[K_CREATE], f.val[K_CREATE], &s->create) != 0)
        return -1;
    if (f.val[K_PARTITIONS]) {
        if (want_int(c, f.key[K_PARTITIONS], f.val[K_PARTITIONS], 1,
                     INT32_MAX, &x) != 0)
            return -1;
        s->partitions = (int32_t)x;
    }
    if (!s->from)
        return missing(c, map, "sink", "from");
    if (!s->topic)
        return missing(c, map, "sink", "topic");
    return 0;
}

int ks_cfg_parse_sinks(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    ks_pipeline *p = c->p;
    char buf[80];
    if (want_seq(c, kn, v, 0) != 0)
        return -1;
    if (v->count == 0)
        return FAIL_AT(c, v, "'sinks' must list at least one sink");
    p->sinks = calloc(v->count, sizeof *p->sinks);
    if (!p->sinks)
        return oom(c, v);
    p->sink_count = v->count;
    for (size_t i = 0; i < v->count; i++) {
        const ks_ynode *it = v->items[i];
        if (it->kind != KS_Y_MAP)
            return FAIL_AT(c, it,
                           "expected a mapping for each entry of 'sinks', "
                           "found %s",
                           found(it, buf, sizeof buf));
        if (parse_sink(c, &p->sinks[i], i, it) != 0)
            return -1;
    }
    return 0;
}
