/*
 * grow_check.h - the checks `kstreams grow-partitions` makes before it
 * changes anything: no process of the application runs (its consumer
 * group has no member), every record of the partitions whose keys were
 * placed for the old count is processed (the group's committed offset is
 * at the end, or only transaction markers follow it), and no topic it
 * reads or writes has an open transaction.
 */
#ifndef KS_GROW_CHECK_H
#define KS_GROW_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

/* A refusal: the state of the cluster forbids the growth now (err says
 * what to do), as opposed to -1, a failure to find out. */
#define KS_GROW_REFUSED (-2)

/* 0 when consumer group `group` has no member; KS_GROW_REFUSED with err
 * naming the members' client ids; -1 with err when the broker could not
 * say. `admin` is borrowed. */
int ks_grow_check_group(rd_kafka_t *admin, const char *group, char *err, size_t errlen);

/* One partition to check. */
typedef struct ks_grow_part {
    const char *topic; /* borrowed */
    int32_t partition;
    int drained;       /* 1: its records must all be processed by `group` */
    int64_t end;       /* set: its last stable offset when checked */
} ks_grow_part;

/*
 * Check the n partitions of `parts`: none may have an open transaction
 * (last stable offset below the high watermark), and those with `drained`
 * must have no record after the group's committed offset (after the
 * earliest offset when the group committed none: the engine starts
 * there). `committed` is a read_committed consumer whose group.id is the
 * application's, never subscribed (borrowed; this call assigns and
 * unassigns partitions); `uncommitted` a read_uncommitted consumer
 * (borrowed). 0 with every ->end set; KS_GROW_REFUSED with err listing the
 * partitions at fault ("drain first: T[P] has N unprocessed records ...");
 * -1 with err on a broker error.
 */
int ks_grow_check_parts(rd_kafka_t *committed, rd_kafka_t *uncommitted, ks_grow_part *parts,
                        size_t n, char *err, size_t errlen);

/* The last stable offset of every partition of `parts` now, read with
 * the read_committed `committed` (borrowed), into ends[i]. 0 or -1 with
 * err. */
int ks_grow_check_ends(rd_kafka_t *committed, const ks_grow_part *parts, size_t n,
                       int64_t *ends, char *err, size_t errlen);

#endif /* KS_GROW_CHECK_H */
