/*
 * node_serde.h - the serdes of the records a topology node reads and of
 * those a child takes (host API input_serde and child_serde, ABI 1.6),
 * worked out from the YAML's sources and sinks.
 */
#ifndef KS_NODE_SERDE_H
#define KS_NODE_SERDE_H

#include "kstreams/kstreams.h"
#include "runtime/topology.h"

/* What node `node` reads: merged over its inputs (kstreams.h,
 * input_serde, says the rules). */
void ks_node_input_serde(const ks_topology *t, int node, ks_serde_kind *key,
                         ks_serde_kind *value);

/* 1 when every input of node `node` is a source or table of the YAML
 * (not a repartition topic) with value serde json, else 0. */
int ks_node_input_checked(const ks_topology *t, int node);

/* What node `child` takes (a sink: its serdes; a node: what follows it). */
void ks_node_child_serde(const ks_topology *t, int child, ks_serde_kind *key,
                         ks_serde_kind *value);

#endif /* KS_NODE_SERDE_H */
