/*
 * testdriver.h - run a kstreams pipeline in your own unit tests, without a
 * broker (like Kafka Streams' TopologyTestDriver).
 *
 * The driver loads a pipeline YAML and its plugins (real dlopen, the same
 * loader checks as `kstreams run`), creates one task per partition with
 * real LMDB stores, and runs each piped record through the engine's own
 * processing code (the task walk of engine/runtime/task.c). What a worker would
 * send to Kafka is kept in memory instead: sink records for
 * ks_driver_read_output(), outbox events (host->outbox_enqueue) for
 * ks_driver_read_event(), changelog writes for the stores' checkpoints.
 *
 * Link:  cc test.c $(pkg-config --cflags --libs kstreams-testdriver)
 * Guide: docs/testing-plugins.md
 *
 * Like the engine, the driver
 *  - checks each piped key and value against its source's serde
 *    (int64: 8 bytes, json: valid JSON) and each sink record against its
 *    sink's serde;
 *  - keys records to partitions as Kafka's default partitioner does
 *    (murmur2 of the key, positive, modulo the partition count);
 *  - runs a pipeline with repartition topics (docs/repartition.md) whole:
 *    what a piped record writes to one is not an output; it is read back
 *    by the sub-topology behind it, in the task of the new key's
 *    partition, right after the piped record and in the same batch;
 *  - commits store batches (checkpoints + one LMDB commit), after every
 *    piped record by default, or only on ks_driver_commit() with
 *    `manual_commit`;
 *  - on KS_RETRY or KS_FATAL aborts the open batch: store writes since the
 *    last commit are undone and sink records and outbox events of that
 *    batch not yet read are discarded (a read_committed consumer would
 *    never see them). The driver does not replay; pipe the record again to
 *    retry.
 *
 * Time: stream time advances with the timestamps of piped records (and
 * fires stream-time punctuations as the engine does). Wall-clock time is
 * the driver's own: it starts at `options.wallclock_start_ms` and moves only
 * with ks_driver_advance_wallclock(); host API now(KS_TIME_WALLCLOCK)
 * returns it.
 *
 * Threads: a driver is used by one thread at a time. Several drivers may
 * live in one process if their state directories differ.
 *
 * Errors: functions return 0 or a negative ks_err (kstreams.h); the reason
 * is in ks_driver_last_error(). ks_driver_pipe* also return a positive
 * ks_verdict (KS_RETRY, KS_SKIP, KS_FATAL) when a processor returned one.
 */
#ifndef KSTREAMS_TESTDRIVER_H
#define KSTREAMS_TESTDRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "kstreams/kstreams.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ks_driver ks_driver;

typedef struct ks_driver_options {
    /* State directory; the driver writes STATE_DIR/<application>/task-<P>/
     * exactly as the engine does (so `kstreams query` can read it). NULL: a
     * fresh temporary directory, deleted by ks_driver_close(). A given
     * directory is kept, and reopening it finds the stores as they were
     * committed. Borrowed during ks_driver_open() only. */
    const char *state_dir;
    /* Extra plugin directories, ':'-separated, searched before the
     * pipeline's `plugin_path:` (then $KSTREAMS_PLUGIN_PATH, then the
     * installed plugin directory). NULL: none. Borrowed during open. */
    const char *plugin_path;
    /* Number of partitions (= tasks) of the source topics. 0: 1. */
    int32_t partitions;
    /* Non-zero: store batches commit only in ks_driver_commit() (and
     * ks_driver_close()). Zero: after every piped record that was not
     * aborted, and after every wall-clock advance. */
    int manual_commit;
    /* Initial wall-clock time in ms since the epoch; 0: the real clock at
     * open. */
    int64_t wallclock_start_ms;
} ks_driver_options;

/* A sink record read back with ks_driver_read_output(). Every pointer is
 * owned by the driver and valid until the next ks_driver_read_output() on
 * the same driver, or ks_driver_close(). */
typedef struct ks_driver_record {
    const char *sink;  /* sink name (YAML `name:` or "sink-<n>")          */
    const char *topic; /* the sink's topic                               */
    /* Partition a Kafka producer would pick: murmur2 of the key modulo the
     * sink's `partitions:` when it has `create: true`, else modulo the
     * driver's partition count; -1 for a null key. */
    int32_t partition;
    int32_t task;      /* the task (input partition) that produced it     */
    const void *key;   /* NULL for a null key                            */
    size_t key_len;
    const void *value; /* NULL for a tombstone                           */
    size_t value_len;
    int64_t timestamp;
    const ks_header *headers;
    size_t header_count;
} ks_driver_record;

