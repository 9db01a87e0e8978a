/*
 * topology.c - resolve a pipeline against its plugins into a graph.
 *
 * Node order: sources, then processors in YAML order, then sinks. The
 * pipeline was already checked for dangling names and cycles
 * (config_checks.c); here we check what needs the plugins: processor
 * types, named functions, config schemas, the window rules of types with
 * the shipped window fields (lib/window/window_core.c, the code those
 * plugins run) and store requirements. Errors carry the YAML mark.
 */
#include "runtime/topology.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/log.h"
#include "window/window_core.h"
#include "config/ops_check.h"
#include "runtime/repartition.h"

/* ---- plugins ---------------------------------------------------------- */

static ks_plugin *loaded_plugin(const ks_topology *t, const char *name)
{
    for (size_t i = 0; i < t->plugin_count; i++)
        if (strcmp(t->plugins[i]->desc->name, name) == 0)
            return t->plugins[i];
    return NULL;
}

static int add_plugin(ks_topology *t, ks_plugin *pl)
{
    ks_plugin **grown = realloc(t->plugins, (t->plugin_count + 1) * sizeof *grown);
    if (!grown)
        return -1;
    t->plugins = grown;
    t->plugins[t->plugin_count++] = pl;
    return 0;
}

/* Directory part of the pipeline file, for paths relative to it. */
static void pipeline_dir(const ks_pipeline *p, char *buf, size_t len)
{
    const char *slash = strrchr(p->file, '/');
    if (!slash)
        snprintf(buf, len, ".");
    else
        snprintf(buf, len, "%.*s", (int)(slash - p->file), p->file);
}

/* Resolve an entry of `plugins:` or a plugin name to a file. A relative path
 * is tried as given, then relative to the pipeline file. */
static int resolve_plugin_file(const ks_pipeline *p, const char *entry,
                               char *out, size_t outlen)
{
    int is_path = strchr(entry, '/') != NULL ||
                  (strlen(entry) > 3 && strcmp(entry + strlen(entry) - 3, ".so") == 0);
    char dir[4096];
    pipeline_dir(p, dir, sizeof dir);
    if (is_path) {
        if (entry[0] == '/' || access(entry, F_OK) == 0) {
            snprintf(out, outlen, "%s", entry);
            return 0;
        }
        if ((size_t)snprintf(out, outlen, "%s/%s", dir, entry) >= outlen)
            return -1;
        return access(out, F_OK) == 0 ? 0 : -1;
    }
    /* search dirs: plugin_path entries (relative to the pipeline too) */
    size_t n = p->plugin_path_count;
    char **dirs = calloc(n * 2 + 1, sizeof *dirs);
    char (*bufs)[4096] = calloc(n + 1, sizeof *bufs);
    if (!dirs || !bufs) {
        free(dirs);
        free(bufs);
        return -1;
    }
    size_t nd = 0;
    for (size_t i = 0; i < n; i++) {
        dirs[nd++] = p->plugin_path[i];
        if (p->plugin_path[i][0] != '/') {
            if ((size_t)snprintf(bufs[i], sizeof bufs[i], "%s/%s", dir,
                                 p->plugin_path[i]) < sizeof bufs[i])
                dirs[nd++] = bufs[i];
        }
    }
    int rc = ks_plugin_find(entry, dirs, nd, out, outlen);
    free(dirs);
    free(bufs);
    return rc;
}

static int load_plugin_file(ks_topology *t, const char *file, const ks_host_api *api,
                            const char *copy_dir, const ks_mark *m, char *err,
                            size_t errlen, ks_plugin **out)
{
    ks_plugin *pl = NULL;
    char why[1024];
    if (ks_plugin_open(file, copy_dir, api, &pl, why, sizeof why) != 0)
        return ks_mark_fail(err, errlen, m, "cannot load plugin: %s", why);
    ks_plugin *same = loaded_plugin(t, pl->desc->name);
    if (same) {
        ks_mark_fail(err, errlen, m, "plugin '%s' loaded twice (%s and %s)",
                     pl->desc->name, same->path, file);
        ks_plugin_close(pl);
        return -1;
    }
    if (add_plugin(t, pl) != 0) {
        ks_plugin_close(pl);
        return ks_mark_fail(err, errlen, m, "out of memory");
    }
    *out = pl;
    return 0;
}

