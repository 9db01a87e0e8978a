/*
 * grow_partitions.h - `kstreams grow-partitions`: give the source topics
 * of a stopped application more partitions without losing its state. In
 * this order, so that an interruption leaves nothing the engine would run
 * with (it refuses to start while a changelog's count differs from the
 * sources') and a second run finishes the work: check (no member in the
 * group, every old partition processed, no open transaction), read the
 * changelogs, grow the changelogs and repartition topics, move the keys
 * in one transaction (grow_move.h), grow the sources last.
 */
#ifndef KS_GROW_PARTITIONS_H
#define KS_GROW_PARTITIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kafka/grow_check.h"
#include "runtime/grow_plan.h"

/*
 * Grow the topics of `plan` (made for `t`; both borrowed) to `partitions`
 * and move the stores' keys; with dry_run, check and print what would be
 * done, change nothing. Progress and the summary go to `out`. 0; -1 with
 * err on a failure (what was done so far is safe to run again);
 * KS_GROW_REFUSED with err when the application runs, has records to
 * process, or a topic has more partitions than asked for.
 */
int ks_grow_partitions(const ks_topology *t, const ks_grow_plan *plan, int32_t partitions,
                       int dry_run, FILE *out, char *err, size_t errlen);

#endif /* KS_GROW_PARTITIONS_H */