/* An outbox event read back with ks_driver_read_event(): what a processor
 * handed host->outbox_enqueue(). Every pointer is owned by the driver and
 * valid until the next ks_driver_read_event() on the same driver, or
 * ks_driver_close(); nothing is to be freed by the caller. */
typedef struct ks_driver_event {
    const char *outbox; /* the outbox's name (YAML `outbox: name:`)       */
    /* The event id the engine would give it: 32 lower-case hex digits,
     * NUL-terminated, derived from the application id, the input record's
     * topic, partition and offset and `rank`, so the same input offset
     * gives the same id (also in another driver or in the engine). */
    const char *id;
    const char *user;   /* the user id (user_len bytes, NUL-terminated)   */
    size_t user_len;
    const void *payload; /* never NULL, even for an empty payload; a NUL
                          * follows its payload_len bytes                 */
    size_t payload_len;
    /* The input record that was being processed (as piped: its source's
     * topic, its partition, the offset the driver gave it). */
    const char *input_topic;
    int32_t input_partition;
    int64_t input_offset;
    uint32_t rank;     /* 0 for the record's first event, then 1, ...     */
    int32_t task;      /* the task (input partition) that produced it     */
    int64_t timestamp; /* the input record's timestamp                    */
} ks_driver_event;

/*
 * Load the pipeline YAML file `path`, load its plugins, open the stores and
 * init every processor of every task. `opt` may be NULL (all defaults). On
 * success returns 0 and *out owns the driver (free with ks_driver_close).
 * On failure returns a negative ks_err, *out is NULL, and err (errlen bytes,
 * NUL-terminated; may be NULL) says why: "FILE:LINE:COL: ..." for YAML
 * errors, "PATH: ..." for plugins, "task-P: init of node ..." for inits,
 * KS_ERR_STATE with "task-P: node ...: store ... holds state version ..."
 * when a kept state_dir holds a newer state version than the build, or an
 * older one and the build has no migrate(). An older version with
 * migrate() migrates in the first batch, as in the engine (a state_dir
 * written by the previous build tests a migration).
 * The pipeline's `kafka:` section is validated but never used.
 */
int ks_driver_open(const char *path, const ks_driver_options *opt, ks_driver **out,
                   char *err, size_t errlen);

/* Same, from YAML text in memory (`len` bytes; `text` is borrowed during
 * the call). `name` stands for the file name in error messages. */
int ks_driver_open_text(const char *name, const char *text, size_t len,
                        const ks_driver_options *opt, ks_driver **out, char *err,
                        size_t errlen);

/*
 * Commit open store batches, close every processor instance (close()),
 * unload plugins, and delete the temporary directories the driver made.
 * Every pointer obtained from the driver becomes invalid. NULL is fine.
 */
void ks_driver_close(ks_driver *drv);

/*
 * Pipe one record into source `source` (its name under `sources:`, or a
 * table's under `tables:`).
 * key/value are copied as needed before the call returns; NULL key = null
 * key, NULL value = tombstone. The partition is the key's (murmur2), or
 * round-robin for a null key.
 * A record piped to a global table (`global_tables:`) is applied at once
 * to the store all tasks share, as the engine's global thread does (its
 * partition: the key's among the table's `partitions`); no processor runs
 * for it, and its store reads the same from every partition.
 * Returns 0 when every processor returned KS_OK; KS_SKIP when a processor
 * returned skip or the key/value do not match the source's serde (a poison
 * record: the engine would apply the poison policy; the batch goes on);
 * KS_RETRY or KS_FATAL when a processor returned that (the batch was
 * aborted, see the top of this file); KS_ERR_NOT_FOUND for an unknown
 * source; KS_ERR_IO when a commit failed.
 */
int ks_driver_pipe(ks_driver *drv, const char *source, const void *key, size_t key_len,
                   const void *value, size_t value_len, int64_t timestamp);

/* Same with a full record: rec->partition >= 0 chooses the partition (task)
 * instead of the partitioner (KS_ERR_INVALID when out of range); topic and
 * offset are filled in by the driver; headers are passed through. */
int ks_driver_pipe_record(ks_driver *drv, const char *source, const ks_record *rec);

/*
 * Take the oldest unread sink record whose sink name or topic is `sink`
 * (NULL: of any sink), in the order the engine would have produced them.
 * Returns 0 and fills *rec (see ks_driver_record for ownership), or
 * KS_ERR_NOT_FOUND when there is none.
 */
