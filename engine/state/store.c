/*
 * store.c - host-owned LMDB state of one task (see store.h, docs/stores.md):
 * the environments (the registry of open ones, open, close, wipe, grow).
 * Transactions, stores and __meta are in store_txn.c, store_db.c and
 * store_meta.c (store_internal.h).
 *
 * Layout of one environment (one directory, one task):
 *   main DB      LMDB's own table of named databases
 *   "__meta"     "ckpt:<store>" -> changelog offset, int64 big-endian
 *                "ver:<store>"  -> state version, uint32 big-endian
 *   "<store>"    one named database per store, keys in byte order
 *
 * Transactions: at most one write transaction (the batch) per env, owned by
 * the thread that began it. Outside it, reads use one cached read
 * transaction (the "snapshot") that stays open so borrowed values stay
 * valid; it ends at ks_store_begin, ks_store_read_end, db_open, grow and
 * close.
 *
 * Flags and durability: MDB_NOMETASYNC. Data pages are still fsync'ed at
 * each commit, only the meta page write is not flushed at once (it is at
 * the next commit). A process crash (SIGKILL, abort) loses nothing: the
 * pages are in the OS page cache. An OS crash or power loss may undo the
 * LAST committed transaction, but never corrupts the file; since data and
 * checkpoint commit together, the store then simply sits at the previous
 * checkpoint and the changelog, which is the durability backstop, replays
 * the rest. MDB_NOSYNC would be faster but can corrupt after an OS crash.
 * No MDB_NOTLS: write transactions are thread-bound anyway, and the cached
 * read transaction is only used by the thread owning the env.
 */
#include "state/store.h"
#include "base/fs.h"
#include "base/log.h"

#include <errno.h>
#include <lmdb.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "state/store_internal.h"

/* ------------------------------------------------------------------ */
/* The registry of open environments                                   */
/* ------------------------------------------------------------------ */

/*
 * The one process-wide state of this module: the directories (realpath)
 * of the environments open in this process. LMDB's advisory locks are per
 * process, so opening one environment twice in a process breaks them
 * (LMDB 0.9.24); the registry refuses it. Each entry records the pid
 * that opened it, so that a child made by fork() (which must not use its
 * parent's environments, but may open its own) is not refused because of
 * entries it inherited.
 */
typedef struct ks_reg_entry {
    char *path;
    pid_t pid;
    struct ks_reg_entry *next;
} ks_reg_entry;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static ks_reg_entry *reg_head;

/* With reg_lock held. */
static int reg_has(const char *real)
{
    pid_t me = getpid();
    for (ks_reg_entry *e = reg_head; e; e = e->next)
        if (e->pid == me && strcmp(e->path, real) == 0)
            return 1;
    return 0;
}

/* 0, KS_ERR_STATE when already there, KS_ERR_NOMEM. */
static int reg_add(const char *real)
{
    int rc = 0;
    pthread_mutex_lock(&reg_lock);
    if (reg_has(real)) {
        rc = KS_ERR_STATE;
    } else {
        ks_reg_entry *e = malloc(sizeof *e);
        char *p = strdup(real);
        if (!e || !p) {
            free(e);
            free(p);
            rc = KS_ERR_NOMEM;
        } else {
            e->path = p;
            e->pid = getpid();
            e->next = reg_head;
            reg_head = e;
        }
    }
    pthread_mutex_unlock(&reg_lock);
    return rc;
}

static void reg_remove(const char *real)
{
    pid_t me = getpid();
    pthread_mutex_lock(&reg_lock);
    for (ks_reg_entry **pp = &reg_head; *pp; pp = &(*pp)->next) {
        ks_reg_entry *e = *pp;
        if (e->pid == me && strcmp(e->path, real) == 0) {
            *pp = e->next;
            free(e->path);
            free(e);
            break;
        }
    }
    pthread_mutex_unlock(&reg_lock);
}

/* ------------------------------------------------------------------ */
/* Environments                                                        */
/* ------------------------------------------------------------------ */

static void env_free(ks_store_env *env)
{
    if (!env)
        return;
    for (size_t i = 0; i < env->ndbs; i++) {
        free(env->dbs[i]->name);
        free(env->dbs[i]);
    }
    free(env->dbs);
    free(env->dir);
    free(env->real);
    pthread_rwlock_destroy(&env->snaps);
    free(env);
}

