/*
 * store.h - host-owned LMDB state of one task.
 *
 * One LMDB environment per task (state_dir/<application>/task-<P>/), with
 * one named database per store plus a "__meta" database holding, per store,
 * the changelog checkpoint (the changelog offset up to which the store
 * matches its changelog) and the state version (the format its data is
 * in, see ks_store_version_get). Data, checkpoints and versions change in
 * ONE write transaction per batch, so they commit and abort together.
 *
 * Why one env per task: tasks move between workers and processes on
 * rebalance; a per-task env can be closed, deleted or restored alone, and
 * each worker thread holds the write transactions of only its own tasks
 * (LMDB: one writer per env; one thread may hold write txns on several
 * envs).
 *
 * An environment is never opened twice in one process: a process-wide
 * registry refuses it (LMDB's locks break otherwise).
 *
 * Thread: an env's write transaction belongs to the thread that began it.
 */
#ifndef KS_STORE_H
#define KS_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "kstreams/kstreams.h"

typedef struct ks_store_env ks_store_env;
typedef struct ks_store_db ks_store_db;

/*
 * Open (creating if needed) the environment in directory `dir` (created
 * with parents if missing) with room for `max_stores` named stores and a
 * map of `map_size` bytes. Returns 0 and *out, or a negative ks_err with a
 * message in err ("DIR: reason"); KS_ERR_STATE if this process has it open.
 */
int ks_store_env_open(const char *dir, uint64_t map_size, unsigned max_stores,
                      ks_store_env **out, char *err, size_t errlen);

/*
 * Open the existing environment in `dir` read-only (MDB_RDONLY), for
 * `kstreams query` in another process than the one writing it. Same
 * registry rule as ks_store_env_open; KS_ERR_NOT_FOUND if there is no
 * environment in `dir`. ks_store_begin on it returns KS_ERR_STATE, and
 * ks_store_db_open returns KS_ERR_NOT_FOUND for a store never created.
 * Reads see a snapshot that lasts until ks_store_read_end(): end it after
 * each query (a held snapshot keeps the writer from reusing pages).
 */
int ks_store_env_open_readonly(const char *dir, ks_store_env **out, char *err,
                               size_t errlen);

/* Abort any open transaction, close, and release the registry slot. */
void ks_store_env_close(ks_store_env *env);

/* Delete the environment's files (data.mdb, lock.mdb) in `dir`, then `dir`
 * itself when nothing else is left in it. 0 when there is nothing to
 * delete; KS_ERR_STATE if this process has the environment open (close it
 * first); KS_ERR_IO when a file cannot be removed. */
int ks_store_env_wipe(const char *dir);

/* Set the map size to `new_map_size` bytes (the file grows lazily). Only
 * with no write transaction open (KS_ERR_STATE otherwise): after
 * KS_ERR_STORE_FULL, abort, grow, then redo the batch. */
int ks_store_env_grow(ks_store_env *env, uint64_t new_map_size);

/* One line describing the last error on env ("" when none), e.g.
 * "store 'counts' in DIR: LMDB map full (map_size 1048576 bytes); raise
 * `map_size` of the store in the pipeline YAML". Valid until the next
 * call on env. */
const char *ks_store_last_error(const ks_store_env *env);

/* End the read snapshot that get/range/count/checkpoint_get keep open
 * outside a write transaction, so the next read sees the latest commit.
 * Values borrowed from those reads become invalid. ks_store_begin,
 * ks_store_db_open and ks_store_env_grow end it too. */
void ks_store_read_end(ks_store_env *env);

/* Get (creating if missing) the named store `name` (1..200 bytes, not
 * "__meta"). The handle lives as long as env; asking twice for one name
 * returns the same handle. Must not be called while a write txn is open
 * (KS_ERR_STATE). More than max_stores stores: KS_ERR_INVALID. */
int ks_store_db_open(ks_store_env *env, const char *name, ks_store_db **out);

/* Begin the batch write transaction (idempotent when one is open). */
int ks_store_begin(ks_store_env *env);
/* Commit the batch. On KS_ERR_STORE_FULL or KS_ERR_IO the txn is gone and
 * nothing of it persisted. */
int ks_store_commit(ks_store_env *env);
/* Before the Kafka commit of the batch: check that LMDB's own commit will
 * find the pages it needs (32 KiB of each map are kept free for it), so
 * that a full map is found while the batch can still be aborted. 0 (also
 * with no txn open); KS_ERR_STORE_FULL marks the txn dead, like a failed
 * put (ks_store_last_error names the stores and the directory). */