/* The plugin named `name`, loading it from the search path when needed. */
static ks_plugin *need_plugin(ks_topology *t, const char *name, const ks_host_api *api,
                              const char *copy_dir, const ks_mark *m, char *err,
                              size_t errlen)
{
    ks_plugin *pl = loaded_plugin(t, name);
    if (pl)
        return pl;
    char file[4096];
    if (resolve_plugin_file(t->pipeline, name, file, sizeof file) != 0) {
        ks_mark_fail(err, errlen, m,
                     "unknown plugin '%s': not in `plugins:` and no %s.so on the plugin "
                     "path (plugin_path, $KSTREAMS_PLUGIN_PATH, %s)",
                     name, name, KS_PLUGIN_DIR);
        return NULL;
    }
    if (load_plugin_file(t, file, api, copy_dir, m, err, errlen, &pl) != 0)
        return NULL;
    if (strcmp(pl->desc->name, name) != 0) {
        ks_mark_fail(err, errlen, m, "%s calls itself '%s', expected '%s'", file,
                     pl->desc->name, name);
        return NULL;
    }
    return pl;
}

/* ---- config schemas --------------------------------------------------- */

static int check_value(const ks_config_field *f, const char *v)
{
    char *end;
    switch (f->type) {
    case KS_CONFIG_STRING:
        return 0;
    case KS_CONFIG_INT:
        errno = 0;
        (void)strtoll(v, &end, 10);
        return (errno || end == v || *end) ? -1 : 0;
    case KS_CONFIG_DOUBLE:
        errno = 0;
        (void)strtod(v, &end);
        return (errno || end == v || *end) ? -1 : 0;
    case KS_CONFIG_BOOL:
        return (strcmp(v, "true") == 0 || strcmp(v, "false") == 0) ? 0 : -1;
    case KS_CONFIG_DURATION: {
        int64_t ms;
        return ks_parse_duration_ms(v, &ms);
    }
    }
    return -1;
}

static const char *config_type_name(ks_config_type type)
{
    switch (type) {
    case KS_CONFIG_STRING: return "a string";
    case KS_CONFIG_INT: return "an integer";
    case KS_CONFIG_DOUBLE: return "a number";
    case KS_CONFIG_BOOL: return "true or false";
    case KS_CONFIG_DURATION: return "a duration (e.g. 250ms, 10s, 5m)";
    }
    return "?";
}

/* Prefix under which a processor type declares the keys of a node's
 * `window:` map: `window: { size: 1m }` is the field "window.size". */
#define WINDOW_PREFIX "window."
#define WINDOW_PREFIX_LEN (sizeof WINDOW_PREFIX - 1)

static const ks_config_field *find_field(const ks_processor_type *pt,
                                         const char *prefix, const char *key)
{
    size_t plen = strlen(prefix);
    for (size_t j = 0; j < pt->config_count; j++) {
        const char *name = pt->config[j].name;
        if (strncmp(name, prefix, plen) == 0 && strcmp(name + plen, key) == 0)
            return &pt->config[j];
    }
    return NULL;
}

static int is_window_field(const ks_config_field *f)
{
    return strncmp(f->name, WINDOW_PREFIX, WINDOW_PREFIX_LEN) == 0;
}

/* Validate the node's `window:` map against the type's "window.*" fields,
 * the same way as `config:`: unknown keys and bad values are errors at the
 * key or value, and the type must support windows at all. */