/* 0 when DIR/data.mdb exists, else the errno of looking for it. */
static int data_file_errno(const char *real)
{
    size_t n = strlen(real) + sizeof "/data.mdb";
    char *data = malloc(n);
    int e = ENOMEM;
    if (data) {
        snprintf(data, n, "%s/data.mdb", real);
        e = access(data, F_OK) == 0 ? 0 : errno;
        free(data);
    }
    return e;
}

/* The LMDB side of env_open: create, size, open `dir` and the __meta
 * database into env (readonly, max_stores already set). Returns 0 or the
 * LMDB code, with *step naming the call that failed. */
static int env_lmdb_open(ks_store_env *env, const char *dir, uint64_t map_size,
                         const char **step)
{
    int readonly = env->readonly;
    *step = "mdb_env_create";
    int rc = mdb_env_create(&env->mdb);
    if (rc == 0) {
        *step = "mdb_env_set_maxdbs";
        rc = mdb_env_set_maxdbs(env->mdb, (MDB_dbi)env->max_stores + 1);
    }
    if (rc == 0 && !readonly) {
        *step = "mdb_env_set_mapsize";
        rc = mdb_env_set_mapsize(env->mdb, (size_t)map_size);
    }
    if (rc == 0) {
        *step = "mdb_env_open";
        /* See the top of this file for MDB_NOMETASYNC. A read-only env
         * takes the map size the writer recorded in the file. */
        unsigned flags = readonly ? MDB_RDONLY : MDB_NOMETASYNC;
        rc = mdb_env_open(env->mdb, dir, flags, 0644);
    }
    if (rc == 0) {
        int dead = 0;
        *step = "mdb_reader_check"; /* frees slots of killed processes */
        rc = mdb_reader_check(env->mdb, &dead);
    }
    if (rc == 0) {
        /* The __meta database: created by the writer, optional for a
         * reader of an env that never committed. */
        MDB_txn *txn = NULL;
        *step = "opening " KS_STORE_META;
        rc = mdb_txn_begin(env->mdb, NULL, readonly ? MDB_RDONLY : 0, &txn);
        if (rc == 0) {
            rc = mdb_dbi_open(txn, KS_STORE_META, readonly ? 0 : MDB_CREATE,
                              &env->meta);
            if (rc == 0) {
                env->have_meta = 1;
                rc = mdb_txn_commit(txn);
            } else {
                mdb_txn_abort(txn);
                if (rc == MDB_NOTFOUND && readonly)
                    rc = 0;
            }
        }
    }
    return rc;
}

static int env_open(const char *dir, int readonly, uint64_t map_size,
                    unsigned max_stores, ks_store_env **out, char *err,
                    size_t errlen)
{
    if (out)
        *out = NULL;
    if (!dir || !*dir || !out) {
        ks_errf(err, errlen, "%s: invalid arguments", dir ? dir : "(null)");
        return KS_ERR_INVALID;
    }
    if (!readonly && (map_size == 0 || map_size > (uint64_t)SIZE_MAX)) {
        ks_errf(err, errlen, "%s: invalid map_size %llu", dir,
                (unsigned long long)map_size);
        return KS_ERR_INVALID;
    }
    if (!readonly && max_stores > KS_STORE_MAX_STORES) {
        ks_errf(err, errlen, "%s: max_stores %u over the limit %d", dir,
                max_stores, KS_STORE_MAX_STORES);
        return KS_ERR_INVALID;
    }
    if (!readonly && ks_mkdir_p(dir, 0755) != 0) {
        int e = errno;
        ks_errf(err, errlen, "%s: cannot create the directory: %s", dir,
                strerror(e));
        return map_rc(e);
    }

    ks_store_env *env = calloc(1, sizeof *env);
    if (env)
        pthread_rwlock_init(&env->snaps, NULL);
    if (!env || !(env->dir = strdup(dir))) {
        if (env)
            pthread_rwlock_destroy(&env->snaps);
        free(env);
        ks_errf(err, errlen, "%s: out of memory", dir);
        return KS_ERR_NOMEM;
    }
    env->readonly = readonly;
    env->max_stores = readonly ? KS_STORE_READONLY_MAXDBS - 1 : max_stores;
    env->real = realpath(dir, NULL);
    if (!env->real) {
        int e = errno;
        ks_errf(err, errlen, "%s: %s", dir,
                e == ENOENT ? "no store environment here" : strerror(e));
        env_free(env);
        return map_rc(e);
    }
    if (readonly) {
        /* Check first: LMDB would create lock.mdb before failing. */
        int e = data_file_errno(env->real);
        if (e) {
            ks_errf(err, errlen, "%s: %s", dir,
                    e == ENOENT ? "no store environment here" : strerror(e));
            env_free(env);
            return map_rc(e);
        }
    }
    int krc = reg_add(env->real);
    if (krc) {
        if (krc == KS_ERR_STATE)
            ks_errf(err, errlen,
                    "%s: store environment already open in this process",
                    dir);
        else
            ks_errf(err, errlen, "%s: out of memory", dir);
        env_free(env);
        return krc;
    }

    const char *step;
    int rc = env_lmdb_open(env, dir, map_size, &step);
    if (rc != 0) {
        ks_errf(err, errlen, "%s: %s: %s", dir, step, mdb_strerror(rc));
        if (env->mdb)
            mdb_env_close(env->mdb);
        reg_remove(env->real);
        env_free(env);
        return map_rc(rc);
    }
    *out = env;
    return 0;
}

