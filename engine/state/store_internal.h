/*
 * store_internal.h - what the files of the LMDB store share: the structs
 * behind store.h's handles and the helpers that keep the batch/snapshot
 * rules in one place. Only engine/state/store*.c include it (store.h is
 * the interface).
 *
 *   store.c        environments: the registry of open ones, open (flags,
 *                  __meta), close, wipe, grow
 *   store_txn.c    errors, the read snapshot, the batch write transaction
 *                  (begin, prepare_commit, commit, abort)
 *   store_db.c     named stores and their data: open, get, put, del,
 *                  range (cursors), count
 *   store_meta.c   "__meta": changelog checkpoints and state versions
 *
 * Errors: functions returning int return 0 or a negative ks_err, with
 * env->last_error set (ks_store_last_error). The helpers are defined with
 * a ks_store_ prefix; the short names below are what the code calls them.
 */
#ifndef KS_STORE_INTERNAL_H
#define KS_STORE_INTERNAL_H

#include <lmdb.h>
#include <pthread.h>
#include <stddef.h>

#include "state/store.h"

#define KS_STORE_MAX_NAME 200        /* store name; "ckpt:" + name is a key */
#define KS_STORE_MAX_STORES 4096     /* sanity bound on max_stores */
#define KS_STORE_READONLY_MAXDBS 1024 /* named DBs a read-only env can open */
#define KS_STORE_META "__meta"
#define KS_STORE_CKPT_PREFIX "ckpt:"
#define KS_STORE_VER_PREFIX "ver:"
#define KS_STORE_ERRLEN 512
/* Pages of each map kept free for LMDB's own commit (see
 * ks_store_prepare_commit): 32 KiB with 4 KiB pages. */
#define KS_STORE_COMMIT_RESERVE_PAGES 8

struct ks_store_db {
    ks_store_env *env;
    MDB_dbi dbi;
    char *name;
    char ckpt_key[sizeof(KS_STORE_CKPT_PREFIX) + KS_STORE_MAX_NAME];
    size_t ckpt_key_len;
    char ver_key[sizeof(KS_STORE_VER_PREFIX) + KS_STORE_MAX_NAME];
    size_t ver_key_len;
};

struct ks_store_env {
    MDB_env *mdb;
    char *dir;  /* as given, for messages */
    char *real; /* realpath: the registry key */
    int readonly;
    MDB_dbi meta;
    int have_meta; /* 0 only in a read-only env whose writer never ran */

    MDB_txn *wtxn;     /* the batch, or NULL */
    int dead;          /* wtxn failed (map full...): only abort helps */
    int dead_rc;       /* what commit of the dead txn returns */
    MDB_txn *rtxn;     /* cached read txn (reset when not active), or NULL */
    int rtxn_active;   /* rtxn holds a snapshot */
    unsigned scanning; /* ks_store_range calls in progress */
    /* read by snapshots of other threads (store_snap.c), written by
     * grow and close: LMDB remaps and frees only with no txn open */
    pthread_rwlock_t snaps;

    ks_store_db **dbs;
    size_t ndbs, dbcap;
    unsigned max_stores;

    char last_error[KS_STORE_ERRLEN];
    char dead_msg[KS_STORE_ERRLEN];
};

/* ------------------------------------------------------------------ */
/* store_txn.c                                                         */
/* ------------------------------------------------------------------ */

/* Map an LMDB or errno code to a ks_err. */
int ks_store_map_rc(int rc);
#define map_rc(rc) ks_store_map_rc(rc)

/* Format env->last_error. */
void ks_store_set_err(ks_store_env *env, const char *fmt, ...) KS_PRINTF(2, 3);
#define set_err(...) ks_store_set_err(__VA_ARGS__)

/* Record a failed write (put/del/checkpoint_set/commit; `db` NULL for the
 * whole environment): sets last_error, marks the open batch dead. Returns
 * the ks_err. */
int ks_store_write_failed(ks_store_env *env, ks_store_db *db, const char *what, int rc);
#define write_failed(env, db, what, rc) ks_store_write_failed(env, db, what, rc)

/* KS_ERR_STATE while the batch is dead, else 0. */
int ks_store_check_dead(ks_store_env *env);
#define check_dead(env) ks_store_check_dead(env)

/* Abort the cached read txn (the snapshot and its handle). */
void ks_store_rtxn_drop(ks_store_env *env);
#define rtxn_drop(env) ks_store_rtxn_drop(env)

/* End the snapshot but keep the txn handle for a cheap renew. */
void ks_store_rtxn_reset(ks_store_env *env);
#define rtxn_reset(env) ks_store_rtxn_reset(env)

/* The txn reads go through: the batch when open, else the cached snapshot
 * (started if needed). */
int ks_store_read_txn(ks_store_env *env, MDB_txn **txn);
#define read_txn(env, txn) ks_store_read_txn(env, txn)

/* ------------------------------------------------------------------ */
/* store_db.c                                                          */
/* ------------------------------------------------------------------ */

/* The cursor walk of ks_store_range in `txn`: cb for each key in [from,
 * to) (an empty bound is open). 0 or an LMDB code. */
int ks_store_range_in(MDB_txn *txn, MDB_dbi dbi, ks_bytes from, ks_bytes to, ks_range_cb cb,
                      void *arg);

/* ------------------------------------------------------------------ */
/* ------------------------------------------------------------------ */

/* Checks common to put/del/checkpoint_set/version_set: an open, live
 * batch, returned in *txn. */
int ks_store_write_txn(ks_store_db *db, MDB_txn **txn);
#define write_txn(db, txn) ks_store_write_txn(db, txn)

#endif
