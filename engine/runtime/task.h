/*
 * task.h - one task: the processor instances and stores of one partition
 * number, and the walk of a record through the graph.
 *
 * A task knows nothing about Kafka: what leaves it (sink records, changelog
 * writes) goes through the ks_task_io callbacks of its owner (a worker, or
 * the test driver). It runs on one thread at a time.
 */
#ifndef KS_TASK_H
#define KS_TASK_H

#include <stdint.h>

#include "kstreams/kstreams.h"
#include "state/store.h"
#include "runtime/global_table.h"
#include "runtime/topology.h"

typedef struct ks_task ks_task;

typedef struct ks_task_io {
    void *arg;
    /* Send `rec` to the topic of sink node `sink`. Must copy what it keeps.
     * Returns 0 or a negative ks_err (the record then fails). */
    int (*emit)(void *arg, ks_task *task, const ks_topo_node *sink,
                const ks_record *rec);
    /* Mirror a store write to the changelog: `value` NULL is a tombstone.
     * `store` indexes pipeline->stores. May be NULL (no changelog). */
    int (*changelog)(void *arg, ks_task *task, int store, ks_bytes key,
                     const ks_bytes *value);
    /* Send `rec` to `topic`, which is no sink of the graph (the outbox's
     * requests topic), in the same batch as the sinks. Must copy what it
     * keeps. May be NULL (the owner offers no such output: KS_ERR_UNSUPPORTED). */
    int (*emit_topic)(void *arg, ks_task *task, const char *topic, const ks_record *rec);
    /* Where plugin counters (api->metric_add) go; may be NULL. */
    struct ks_metrics *metrics;
    /* The process's global tables (global_table.h), borrowed; NULL when
     * the pipeline has none: a global store then reads as empty. */
    struct ks_global *global;
    /* Non-zero: nodes with `cache_bytes` get a record cache and the owner
     * calls ks_task_flush_caches before each commit (task_cache.h); 0:
     * every update is passed on at once (the test driver). */
    int cache;
} ks_task_io;

/* Phases: which host calls are allowed (checked where a call enters). */
typedef enum ks_phase {
    KS_PHASE_NONE = 0,
    KS_PHASE_INIT,
    KS_PHASE_PROCESS,
    KS_PHASE_PUNCTUATE,
    KS_PHASE_CLOSE
} ks_phase;

#define KS_CTX_MAGIC 0x6b736378u /* "kscx" */

struct ks_store {
    struct ks_ctx *ctx;
    int index; /* into pipeline->stores */
    ks_store_db *db;
    ks_global_reader global; /* a global table's store: this handle's snapshot */
};

typedef struct ks_schedule {
    int64_t interval; /* 0: none */
    int64_t next;
} ks_schedule;

/* The build a processor instance runs, copied into its ctx at init: a hot
 * deploy (reload.c) changes what NEW instances get without touching the
 * running ones, which keep theirs until they are closed. */
typedef struct ks_node_build {
    ks_plugin *plugin;
    const ks_processor_type *ptype;
    const ks_topo_fn *fns; /* fn_count entries, as in the node */
    size_t fn_count;
} ks_node_build;

struct ks_ctx {
    uint32_t magic;
    ks_task *task;
    const ks_topo_node *node;
    void *state; /* the processor instance */
    int inited;
    ks_phase phase;
    struct ks_store *stores; /* one per node store */
    ks_schedule schedules[2]; /* by ks_time_kind */
    ks_node_build build;      /* what init/process/punctuate/close call */
    int heap;                 /* made by ks_task_prepare_node: free() it */
    /* The node's stores are in state format `migrate_from`, older than
     * the build's state_version: migrate(from) and the version bump must
     * commit with the first batch this instance runs in, before any of
     * its records (ks_task_run_migrations). Set at task open
     * (ks_task_check_versions) and at a hot swap. */
    int migrate_pending;
    /* The stores have no version yet (new, or written before versions
     * were kept): record the build's, in the first batch. */
    int stamp_pending;
    int migrated_in_batch; /* the pending work is in the open batch */
    int migrating;         /* inside migrate(): the mid-migrate crash point */
    uint32_t migrate_from;
    struct ks_json_writer *json; /* json_writer's buffer, made on first use */
    const char *input; /* name of the node whose record process() runs on */
};