int ks_store_env_open(const char *dir, uint64_t map_size, unsigned max_stores,
                      ks_store_env **out, char *err, size_t errlen)
{
    return env_open(dir, 0, map_size, max_stores, out, err, errlen);
}

int ks_store_env_open_readonly(const char *dir, ks_store_env **out, char *err,
                               size_t errlen)
{
    return env_open(dir, 1, 0, 0, out, err, errlen);
}

void ks_store_env_close(ks_store_env *env)
{
    if (!env)
        return;
    if (env->wtxn)
        mdb_txn_abort(env->wtxn);
    env->wtxn = NULL;
    rtxn_drop(env);
    pthread_rwlock_wrlock(&env->snaps); /* a snapshot of another thread ends first */
    mdb_env_close(env->mdb);
    pthread_rwlock_unlock(&env->snaps);
    reg_remove(env->real);
    env_free(env);
}

/* unlink(dir/name); ENOENT is fine. */
static int unlink_in(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (!p)
        return KS_ERR_NOMEM;
    snprintf(p, n, "%s/%s", dir, name);
    int rc = unlink(p) == 0 || errno == ENOENT ? 0 : KS_ERR_IO;
    free(p);
    return rc;
}

int ks_store_env_wipe(const char *dir)
{
    if (!dir || !*dir)
        return KS_ERR_INVALID;
    char *real = realpath(dir, NULL);
    if (!real)
        return errno == ENOENT ? 0 : KS_ERR_IO;
    int rc = 0;
    /* Held throughout so that no thread opens it while we delete. */
    pthread_mutex_lock(&reg_lock);
    if (reg_has(real)) {
        rc = KS_ERR_STATE;
    } else {
        rc = unlink_in(real, "data.mdb");
        if (rc == 0)
            rc = unlink_in(real, "lock.mdb");
        /* A directory holding anything else is left in place. */
        if (rc == 0 && rmdir(real) != 0 && errno != ENOENT &&
            errno != ENOTEMPTY && errno != EEXIST)
            rc = KS_ERR_IO;
    }
    pthread_mutex_unlock(&reg_lock);
    free(real);
    return rc;
}

int ks_store_env_grow(ks_store_env *env, uint64_t new_map_size)
{
    if (!env)
        return KS_ERR_INVALID;
    if (env->wtxn || env->scanning) {
        set_err(env, "%s: cannot grow the map while a transaction is open",
                env->dir);
        return KS_ERR_STATE;
    }
    if (env->readonly) {
        set_err(env, "%s: cannot grow a read-only environment", env->dir);
        return KS_ERR_STATE;
    }
    if (new_map_size == 0 || new_map_size > (uint64_t)SIZE_MAX) {
        set_err(env, "%s: invalid map_size %llu", env->dir,
                (unsigned long long)new_map_size);
        return KS_ERR_INVALID;
    }
    /* LMDB remaps: no read txn may be open either (ours is the only one). */
    rtxn_drop(env);
    pthread_rwlock_wrlock(&env->snaps); /* nor one of another thread */
    int rc = mdb_env_set_mapsize(env->mdb, (size_t)new_map_size);
    pthread_rwlock_unlock(&env->snaps);
    if (rc) {
        set_err(env, "%s: cannot set map_size %llu: %s", env->dir,
                (unsigned long long)new_map_size, mdb_strerror(rc));
        return map_rc(rc);
    }
    return 0;
}

const char *ks_store_last_error(const ks_store_env *env)
{
    return env ? env->last_error : "no store environment";
}

void ks_store_read_end(ks_store_env *env)
{
    if (env && !env->scanning)
        rtxn_reset(env);
}
