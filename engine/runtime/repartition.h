/*
 * repartition.h - repartition topics and sub-topologies (docs/repartition.md).
 *
 * A node that keeps state per key is correct only when each task sees all
 * records of a key. After a node that changes keys (KS_PROC_CHANGES_KEY,
 * e.g. ops.select_key) that no longer holds, so the topology writes the
 * node's input to an internal topic, `<application>-<node>-repartition`,
 * partitioned by the new key, and reads it back: the pipeline gains an
 * internal sink per input of the node (cfg_sink.feeds = the node) and one
 * internal source (cfg_source.internal), and the node's `from` becomes that
 * source. The graph then falls apart into sub-topologies (connected parts)
 * that meet only through those topics.
 */
#ifndef KS_REPARTITION_H
#define KS_REPARTITION_H

#include <stdio.h>

#include "runtime/topology.h"

/*
 * Decide which processor nodes of `t` (built, with resolved types) need a
 * repartition topic in front of them: those with `repartition:` set, and
 * those that keep state (KS_PROC_KEYED or a store) with a key-changing node
 * upstream that no earlier repartition topic cuts off. Rewrites
 * t->pipeline accordingly (the caller must rebuild the graph). Returns the
 * number of topics inserted (0: nothing changed), or -1 with
 * "FILE:LINE:COL: ..." in err (a name or topic the insertion needs is
 * taken, or out of memory).
 */
int ks_repartition_plan(ks_topology *t, char *err, size_t errlen);

/* Number every node's sub-topology (ks_topo_node.sub) and set
 * t->sub_count: connected parts of the graph, numbered in the order of
 * their first source. */
void ks_repartition_number(ks_topology *t);

/* "<application>-<node>-repartition" into buf. */
void ks_repartition_topic(const ks_pipeline *p, const char *node, char *buf, size_t len);

/* Print the sub-topologies and repartition topics (`check`, `describe`);
 * nothing when the topology has a single sub-topology and no topic. */
void ks_repartition_print(const ks_topology *t, FILE *f);

#endif /* KS_REPARTITION_H */
