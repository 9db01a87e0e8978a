/*
 * table.h - tables (`tables:`): a topic read as a changelog into a store of
 * the task (docs/tables-and-joins.md).
 *
 * The table's topic is its store's changelog (Kafka Streams' source-topic
 * optimization): nothing else is written for it. A record puts its value
 * under its key, a tombstone (null value) deletes the key, in offset order.
 * The store holds per key the record's timestamp, 8 bytes big-endian, then
 * the value bytes, so that a join can give its output the later of the two
 * timestamps. The store's checkpoint is the next table offset to apply.
 */
#ifndef KS_TABLE_H
#define KS_TABLE_H

#include <stdint.h>

#include "runtime/task.h"

/* Bytes before the value in a table store's value (the timestamp). */
#define KS_TABLE_TS_LEN 8

/*
 * Apply one record of table source `source` (rec borrowed) to its store in
 * the task's open batch and remember its offset for the checkpoint. A
 * record without a key is ignored (as Kafka Streams does; logged at debug);
 * KS_SKIP for a key the store cannot hold (over 500 bytes: a poison
 * record), KS_RETRY when the store write failed (the batch aborts; a full
 * map is then reported by the owner), else KS_OK.
 */
ks_verdict ks_table_apply(ks_task *task, const ks_topo_node *source, const ks_record *rec);

/* The table (a source of `p`, borrowed) whose store is `store`, or NULL
 * when that store is no table's. */
const ks_cfg_source *ks_table_of_store(const ks_pipeline *p, int store);

/* The topic that store `store` of `t` is restored from into buf: its
 * changelog, or a table's own topic. */
void ks_store_changelog(const ks_topology *t, int store, char *buf, size_t len);

/*
 * During restore: apply the table record at `offset` (value NULL: a
 * tombstone; key and value borrowed) to table store `store` as
 * ks_table_apply does. Records the worker never applies are skipped: no
 * key, a key over KS_KEY_MAX, a key or value not in the table's serde
 * (poison). 0 or a negative ks_err from the store.
 */
int ks_table_restore_put(ks_task *task, int store, ks_bytes key, const ks_bytes *value,
                         int64_t timestamp, int64_t offset);

/* End the global-store snapshots the task's processors read through
 * (global_table.h) once a record or punctuation is done: values they
 * borrowed are not valid past it anyway, and an idle task must not keep
 * the global thread from reusing pages. */
void ks_table_release_global_reads(ks_task *task);

#endif /* KS_TABLE_H */