static int validate_window(const ks_cfg_node *n, const ks_processor_type *pt,
                           char *err, size_t errlen)
{
    if (n->window.count == 0)
        return 0;
    int windowed = 0; /* a type with a `window:` declares window.* fields */
    for (size_t j = 0; j < pt->config_count; j++)
        windowed |= is_window_field(&pt->config[j]);
    if (!windowed)
        return ks_mark_fail(err, errlen, &n->window.items[0].key_mark,
                            "type '%s' does not support windows (node '%s')", n->type,
                           n->name);
    for (size_t i = 0; i < n->window.count; i++) {
        const ks_cfg_scalar *s = &n->window.items[i];
        const ks_config_field *f = find_field(pt, WINDOW_PREFIX, s->key);
        if (!f) {
            char names[512] = "";
            for (size_t j = 0; j < pt->config_count; j++) {
                if (!is_window_field(&pt->config[j]))
                    continue;
                size_t at = strlen(names);
                snprintf(names + at, sizeof names - at, "%s%s", at ? ", " : "",
                         pt->config[j].name + WINDOW_PREFIX_LEN);
            }
            return ks_mark_fail(err, errlen, &s->key_mark,
                                "unknown window key '%s' for type '%s'; expected one of: %s",
                                s->key, n->type, names);
        }
        if (check_value(f, s->value) != 0)
            return ks_mark_fail(err, errlen, &s->mark,
                                "window key '%s' of node '%s' must be %s, found '%s'", s->key,
                                n->name, config_type_name(f->type), s->value);
    }
    return 0;
}

/* ks_win_config over the node's `window:` map; defaults from the type's
 * fields (like the host's config API, host_api.c). */
typedef struct window_src {
    const ks_cfg_node *n;
    const ks_processor_type *pt; /* NULL: no defaults */
} window_src;

static const char *window_value(const window_src *src, const char *name)
{
    if (strncmp(name, WINDOW_PREFIX, WINDOW_PREFIX_LEN) != 0)
        return NULL;
    const ks_cfg_scalar *s = ks_cfg_scalars_find(&src->n->window, name + WINDOW_PREFIX_LEN);
    if (s)
        return s->value;
    const ks_config_field *f =
        src->pt ? find_field(src->pt, WINDOW_PREFIX, name + WINDOW_PREFIX_LEN) : NULL;
    return f ? f->default_value : NULL;
}

static int window_string(void *arg, const char *name, const char **out)
{
    const char *v = window_value(arg, name);
    if (!v)
        return KS_ERR_NOT_FOUND;
    *out = v;
    return 0;
}

static int window_duration(void *arg, const char *name, int64_t *ms)
{
    const char *v = window_value(arg, name);
    if (!v)
        return KS_ERR_NOT_FOUND;
    return ks_parse_duration_ms(v, ms) == 0 ? 0 : KS_ERR_INVALID;
}

int ks_topology_window_spec(const ks_cfg_node *n, const ks_processor_type *pt,
                            struct ks_win_spec *spec, char *err, size_t errlen)
{
    if (n->window.count == 0)
        return 1;
    window_src src = {n, pt};
    const ks_win_config cfg = {&src, window_string, window_duration};
    char why[256];
    const char *at = NULL;
    int rc = ks_win_spec_read(&cfg, spec, why, sizeof why, &at);
    if (rc != -1)
        return rc;
    /* at the key at fault, else at `kind`, else at the map's first key */
    const ks_cfg_scalar *s = at ? ks_cfg_scalars_find(&n->window, at) : NULL;
    if (!s)
        s = ks_cfg_scalars_find(&n->window, "kind");
    if (!s)
        s = &n->window.items[0];
    return ks_mark_fail(err, errlen, &s->key_mark, "node '%s': %s", n->name, why);
}