int ks_store_prepare_commit(ks_store_env *env);
/* The error that killed the open batch txn (a put, delete, checkpoint or
 * prepare that failed, e.g. KS_ERR_STORE_FULL), with its message in *msg
 * (valid until the txn ends); 0 while the txn is alive or none is open. */
int ks_store_batch_error(const ks_store_env *env, const char **msg);
/* Abort the batch: every write since begin is undone. */
void ks_store_abort(ks_store_env *env);
/* Non-zero while a write transaction is open. */
int ks_store_in_txn(const ks_store_env *env);

/*
 * Data access. get/range read the open write txn when one is open (so a
 * batch sees its own writes), else a read txn. Values returned by get are
 * borrowed until the next write or the end of the txn.
 * put/del require an open write txn (KS_ERR_STATE otherwise).
 * Keys: 1..500 bytes (KS_ERR_TOO_LARGE over 500, KS_ERR_INVALID when
 * empty). KS_ERR_STORE_FULL when the map is full: the txn is then dead,
 * every later call on the env returns KS_ERR_STATE and commit returns
 * KS_ERR_STORE_FULL; abort it (ks_store_last_error says what to change).
 * Range bounds are 0..500 bytes; the scan must not write to `db`, nor
 * begin, commit or abort.
 */
int ks_store_get(ks_store_db *db, ks_bytes key, ks_bytes *value);
int ks_store_put(ks_store_db *db, ks_bytes key, ks_bytes value);
int ks_store_del(ks_store_db *db, ks_bytes key);
int ks_store_range(ks_store_db *db, ks_bytes from, ks_bytes to, ks_range_cb cb,
                   void *arg);
/* Delete every entry of `db` and its checkpoint in the open batch (the
 * state version stays): they go or stay with the batch. 0, KS_ERR_STATE
 * without a batch, or the write's ks_err. */
int ks_store_clear(ks_store_db *db);

/* Number of entries (reads committed + own txn). */
int ks_store_count(ks_store_db *db, uint64_t *count);

/* Checkpoint of a store: the next changelog offset to replay from.
 * get returns KS_ERR_NOT_FOUND when none was ever set. set needs an open
 * write txn and commits with it. */
int ks_store_checkpoint_get(ks_store_db *db, int64_t *offset);
int ks_store_checkpoint_set(ks_store_db *db, int64_t offset);

/* State version of a store: the ks_processor_type.state_version of the
 * format its data is in. get returns KS_ERR_NOT_FOUND when none was ever
 * set (a new store, or one written before versions were kept); set needs
 * an open write txn and commits with it, with the data it describes. */
int ks_store_version_get(ks_store_db *db, uint32_t *version);
int ks_store_version_set(ks_store_db *db, uint32_t version);

const char *ks_store_db_name(const ks_store_db *db);

/*
 * A read snapshot of `env` taken by a thread that is not the env's owner
 * (the query server reading a worker's task, store_snap.c): its own LMDB
 * read transaction, which the owner's batch never waits on and which sees
 * only committed data. While it is open, ks_store_env_grow and
 * ks_store_env_close of that env wait. A thread holds at most one
 * snapshot per env at a time (LMDB's rule without MDB_NOTLS).
 * begin: 0 and *out (end it with ks_store_snap_end), KS_ERR_NOMEM, or the
 * LMDB error as a ks_err. get/range: as ks_store_get/ks_store_range on
 * `db` (a handle of the same env), values borrowed until the end; errors
 * are returned, not kept in the env's last error (the owner's).
 * checkpoint: as ks_store_checkpoint_get, as of the snapshot (the
 * changelog offset its data reflects).
 */
typedef struct ks_store_snap ks_store_snap;
int ks_store_snap_begin(ks_store_env *env, ks_store_snap **out);
int ks_store_snap_get(ks_store_snap *s, ks_store_db *db, ks_bytes key, ks_bytes *value);
int ks_store_snap_range(ks_store_snap *s, ks_store_db *db, ks_bytes from, ks_bytes to,
                        ks_range_cb cb, void *arg);
int ks_store_snap_checkpoint(ks_store_snap *s, ks_store_db *db, int64_t *offset);
void ks_store_snap_end(ks_store_snap *s);

#endif /* KS_STORE_H */
