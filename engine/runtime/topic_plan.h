/*
 * topic_plan.h - the topics a pipeline needs (sources, sinks, dead letters,
 * outbox requests, changelogs) and what each must look like; made sure of
 * at start, before any consumer or producer of the engine exists.
 */
#ifndef KS_TOPIC_PLAN_H
#define KS_TOPIC_PLAN_H

#include <stddef.h>

#include "runtime/topology.h"

/* Make sure every topic `topo` needs exists as it must (topics.h): sources
 * (created only with `create: true`, co-partitioned), sinks, the
 * dead-letter topic, the outbox requests topic, and one compacted
 * changelog per store with exactly one partition per task. Sets
 * topo->partitions. `topo` is borrowed. 0, -1 with err naming the topic,
 * what was expected and what was found, or KS_TOPIC_UNAVAILABLE (topics.h)
 * with err when the broker did not answer in time: worth trying again. */
int ks_topic_plan_prepare(ks_topology *topo, char *err, size_t errlen);

#endif /* KS_TOPIC_PLAN_H */