struct ks_task {
    const ks_topology *topo;
    int32_t partition;
    ks_task_io io;
    struct ks_ctx *ctxs; /* one per topology node (used for processors) */
    ks_store_env *env;   /* NULL when the pipeline has no stores */
    ks_store_db **dbs;   /* per pipeline store */
    int64_t stream_time;  /* highest timestamp seen by any sub-topology */
    /* per sub-topology (repartition.h): the stream time its nodes see, so
     * that records read back from a repartition topic are not judged late
     * by the time of the records that have not gone through it yet */
    int64_t *sub_time;
    const ks_record *current; /* the source record being processed */
    uint32_t outbox_calls;    /* outbox_enqueue calls for `current` so far */
    ks_verdict verdict;       /* worst verdict of the current record */
    char skip_reason[256];    /* host skip_reason for the current record; "" none */
    /* what io.emit returned for the current record or punctuation:
     * KS_ERR_INVALID when the owner refused an output (it does not match
     * the sink's serde: a replay of the record cannot mend it), else the
     * first error, 0 when none */
    int sink_err;
    char where[96];           /* "task-3" for logs */
    char state_dir[4096];
    /* per pipeline store: highest changelog offset produced in the open
     * batch, -1 when none (set by the owner's delivery reports) */
    int64_t *changelog_hi;
    uint64_t records_in;
    uint64_t records_out;
    /* > 0: the wall-clock time (ms) now(KS_TIME_WALLCLOCK) returns, set by
     * the test driver; 0: the host's clock */
    int64_t wallclock;
    /* per node: the ctx that runs (&ctxs[i] until a hot deploy swaps in a
     * prepared one) and the prepared ctx waiting for the swap (or NULL) */
    struct ks_ctx **live;
    struct ks_ctx **next;
    /* per node: its record cache (task_cache.h), or NULL; NULL when no
     * node has one */
    struct ks_cache **caches;
    /* > 0 while a record cache passes records on (task_cache.c): the
     * outbox refuses events then, their ids derive from the source record
     * and a flushed record is not the one being processed */
    int in_cache_flush;
    /* cache counters already published as metrics (worker_metrics.c) */
    uint64_t cache_published[3];
};

/* The host API table the engine hands to plugins. Static, process-wide. */
const ks_host_api *ks_host_api_table(void);

/*
 * Create task `partition` of `topo`: open its store environment (under
 * state_dir/<application>/task-<partition>) when the pipeline has stores,
 * and init every processor instance. On error returns -1 with err set and
 * nothing left open.
 */
int ks_task_create(const ks_topology *topo, int32_t partition,
                   const ks_task_io *io, ks_task **out, char *err,
                   size_t errlen);

/*
 * Open only the stores of task `partition` of `topo` (the same environment
 * ks_task_create opens), with no processor instances: a standby replica's
 * copy (standby.h), written with ks_task_restore_put / ks_table_restore_put
 * and ks_task_commit_stores, closed with ks_task_destroy. The task cannot
 * process records. 0, or -1 with err set (KS_ERR_STATE's message when this
 * process has the environment open already) and nothing left open.
 */
int ks_task_open_stores(const ks_topology *topo, int32_t partition, ks_task **out, char *err,
                        size_t errlen);

/* Close every processor instance, abort an open store batch, close the
 * environment. NULL is fine. */
void ks_task_destroy(ks_task *task);

/*
 * Run one source record through the graph from source node `source`.
 * Returns the worst verdict of any processor on the way; on KS_OK every
 * output went through io.emit.
 */
ks_verdict ks_task_process(ks_task *task, const ks_topo_node *source,
                           const ks_record *rec);

/* Deliver rec from node `from` (a source or processor of the task's
 * topology, borrowed) to one of its children (processor or sink); the
 * child's verdict is folded into task->verdict. Returns 0 or a negative
 * ks_err. */
int ks_task_dispatch(ks_task *task, const ks_topo_node *from, const ks_topo_node *child,
                     const ks_record *rec);

/* Fire due wall-clock punctuations at `now_ms`. */
ks_verdict ks_task_punctuate_wallclock(ks_task *task, int64_t now_ms);

/* ---- hot deploy (reload.c); all on the task's owner thread, outside a
 * batch --------------------------------------------------------------- */

/* The build node `n` has in the topology now (read atomically: the reload
 * thread may be switching it). */
ks_node_build ks_task_node_build(const ks_topo_node *n);

/*
 * Create a new instance of processor node `n` on build `b` for this task
 * and keep it as the node's prepared instance (replacing an earlier one).
 * `migrate_from` is the state_version of the running instance; when it
 * differs from b->ptype->state_version the instance migrates before its
 * first record. 0, or -1 with err naming the task, node and plugin path
 * when init fails (nothing is kept).
 */
int ks_task_prepare_node(ks_task *task, const ks_topo_node *n, const ks_node_build *b,
                         uint32_t migrate_from, char *err, size_t errlen);