static int validate_config(const ks_cfg_node *n, const ks_processor_type *pt,
                           char *err, size_t errlen)
{
    if (validate_window(n, pt, err, errlen) != 0)
        return -1;
    /* the rules of the shipped windows, from the plugins' own code */
    if (n->window.count && ks_win_standard_fields(pt->config, pt->config_count)) {
        ks_win_spec spec;
        if (ks_topology_window_spec(n, pt, &spec, err, errlen) < 0)
            return -1;
    }
    for (size_t i = 0; i < n->config.count; i++) {
        const ks_cfg_scalar *s = &n->config.items[i];
        const ks_config_field *f = NULL;
        for (size_t j = 0; j < pt->config_count; j++)
            if (strcmp(pt->config[j].name, s->key) == 0 && !is_window_field(&pt->config[j]))
                f = &pt->config[j];
        if (!f) {
            char names[512] = "";
            for (size_t j = 0; j < pt->config_count; j++) {
                if (is_window_field(&pt->config[j]))
                    continue; /* those belong under `window:` */
                size_t at = strlen(names);
                snprintf(names + at, sizeof names - at, "%s%s", at ? ", " : "",
                         pt->config[j].name);
            }
            return ks_mark_fail(err, errlen, &s->key_mark,
                                "unknown config key '%s' for type '%s'; expected %s%s",
                                s->key, n->type, names[0] ? "one of: " : "none", names);
        }
        if (s->nested && f->type != KS_CONFIG_STRING)
            return ks_mark_fail(err, errlen, &s->mark,
                                "config key '%s' of node '%s' must be %s, found %s", s->key,
                                n->name, config_type_name(f->type), s->nested);
        if (check_value(f, s->value) != 0)
            return ks_mark_fail(err, errlen, &s->mark,
                                "config key '%s' of node '%s' must be %s, found '%s'",
                                s->key, n->name, config_type_name(f->type), s->value);
    }
    for (size_t j = 0; j < pt->config_count; j++) {
        const ks_config_field *f = &pt->config[j];
        if (!f->required)
            continue;
        int set = 0;
        const ks_cfg_scalars *where = is_window_field(f) ? &n->window : &n->config;
        const char *key = is_window_field(f) ? f->name + WINDOW_PREFIX_LEN : f->name;
        for (size_t i = 0; i < where->count; i++)
            set |= strcmp(where->items[i].key, key) == 0;
        if (!set)
            return ks_mark_fail(err, errlen, &n->mark,
                                "node '%s' (type '%s') needs config key '%s'", n->name,
                                n->type, f->name);
    }
    return ks_ops_check_node(n, err, errlen);
}

/* ---- nodes ------------------------------------------------------------ */

static int node_index(const ks_topology *t, const char *name)
{
    for (size_t i = 0; i < t->node_count; i++)
        if (strcmp(t->nodes[i].name, name) == 0)
            return (int)i;
    return -1;
}

static int add_child(ks_topo_node *parent, int child)
{
    int *grown = realloc(parent->children, (parent->child_count + 1) * sizeof *grown);
    if (!grown)
        return -1;
    parent->children = grown;
    parent->children[parent->child_count++] = child;
    return 0;
}

static int resolve_processor(ks_topology *t, ks_topo_node *tn, const ks_host_api *api,
                             const char *copy_dir, char *err, size_t errlen)
{
    const ks_cfg_node *n = tn->cfg;
    const ks_pipeline *p = t->pipeline;
    tn->plugin = need_plugin(t, n->plugin, api, copy_dir, &n->type_mark, err, errlen);
    if (!tn->plugin)
        return -1;
    tn->ptype = ks_plugin_processor(tn->plugin, n->processor);
    if (!tn->ptype) {
        char names[512] = "";
        const ks_plugin_descriptor *d = tn->plugin->desc;
        for (size_t j = 0; j < d->processor_count; j++) {
            size_t at = strlen(names);
            snprintf(names + at, sizeof names - at, "%s%s", j ? ", " : "",
                     d->processors[j]->name);
        }
        return ks_mark_fail(err, errlen, &n->type_mark,
                            "plugin '%s' (%s) has no processor type '%s'; it offers: %s",
                            d->name, tn->plugin->path, n->processor, names);
    }
    if (validate_config(n, tn->ptype, err, errlen) != 0 ||
        ks_ops_check_children(p, n, err, errlen) != 0)
        return -1;
    /* a node's store read as its table holds that node's values, not a
     * table's (timestamp + value): a build older than 1.6 cannot ask
     * store_values and would misread it */
    const ks_plugin_descriptor *pd = tn->plugin->desc;
    if (n->table && ks_pipeline_node(p, n->table) && pd->abi_minor < 6)
        return ks_mark_fail(err, errlen, &n->table_mark,
                            "node '%s': `table: %s` reads a node's store, which needs a "
                            "plugin built against ABI 1.6 or later; plugin '%s' (%s) is "
                            "ABI %u.%u: rebuild it against this engine's kstreams.h",
                            n->name, n->table, pd->name, tn->plugin->path,
                            (unsigned)pd->abi_major, (unsigned)pd->abi_minor);
    if ((tn->ptype->flags & KS_PROC_NEEDS_STORE) && n->store_count == 0)
        return ks_mark_fail(err, errlen, &n->mark,
                            "node '%s': type '%s' keeps state and needs `store:`", n->name,
                            n->type);
    if ((tn->ptype->flags & KS_PROC_NEEDS_FUNCTIONS) && n->function_count == 0)
        return ks_mark_fail(err, errlen, &n->mark,
                            "node '%s': type '%s' needs `functions:`", n->name, n->type);
    /* by default no cache in a pipeline with an outbox: a node below the
     * cache could not hand it events (docs/stores.md) */
    if ((tn->ptype->flags & KS_PROC_CACHEABLE) && n->window.count == 0)
        tn->cache_bytes = n->cache_set ? n->cache_bytes
                          : p->outbox  ? 0
                                       : KS_CACHE_DEFAULT_BYTES;
    else if (n->cache_set && n->cache_bytes > 0)
        return ks_mark_fail(err, errlen, &n->cache_mark,
                            "node '%s': type '%s'%s has no record cache; remove `cache_bytes` "
                            "(or set it to 0)",
                            n->name, n->type, n->window.count ? " with `window:`" : "");
    tn->stores = calloc(n->store_count + 1, sizeof *tn->stores);
    tn->fns = calloc(n->function_count + 1, sizeof *tn->fns);
    if (!tn->stores || !tn->fns)
        return ks_mark_fail(err, errlen, &n->mark, "out of memory");
    for (size_t s = 0; s < n->store_count; s++) {
        for (size_t k = 0; k < p->store_count; k++)
            if (strcmp(p->stores[k].name, n->stores[s]) == 0)
                tn->stores[tn->store_count++] = (int)k;
    }
    for (size_t f = 0; f < n->function_count; f++) {
        const ks_cfg_function *cf = &n->functions[f];
        ks_plugin *fp = need_plugin(t, cf->plugin, api, copy_dir, &cf->mark, err, errlen);
        if (!fp)
            return -1;
        const ks_function *fn = ks_plugin_function(fp, cf->name);
        if (!fn)
            return ks_mark_fail(err, errlen, &cf->mark, "plugin '%s' (%s) has no function '%s'",
                                cf->plugin, fp->path, cf->name);
        tn->fns[tn->fn_count].cfg = cf;
        tn->fns[tn->fn_count].fn = fn;
        tn->fn_count++;
    }
    return 0;
}

