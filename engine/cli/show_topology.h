/*
 * show_topology.h - load a pipeline's topology without running it and
 * print it: what `kstreams check` and `kstreams describe` share.
 */
#ifndef KS_CLI_SHOW_TOPOLOGY_H
#define KS_CLI_SHOW_TOPOLOGY_H

#include <stddef.h>
#include <stdio.h>

#include "cli/exit_codes.h"

/* How to print the topology. */
typedef enum ks_topology_view {
    KS_VIEW_TEXT,  /* sources, processors (plugin, build id), stores, sinks */
    KS_VIEW_DOT,   /* a Graphviz graph */
} ks_topology_view;

/*
 * Load pipeline `file` and its plugins (private copies in a temporary
 * directory, removed after), print the topology to `out` as `view` says,
 * then "FILE: ok" when say_ok. KS_EXIT_OK; KS_EXIT_INVALID with the error
 * on err; KS_EXIT_FAILURE when no temporary directory can be made.
 */
/*
 * Load pipeline `file` and its plugins, copied into a new temporary
 * directory whose path goes to dir (dirlen bytes): the caller frees the
 * topology (ks_topology_free) and then removes dir (rmdir). The topology,
 * or NULL with the error on errf (dir then needs no removal).
 */
struct ks_topology;
struct ks_topology *ks_cli_load_topology(const char *file, char *dir, size_t dirlen,
                                         FILE *errf);

ks_exit ks_cli_show_topology(const char *file, ks_topology_view view, int say_ok, FILE *out,
                             FILE *err);

#endif /* KS_CLI_SHOW_TOPOLOGY_H */
