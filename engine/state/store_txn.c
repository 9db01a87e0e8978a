/*
 * store_txn.c - the transactions of a store environment: errors (LMDB
 * codes to ks_err, the messages of failed writes, the dead batch), the
 * cached read snapshot, and the batch write transaction (begin,
 * prepare_commit with its page reserve, commit, abort).
 */
#include <errno.h>
#include <lmdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "state/store_internal.h"

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

/* Map an LMDB or errno code to a ks_err. */
int ks_store_map_rc(int rc)
{
    switch (rc) {
    case 0:
        return 0;
    case MDB_NOTFOUND:
    case ENOENT:
        return KS_ERR_NOT_FOUND;
    case MDB_MAP_FULL:
        return KS_ERR_STORE_FULL;
    case MDB_BAD_VALSIZE:
        return KS_ERR_TOO_LARGE;
    case MDB_DBS_FULL:
    case MDB_INCOMPATIBLE:
    case EINVAL:
        return KS_ERR_INVALID;
    case MDB_BAD_TXN:
    case MDB_BAD_RSLOT:
    case MDB_BAD_DBI:
        return KS_ERR_STATE;
    case ENOMEM:
        return KS_ERR_NOMEM;
    default: /* MDB_CORRUPTED, MDB_PANIC, MDB_INVALID, MDB_TXN_FULL,
                MDB_READERS_FULL, MDB_MAP_RESIZED, EIO, ENOSPC, EACCES... */
        return KS_ERR_IO;
    }
}

void ks_store_set_err(ks_store_env *env, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(env->last_error, sizeof env->last_error, fmt, ap);
    va_end(ap);
}

static unsigned long long env_map_size(ks_store_env *env)
{
    MDB_envinfo info;
    if (mdb_env_info(env->mdb, &info) != 0)
        return 0;
    return (unsigned long long)info.me_mapsize;
}

/* "store 'a'" or "stores 'a', 'b'": the stores of env, for messages about
 * the whole environment (commit). */
static void env_subject(const ks_store_env *env, char *out, size_t len)
{
    size_t n = (size_t)snprintf(out, len, "%s", env->ndbs == 1 ? "store" : "stores");
    for (size_t i = 0; i < env->ndbs && n < len; i++)
        n += (size_t)snprintf(out + n, len - n, "%s'%s'", i ? ", " : " ",
                              env->dbs[i]->name);
}

/*
 * Record a failed write (put/del/checkpoint_set/commit). `db` is NULL for
 * commit. LMDB marks the txn as failed after such an error, so ours is
 * dead too. Returns the ks_err.
 */
int ks_store_write_failed(ks_store_env *env, ks_store_db *db, const char *what,
                          int rc)
{
    int kerr = map_rc(rc);
    char subject[KS_STORE_ERRLEN / 2];
    if (db)
        snprintf(subject, sizeof subject, "store '%s'", db->name);
    else
        env_subject(env, subject, sizeof subject);
    if (rc == MDB_MAP_FULL)
        set_err(env,
                "%s in %s: LMDB map full (map_size %llu bytes); raise "
                "`map_size` of the store in the pipeline YAML",
                subject, env->dir, env_map_size(env));
    else if (rc == MDB_TXN_FULL)
        set_err(env,
                "%s in %s: %s: transaction too large (too many dirty pages); "
                "commit smaller batches",
                subject, env->dir, what);
    else if (rc == ENOSPC || rc == EIO) /* LMDB: a short write is EIO */
        set_err(env, "%s in %s: %s: %s (is its file system full?)", subject,
                env->dir, what, mdb_strerror(rc));
    else
        set_err(env, "%s in %s: %s: %s", subject, env->dir, what,
                mdb_strerror(rc));
    if (env->wtxn) { /* still ours to abort (commit frees it itself) */
        env->dead = 1;
        env->dead_rc = kerr == KS_ERR_NOT_FOUND ? KS_ERR_IO : kerr;
        memcpy(env->dead_msg, env->last_error, sizeof env->dead_msg);
    }
    return kerr;
}