/* Load the plugins listed under `plugins:`, so names resolve to them. */
static int load_listed_plugins(ks_topology *t, const ks_host_api *api, const char *copy_dir,
                               char *err, size_t errlen)
{
    const ks_pipeline *p = t->pipeline;
    for (size_t i = 0; i < p->plugin_count; i++) {
        char file[4096];
        ks_plugin *pl;
        if (resolve_plugin_file(p, p->plugins[i], file, sizeof file) != 0)
            return ks_mark_fail(err, errlen, &p->plugin_marks[i],
                                "plugin '%s' not found (as a path, relative to the pipeline, "
                                "or on the plugin path)",
                                p->plugins[i]);
        if (load_plugin_file(t, file, api, copy_dir, &p->plugin_marks[i], err, errlen,
                             &pl) != 0)
            return -1;
    }
    return 0;
}

static void free_nodes(ks_topology *t)
{
    for (size_t i = 0; i < t->node_count; i++) {
        free(t->nodes[i].children);
        free(t->nodes[i].stores);
        free(t->nodes[i].fns);
    }
    free(t->nodes);
    t->nodes = NULL;
    t->node_count = 0;
}

/* 1 when node i, or a node downstream of it, is read by others as its
 * table (seen: nodes visited, cleared by the caller). */
static int feeds_table(const ks_topology *t, int i, unsigned char *seen)
{
    if (seen[i])
        return 0;
    seen[i] = 1;
    const ks_topo_node *n = &t->nodes[i];
    if (n->kind == KS_NODE_PROCESSOR && ks_cfg_node_is_table(t->pipeline, n->name))
        return 1;
    for (size_t c = 0; c < n->child_count; c++)
        if (feeds_table(t, n->children[c], seen))
            return 1;
    return 0;
}

/* Children that lead to a node's table go first (stable otherwise): a
 * record updates such a table (a count read with `table: counts`) before
 * a sibling branch looks it up, as in Kafka Streams, where the table is
 * defined before the join that reads it. So a stream record sees the
 * table as updated by every earlier record of the task, and by itself. */