/* Swap in node `index`'s prepared instance: close the running one (its
 * build may be unloaded after this returns), run the new one from now on.
 * Returns 1 when swapped, 0 when nothing was prepared. */
int ks_task_swap_node(ks_task *task, int index);

/* Close and forget every prepared instance (a refused hot deploy). */
void ks_task_discard_prepared(ks_task *task);

/* The running instance of node `index` (NULL for sources and sinks). */
const struct ks_ctx *ks_task_live(const ks_task *task, int index);

/* Run pending migrations of this task's instances inside the open batch:
 * migrate(), then the new state version of each of the node's stores in
 * its LMDB __meta and as a version record in its changelog, all in the
 * batch's transactions. Called by ks_task_process and the punctuations
 * before any processor. KS_OK, or the worst verdict of a migrate() (or
 * KS_RETRY when a store write failed): the batch must then abort, and the
 * migration runs again in the replay. */
ks_verdict ks_task_run_migrations(ks_task *task);

/*
 * At task open, once the stores are restored: compare each processor
 * node's stored state version (ks_store_version_get of its stores) with
 * its build's state_version. Older: a migration is pending (the build
 * must offer migrate()); none stored: the version is recorded in the
 * first batch; newer: refused, no downgrade. 0, or -1 with err naming the
 * task, node, store, versions and the build (nothing pending then; the
 * owner must not run the task).
 */
int ks_task_check_versions(ks_task *task, char *err, size_t errlen);

/* Non-zero when an instance of the task still owes a migration or a
 * version record that is not in the open batch. */
int ks_task_migration_pending(const ks_task *task);

/* Non-zero when the open batch writes a state version (a migration or a
 * first version record). */
int ks_task_versions_in_batch(const ks_task *task);

/* Non-zero when a migrate() ran in the open batch (for the crash points
 * around its commit). */
int ks_task_migrated_in_batch(const ks_task *task);

/* The changelog record that carries a store's state version. Its key is
 * KS_VERSION_KEY_LEN bytes, longer than any store key (1..500), so it is
 * never a plugin's key and compaction keeps the latest one; its value is
 * the version, 4 bytes big-endian. The restore applies it to the store's
 * __meta instead of the data. */
#define KS_VERSION_KEY_LEN 501
/* The key (KS_VERSION_KEY_LEN bytes, static). */
ks_bytes ks_task_version_key(void);
/* 1 when `key` is the version record's key. */
int ks_task_is_version_key(ks_bytes key);

/* Store batch control, for the owner's commit sequence. */
int ks_task_begin(ks_task *task);
/* Before the Kafka commit (changelog_hi known): set each written store's
 * checkpoint and check that LMDB's commit will find its pages
 * (ks_store_prepare_commit). Non-zero: the batch must be aborted;
 * ks_task_store_message says why. */
int ks_task_prepare_stores(ks_task *task);
/* Set each written store's checkpoint from changelog_hi and commit LMDB. */
int ks_task_commit_stores(ks_task *task);
void ks_task_abort_stores(ks_task *task);

/* Why the last store call of the task failed (ks_store_last_error of
 * its environment; "" when it has no stores). Borrowed: valid until the
 * next store call. */
const char *ks_task_store_message(const ks_task *task);

/* The error that killed the task's open store batch (ks_store_batch_error,
 * e.g. KS_ERR_STORE_FULL: a replay cannot help, raising map_size can),
 * with its message in *msg, borrowed until the batch ends; 0 while the
 * batch is alive or none is open. */
int ks_task_batch_error(const ks_task *task, const char **msg);

/* Apply one changelog record during restore (value NULL: delete) and
 * remember `offset`; a version record (ks_task_is_version_key) sets the
 * store's state version instead (KS_ERR_IO when its value is not 4
 * bytes). ks_task_commit_stores() then writes checkpoints. */
int ks_task_restore_put(ks_task *task, int store, ks_bytes key,
                        const ks_bytes *value, int64_t offset);

/* Empty store `store` in the task's open batch (begun here when none is)
 * for a replay from `start`, the log start of a changelog that no longer
 * holds the store's checkpoint: ks_task_commit_stores() then writes
 * `start` as its checkpoint with the empty store. The task's record
 * caches are emptied. 0, or the store's ks_err. */
int ks_task_restore_wipe(ks_task *task, int store, int64_t start);

/* Checkpoint of store `store` (next changelog offset to read); -1 when the
 * store has none (replay from the beginning). */
int64_t ks_task_checkpoint(ks_task *task, int store);

#endif /* KS_TASK_H */
