/*
 * topology.h - the processor graph resolved against loaded plugins.
 *
 * Built from a validated ks_pipeline: loads every plugin the pipeline
 * names or uses, resolves each node's "plugin.processor" type and named
 * functions, validates each node's `config:` against the processor type's
 * schema, and links nodes to their children, stores and sinks. Immutable
 * once built, except for hot deploy (reload.c): the reload thread switches
 * a processor node's plugin/ptype/fns (atomic stores) and an entry of
 * `plugins`; tasks copy a node's build into each instance's ctx at init
 * (ks_task_node_build), so running instances never see the switch. Every
 * task of every worker shares it.
 */
#ifndef KS_TOPOLOGY_H
#define KS_TOPOLOGY_H

#include <stdio.h>

#include "config/config.h"
#include "loader/plugin.h"

typedef enum ks_node_kind {
    KS_NODE_SOURCE = 0,
    KS_NODE_PROCESSOR,
    KS_NODE_SINK
} ks_node_kind;

typedef struct ks_topo_fn {
    const ks_cfg_function *cfg;
    const ks_function *fn; /* inside the plugin image */
} ks_topo_fn;

typedef struct ks_topo_node {
    int index;
    ks_node_kind kind;
    const char *name;
    const ks_cfg_source *source; /* KS_NODE_SOURCE */
    const ks_cfg_node *cfg;      /* KS_NODE_PROCESSOR */
    const ks_cfg_sink *sink;     /* KS_NODE_SINK */
    ks_plugin *plugin;           /* KS_NODE_PROCESSOR */
    const ks_processor_type *ptype;
    ks_topo_fn *fns;
    size_t fn_count;
    int *children; /* node indexes, in declaration order */
    size_t child_count;
    int *stores; /* indexes into ks_topology.pipeline->stores */
    size_t store_count;
    int sub; /* sub-topology (repartition.h): parts joined by no edge */
    /* the record cache's size per task (task_cache.h); 0: none (the type
     * is not KS_PROC_CACHEABLE, the node is windowed, or `cache_bytes: 0`) */
    uint64_t cache_bytes;
} ks_topo_node;

typedef struct ks_topology {
    ks_pipeline *pipeline; /* owned */
    ks_topo_node *nodes;
    size_t node_count;
    ks_plugin **plugins; /* owned, loaded */
    size_t plugin_count;
    int32_t partitions; /* tasks: partitions of the source topics (0 until
                           known from the broker) */
    int sub_count;      /* sub-topologies, >= 1 */
} ks_topology;

/*
 * Build the topology of `p` (taking ownership of p, also on error). Plugins
 * are copied into `copy_dir` before loading. Where a node that keeps state
 * per key follows a key change, or says `repartition:`, p is rewritten to go
 * through a repartition topic (repartition.h). On error returns -1, *out is
 * NULL and err holds "FILE:LINE:COL: ..." or "PATH: ..." for plugin errors.
 */
int ks_topology_build(ks_pipeline *p, const ks_host_api *api,
                      const char *copy_dir, ks_topology **out, char *err,
                      size_t errlen);

/* Unload plugins and free everything, including the pipeline. */
void ks_topology_free(ks_topology *t);

/* Print sources, processors (plugin, build id), stores and sinks. */
void ks_topology_print(const ks_topology *t, FILE *f);

/* Print the graph as Graphviz DOT. */
void ks_topology_print_dot(const ks_topology *t, FILE *f);

/* Node by name; NULL when absent. */
const ks_topo_node *ks_topology_node(const ks_topology *t, const char *name);

/* Name of the changelog topic of store `store`: "<app>-<store>-changelog",
 * written into buf. */
void ks_changelog_topic(const ks_topology *t, const char *store, char *buf,
                        size_t len);

/*
 * Hot deploy: check processor node `tn` against `pl`, a new build of one of
 * the plugins the pipeline uses (matched by plugin name). Returns 0 when the
 * node uses nothing of that plugin; 1 when it does, with *ptype (inside pl,
 * or the node's own type when only its functions come from pl) and *fns (a
 * new array of tn->fn_count entries, owned by the caller: free()) set; -1
 * when the new build cannot run the node: a processor type or function is
 * missing, or the node's YAML `config:`/`window:` no longer validates; err
 * then holds "FILE:LINE:COL: ..." naming the build's path. Reads only what
 * never changes while the engine runs plus tn->plugin/ptype/fns, which only
 * the reload thread (the caller) writes.
 */
int ks_topology_prepare_swap(const ks_topo_node *tn, const ks_plugin *pl,
                             const ks_processor_type **ptype, ks_topo_fn **fns,
                             char *err, size_t errlen);

/*
 * The window of processor node `n` (its `window:` map) read and checked
 * with the rules of the shipped windows (plugins/window.h, the code the
 * count, aggregate and reduce plugins run): defaults from the fields of
 * type `pt`, or none when pt is NULL (a caller without the plugins, e.g.
 * `kstreams query`). Returns 1 when the node is not windowed (no `window:`
 * or no `kind`), 0 with *spec filled in, -1 with "FILE:LINE:COL: node 'N':
 * ..." in err, at the key at fault. ks_topology_build runs it for every
 * node whose type declares these fields (ks_win_standard_fields).
 */
struct ks_win_spec;
int ks_topology_window_spec(const ks_cfg_node *n, const ks_processor_type *pt,
                            struct ks_win_spec *spec, char *err, size_t errlen);

/* The windowed node whose (first) store is `store` and its window
 * (ks_topology_window_spec without the plugins: the shipped count,
 * aggregate and reduce defaults). 1 with *spec zeroed (kind KS_WIN_NONE)
 * when the store is not windowed, 0 with *node (borrowed from p) and
 * *spec, -1 with "FILE:LINE:COL: ..." in err when the window is invalid. */
int ks_topology_store_window(const ks_pipeline *p, const char *store, const ks_cfg_node **node,
                             struct ks_win_spec *spec, char *err, size_t errlen);

#endif /* KS_TOPOLOGY_H */