static int order_children(ks_topology *t)
{
    unsigned char *seen = calloc(t->node_count ? t->node_count : 1, 1);
    unsigned char *first = calloc(t->node_count ? t->node_count : 1, 1);
    int *tmp = calloc(t->node_count ? t->node_count : 1, sizeof *tmp);
    int rc = seen && first && tmp ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < t->node_count; i++) {
        ks_topo_node *n = &t->nodes[i];
        if (n->child_count < 2)
            continue;
        for (size_t c = 0; c < n->child_count; c++) {
            memset(seen, 0, t->node_count);
            first[c] = (unsigned char)feeds_table(t, n->children[c], seen);
        }
        size_t k = 0;
        for (int pass = 1; pass >= 0; pass--)
            for (size_t c = 0; c < n->child_count; c++)
                if (first[c] == pass)
                    tmp[k++] = n->children[c];
        memcpy(n->children, tmp, n->child_count * sizeof *tmp);
    }
    free(seen);
    free(first);
    free(tmp);
    return rc;
}

static int build_nodes(ks_topology *t, const ks_host_api *api, const char *copy_dir,
                       char *err, size_t errlen)
{
    const ks_pipeline *p = t->pipeline;
    t->node_count = p->source_count + p->node_count + p->sink_count;
    t->nodes = calloc(t->node_count ? t->node_count : 1, sizeof *t->nodes);
    if (!t->nodes)
        return -1;
    size_t at = 0;
    for (size_t i = 0; i < p->source_count; i++, at++) {
        t->nodes[at] = (ks_topo_node){.index = (int)at, .kind = KS_NODE_SOURCE,
                                      .name = p->sources[i].name,
                                      .source = &p->sources[i]};
    }
    for (size_t i = 0; i < p->node_count; i++, at++) {
        t->nodes[at] = (ks_topo_node){.index = (int)at, .kind = KS_NODE_PROCESSOR,
                                      .name = p->nodes[i].name, .cfg = &p->nodes[i]};
    }
    for (size_t i = 0; i < p->sink_count; i++, at++) {
        t->nodes[at] = (ks_topo_node){.index = (int)at, .kind = KS_NODE_SINK,
                                      .name = p->sinks[i].name, .sink = &p->sinks[i]};
    }
    for (size_t i = 0; i < t->node_count; i++) {
        ks_topo_node *tn = &t->nodes[i];
        if (tn->kind == KS_NODE_PROCESSOR) {
            if (resolve_processor(t, tn, api, copy_dir, err, errlen) != 0)
                return -1;
            for (size_t f = 0; f < tn->cfg->from_count; f++) {
                int parent = node_index(t, tn->cfg->from[f]);
                if (parent < 0 || add_child(&t->nodes[parent], (int)i) != 0)
                    return ks_mark_fail(err, errlen, &tn->cfg->from_marks[f],
                                        "unknown input '%s'", tn->cfg->from[f]);
            }
        } else if (tn->kind == KS_NODE_SINK) {
            int parent = node_index(t, tn->sink->from);
            if (parent < 0 || add_child(&t->nodes[parent], (int)i) != 0)
                return ks_mark_fail(err, errlen, &tn->sink->from_mark, "unknown input '%s'",
                                    tn->sink->from);
        }
    }
    return order_children(t);
}

/* Build the graph; where it needs repartition topics, rewrite the pipeline
 * and build it again (the plugins stay loaded). */
static int build_graph(ks_topology *t, const ks_host_api *api, const char *copy_dir,
                       char *err, size_t errlen)
{
    if (load_listed_plugins(t, api, copy_dir, err, errlen) != 0 ||
        build_nodes(t, api, copy_dir, err, errlen) != 0)
        return -1;
    int topics = ks_repartition_plan(t, err, errlen);
    if (topics < 0)
        return -1;
    if (topics > 0) {
        free_nodes(t);
        if (build_nodes(t, api, copy_dir, err, errlen) != 0)
            return -1;
    }
    ks_repartition_number(t);
    return 0;
}