int ks_driver_read_output(ks_driver *drv, const char *sink, ks_driver_record *rec);

/* Number of unread sink records of `sink` (NULL: all). */
size_t ks_driver_output_count(const ks_driver *drv, const char *sink);

/*
 * Outbox events. With an `outbox:` section in the pipeline, a processor's
 * host->outbox_enqueue() succeeds under the driver as in the engine (same
 * checks, same derived id) and the event is kept here instead of being
 * sent to the requests topic. Like sink records, an event can be read as
 * soon as the ks_driver_pipe*() that made it returns, also with
 * `manual_commit` before ks_driver_commit(); when its batch is aborted
 * (KS_RETRY, KS_FATAL, a failed commit) an event not yet read is discarded,
 * as the engine's outbox never sees an aborted batch's events. Without an
 * `outbox:` section outbox_enqueue() returns KS_ERR_NOT_FOUND to the
 * processor, as in the engine.
 *
 * Take the oldest unread event of outbox `outbox` (its `name:`; NULL: of
 * any), in enqueue order. Returns 0 and fills *ev (see ks_driver_event for
 * ownership; the previous event read is released), KS_ERR_NOT_FOUND when
 * there is none or no outbox of that name (*ev is zeroed), KS_ERR_INVALID
 * for a NULL drv or ev.
 */
int ks_driver_read_event(ks_driver *drv, const char *outbox, ks_driver_event *ev);

/* Number of unread events of outbox `outbox` (NULL: all); 0 for an unknown
 * outbox or a NULL drv. */
size_t ks_driver_event_count(const ks_driver *drv, const char *outbox);

/*
 * Read `key` from store `store` of task `partition` (-1: the task the key
 * is partitioned to). Sees the open batch's own writes. On 0, *value
 * points into a driver buffer valid until the next call on the driver.
 * KS_ERR_NOT_FOUND when the key, the store or the partition is absent.
 */
int ks_driver_store_get(ks_driver *drv, const char *store, int32_t partition,
                        const void *key, size_t key_len, ks_bytes *value);

/*
 * Visit the keys of store `store` in [from, to) in byte order (empty or
 * NULL bounds: from the first / to the last), in task `partition`, or in
 * every task in turn when partition is -1. key and value are borrowed until
 * cb returns; cb returns non-zero to stop. Do not call the driver from cb.
 */
int ks_driver_store_range(ks_driver *drv, const char *store, int32_t partition,
                          const void *from, size_t from_len, const void *to,
                          size_t to_len, ks_range_cb cb, void *arg);

/* Number of keys in store `store` over all tasks, into *count. */
int ks_driver_store_count(ks_driver *drv, const char *store, uint64_t *count);

/*
 * Move the driver's wall clock forward by `ms` (>= 0) and fire wall-clock
 * punctuations as they fall due, in time order: a schedule of 1 s advanced
 * by 3.5 s fires 3 times, each with its own `now`. Then commits unless
 * `manual_commit`. Returns 0, or the worst punctuation verdict (the batch
 * was aborted on KS_RETRY/KS_FATAL), or a negative ks_err.
 */
int ks_driver_advance_wallclock(ks_driver *drv, int64_t ms);

/* The driver's wall-clock time, and the stream time of task `partition`
 * (-1 before its first record). */
int64_t ks_driver_wallclock(const ks_driver *drv);
int64_t ks_driver_stream_time(const ks_driver *drv, int32_t partition);

/* Commit every task's open store batch as the engine does after a Kafka
 * commit: set each written store's checkpoint, then one LMDB commit. */
int ks_driver_commit(ks_driver *drv);

/* Number of partitions (tasks) of the driver. */
int32_t ks_driver_partitions(const ks_driver *drv);

/* The partition Kafka's default partitioner picks for a non-null key:
 * (murmur2(key) & 0x7fffffff) % partitions, murmur2 as in Java's
 * org.apache.kafka.common.utils.Utils.murmur2. */
int32_t ks_driver_partition_for(const void *key, size_t key_len, int32_t partitions);

/* Kafka's murmur2 (seed 0x9747b28c) of len bytes, as a Java int. */
int32_t ks_driver_murmur2(const void *data, size_t len);

/* One line about the last failure on drv ("" when none); valid until the
 * next call on drv. */
const char *ks_driver_last_error(const ks_driver *drv);

#ifdef __cplusplus
}
#endif

#endif /* KSTREAMS_TESTDRIVER_H */
