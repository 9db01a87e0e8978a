/*
 * ops_check.h - `check` of the shipped ops plugin's nested config: its
 * predicates and field lists are compiled by the plugin's own code
 * (lib/ops/ops_config.h) when the pipeline is loaded, so that a mistake is
 * reported where it was written rather than when a task starts.
 */
#ifndef KS_OPS_CHECK_H
#define KS_OPS_CHECK_H

#include <stddef.h>

#include "config/config.h"

/* For a node of the plugin named "ops": 0 when its config compiles, else
 * -1 and err "FILE:LINE:COL: node 'N' (ops.T) config 'K' at /P: why", at
 * the part of the value that is wrong. Other nodes: 0. */
int ks_ops_check_node(const ks_cfg_node *n, char *err, size_t errlen);

/* For a node of type ops.branch: 0 when every route's `to` and the
 * `default` name a child of it (a node or sink with `from:` it), else -1
 * and err at where the name was written. Other nodes: 0. Call after
 * ks_ops_check_node. */
int ks_ops_check_children(const ks_pipeline *p, const ks_cfg_node *n, char *err, size_t errlen);

#endif /* KS_OPS_CHECK_H */