int ks_topology_build(ks_pipeline *p, const ks_host_api *api, const char *copy_dir,
                      ks_topology **out, char *err, size_t errlen)
{
    *out = NULL;
    ks_topology *t = calloc(1, sizeof *t);
    if (!t) {
        ks_pipeline_free(p);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    t->pipeline = p;
    int stale = copy_dir ? ks_plugin_copies_prune(copy_dir) : 0;
    if (stale > 0)
        ks_info("loader", "removed %d private plugin copies of processes that died", stale);
    if (build_graph(t, api, copy_dir, err, errlen) != 0) {
        ks_topology_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

void ks_topology_free(ks_topology *t)
{
    if (!t)
        return;
    free_nodes(t);
    for (size_t i = 0; i < t->plugin_count; i++)
        ks_plugin_close(t->plugins[i]);
    free(t->plugins);
    ks_pipeline_free(t->pipeline);
    free(t);
}

const ks_topo_node *ks_topology_node(const ks_topology *t, const char *name)
{
    int i = node_index(t, name);
    return i < 0 ? NULL : &t->nodes[i];
}

void ks_changelog_topic(const ks_topology *t, const char *store, char *buf, size_t len)
{
    snprintf(buf, len, "%s-%s-changelog", t->pipeline->application, store);
}

/* ---- hot deploy (reload.c) -------------------------------------------- */

int ks_topology_prepare_swap(const ks_topo_node *tn, const ks_plugin *pl,
                             const ks_processor_type **ptype, ks_topo_fn **fns,
                             char *err, size_t errlen)
{
    *ptype = NULL;
    *fns = NULL;
    if (tn->kind != KS_NODE_PROCESSOR)
        return 0;
    const ks_cfg_node *n = tn->cfg;
    const char *name = pl->desc->name;
    int affected = strcmp(tn->plugin->desc->name, name) == 0;
    for (size_t f = 0; f < tn->fn_count; f++)
        affected |= strcmp(tn->fns[f].cfg->plugin, name) == 0;
    if (!affected)
        return 0;
    const ks_processor_type *pt = tn->ptype;
    if (strcmp(tn->plugin->desc->name, name) == 0) {
        pt = ks_plugin_processor(pl, n->processor);
        if (!pt)
            return ks_mark_fail(err, errlen, &n->type_mark,
                                "new build of plugin '%s' (%s) has no processor type '%s' "
                                "used by node '%s'",
                                name, pl->path, n->processor, n->name);
        if (validate_config(n, pt, err, errlen) != 0)
            return -1;
        if ((pt->flags & KS_PROC_NEEDS_STORE) && n->store_count == 0)
            return ks_mark_fail(err, errlen, &n->mark,
                                "node '%s': new build of type '%s' needs `store:`", n->name,
                                n->type);
        if ((pt->flags & KS_PROC_NEEDS_FUNCTIONS) && n->function_count == 0)
            return ks_mark_fail(err, errlen, &n->mark,
                                "node '%s': new build of type '%s' needs `functions:`",
                                n->name, n->type);
    }
    ks_topo_fn *out = calloc(tn->fn_count + 1, sizeof *out);
    if (!out)
        return ks_mark_fail(err, errlen, &n->mark, "out of memory");
    for (size_t f = 0; f < tn->fn_count; f++) {
        out[f] = tn->fns[f];
        if (strcmp(tn->fns[f].cfg->plugin, name) != 0)
            continue;
        const ks_function *fn = ks_plugin_function(pl, tn->fns[f].cfg->name);
        if (!fn || fn->kind != tn->fns[f].fn->kind) {
            free(out);
            return ks_mark_fail(err, errlen, &tn->fns[f].cfg->mark,
                                "new build of plugin '%s' (%s) has no %sfunction '%s'", name,
                                pl->path, fn ? "matching " : "", tn->fns[f].cfg->name);
        }
        out[f].fn = fn;
    }
    *ptype = pt;
    *fns = out;
    return 1;
}

int ks_topology_store_window(const ks_pipeline *p, const char *store, const ks_cfg_node **node,
                             struct ks_win_spec *spec, char *err, size_t errlen)
{
    for (size_t i = 0; i < p->node_count; i++) {
        const ks_cfg_node *n = &p->nodes[i];
        if (n->store_count == 0 || strcmp(n->stores[0], store) != 0)
            continue;
        int rc = ks_topology_window_spec(n, NULL, spec, err, errlen);
        if (rc == 1)
            continue;
        *node = n;
        return rc;
    }
    memset(spec, 0, sizeof *spec);
    return 1;
}