/* KS_ERR_STATE while the batch is dead. */
int ks_store_check_dead(ks_store_env *env)
{
    if (!env->dead)
        return 0;
    set_err(env, "%s: the batch transaction failed earlier (%s); abort it",
            env->dir, env->dead_msg);
    return KS_ERR_STATE;
}

/* ------------------------------------------------------------------ */
/* Read path                                                           */
/* ------------------------------------------------------------------ */

void ks_store_rtxn_drop(ks_store_env *env)
{
    if (env->rtxn) {
        mdb_txn_abort(env->rtxn);
        env->rtxn = NULL;
    }
    env->rtxn_active = 0;
}

/* End the snapshot but keep the txn handle for a cheap renew. */
void ks_store_rtxn_reset(ks_store_env *env)
{
    if (env->rtxn && env->rtxn_active)
        mdb_txn_reset(env->rtxn);
    env->rtxn_active = 0;
}

/*
 * The txn reads go through: the batch when open, else the cached snapshot
 * (started if needed). Returns 0 or a ks_err with last_error set.
 */
int ks_store_read_txn(ks_store_env *env, MDB_txn **txn)
{
    int rc = check_dead(env);
    if (rc)
        return rc;
    if (env->wtxn) {
        *txn = env->wtxn;
        return 0;
    }
    if (env->rtxn_active) {
        *txn = env->rtxn;
        return 0;
    }
    for (int attempt = 0;; attempt++) {
        if (env->rtxn)
            rc = mdb_txn_renew(env->rtxn);
        else
            rc = mdb_txn_begin(env->mdb, NULL, MDB_RDONLY, &env->rtxn);
        /* Another process grew the map (read-only envs): adopt its size. */
        if (rc == MDB_MAP_RESIZED && attempt == 0) {
            rtxn_drop(env);
            rc = mdb_env_set_mapsize(env->mdb, 0);
            if (rc == 0)
                continue;
        }
        break;
    }
    if (rc) {
        rtxn_drop(env);
        set_err(env, "%s: cannot start a read transaction: %s", env->dir,
                mdb_strerror(rc));
        return map_rc(rc);
    }
    env->rtxn_active = 1;
    *txn = env->rtxn;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Transactions                                                        */
/* ------------------------------------------------------------------ */

int ks_store_begin(ks_store_env *env)
{
    if (!env)
        return KS_ERR_INVALID;
    int rc = check_dead(env);
    if (rc)
        return rc;
    if (env->wtxn)
        return 0;
    if (env->readonly) {
        set_err(env, "%s: read-only store environment", env->dir);
        return KS_ERR_STATE;
    }
    if (env->scanning) {
        set_err(env, "%s: begin inside a range scan", env->dir);
        return KS_ERR_STATE;
    }
    rtxn_reset(env);
    rc = mdb_txn_begin(env->mdb, NULL, 0, &env->wtxn);
    if (rc) {
        env->wtxn = NULL;
        set_err(env, "%s: cannot begin a write transaction: %s", env->dir,
                mdb_strerror(rc));
        return map_rc(rc);
    }
    return 0;
}

int ks_store_commit(ks_store_env *env)
{
    if (!env)
        return KS_ERR_INVALID;
    if (!env->wtxn) {
        set_err(env, "%s: commit without a transaction", env->dir);
        return KS_ERR_STATE;
    }
    if (env->scanning) {
        set_err(env, "%s: commit inside a range scan", env->dir);
        return KS_ERR_STATE;
    }
    if (env->dead) {
        int kerr = env->dead_rc;
        mdb_txn_abort(env->wtxn);
        env->wtxn = NULL;
        env->dead = 0;
        memcpy(env->last_error, env->dead_msg, sizeof env->last_error);
        return kerr;
    }
    MDB_txn *txn = env->wtxn;
    env->wtxn = NULL; /* mdb_txn_commit frees it, failed or not */
    int rc = mdb_txn_commit(txn);
    if (rc)
        return write_failed(env, NULL, "commit", rc);
    return 0;
}

/*
 * Before the Kafka commit: make sure that LMDB's own commit of this batch
 * will not run out of pages. mdb_txn_commit allocates a few pages itself
 * (the main database's records of the stores, the free list), and a map
 * that fills up there would fail the LMDB commit AFTER the Kafka
 * transaction has committed. So a nested transaction tries to take
 * KS_STORE_COMMIT_RESERVE_PAGES more (contiguous) pages and is aborted: if
 * it cannot, the map counts as full now, while the whole batch can still
 * be aborted. The nested transaction changes nothing in the batch (LMDB
 * discards it whole). The price: those pages of each map stay free. The
 * commit needs about 3 pages plus one per 500 pages the batch changed, so
 * a batch changing more than ~2500 pages (10 MiB) could still fill the map
 * inside the commit: the worker then stops as after a crash between the
 * Kafka and the LMDB commit, and the restart replays the batch from the
 * changelog.
 */
int ks_store_prepare_commit(ks_store_env *env)
{
    if (!env)
        return KS_ERR_INVALID;
    if (!env->wtxn)
        return 0;
    if (env->dead) {
        memcpy(env->last_error, env->dead_msg, sizeof env->last_error);
        return env->dead_rc;
    }
    if (env->scanning) {
        set_err(env, "%s: commit inside a range scan", env->dir);
        return KS_ERR_STATE;
    }
    static const char key[] = "~commit-reserve"; /* never committed */
    MDB_stat est;
    int rc = mdb_env_stat(env->mdb, &est);
    size_t psize = rc == 0 ? est.ms_psize : 4096;
    MDB_txn *probe = NULL;
    rc = mdb_txn_begin(env->mdb, env->wtxn, 0, &probe);
    if (rc == 0) {
        /* a value of N-1 pages takes N overflow pages (page header) */
        MDB_val k = {sizeof key - 1, (void *)key};
        MDB_val v = {(KS_STORE_COMMIT_RESERVE_PAGES - 1) * psize, NULL};
        rc = mdb_put(probe, env->meta, &k, &v, MDB_RESERVE);
        mdb_txn_abort(probe);
    }
    if (rc == MDB_MAP_FULL) {
        char subject[KS_STORE_ERRLEN / 2];
        env_subject(env, subject, sizeof subject);
        set_err(env,
                "%s in %s: LMDB map full (map_size %llu bytes, of which %zu are "
                "kept free for LMDB's commit); raise `map_size` of the store in "
                "the pipeline YAML",
                subject, env->dir, env_map_size(env),
                KS_STORE_COMMIT_RESERVE_PAGES * psize);
        env->dead = 1;
        env->dead_rc = KS_ERR_STORE_FULL;
        memcpy(env->dead_msg, env->last_error, sizeof env->dead_msg);
        return KS_ERR_STORE_FULL;
    }
    if (rc)
        return write_failed(env, NULL, "commit reserve", rc);
    return 0;
}

int ks_store_batch_error(const ks_store_env *env, const char **msg)
{
    if (!env || !env->dead)
        return 0;
    if (msg)
        *msg = env->dead_msg;
    return env->dead_rc;
}

void ks_store_abort(ks_store_env *env)
{
    if (!env || !env->wtxn)
        return;
    if (env->scanning) { /* the scan's cursor lives in this txn */
        set_err(env, "%s: abort inside a range scan ignored", env->dir);
        return;
    }
    mdb_txn_abort(env->wtxn);
    env->wtxn = NULL;
    env->dead = 0;
}

int ks_store_in_txn(const ks_store_env *env)
{
    return env && env->wtxn != NULL;
}
