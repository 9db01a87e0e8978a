/*
 * store.c - host-owned LMDB state of one task (see store.h, docs/stores.md).
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

#include <errno.h>
#include <lmdb.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

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

    ks_store_db **dbs;
    size_t ndbs, dbcap;
    unsigned max_stores;

    char last_error[KS_STORE_ERRLEN];
    char dead_msg[KS_STORE_ERRLEN];
};

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
/* Errors                                                              */
/* ------------------------------------------------------------------ */

/* Map an LMDB or errno code to a ks_err. */
static int map_rc(int rc)
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

static void set_err(ks_store_env *env, const char *fmt, ...) KS_PRINTF(2, 3);
static void set_err(ks_store_env *env, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(env->last_error, sizeof env->last_error, fmt, ap);
    va_end(ap);
}

static void put_err(char *err, size_t errlen, const char *fmt, ...)
    KS_PRINTF(3, 4);
static void put_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
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
static int write_failed(ks_store_env *env, ks_store_db *db, const char *what,
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
static int check_dead(ks_store_env *env)
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

static void rtxn_drop(ks_store_env *env)
{
    if (env->rtxn) {
        mdb_txn_abort(env->rtxn);
        env->rtxn = NULL;
    }
    env->rtxn_active = 0;
}

/* End the snapshot but keep the txn handle for a cheap renew. */
static void rtxn_reset(ks_store_env *env)
{
    if (env->rtxn && env->rtxn_active)
        mdb_txn_reset(env->rtxn);
    env->rtxn_active = 0;
}

/*
 * The txn reads go through: the batch when open, else the cached snapshot
 * (started if needed). Returns 0 or a ks_err with last_error set.
 */
static int read_txn(ks_store_env *env, MDB_txn **txn)
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
    free(env);
}

static int env_open(const char *dir, int readonly, uint64_t map_size,
                    unsigned max_stores, ks_store_env **out, char *err,
                    size_t errlen)
{
    if (out)
        *out = NULL;
    if (!dir || !*dir || !out) {
        put_err(err, errlen, "%s: invalid arguments", dir ? dir : "(null)");
        return KS_ERR_INVALID;
    }
    if (!readonly && (map_size == 0 || map_size > (uint64_t)SIZE_MAX)) {
        put_err(err, errlen, "%s: invalid map_size %llu", dir,
                (unsigned long long)map_size);
        return KS_ERR_INVALID;
    }
    if (!readonly && max_stores > KS_STORE_MAX_STORES) {
        put_err(err, errlen, "%s: max_stores %u over the limit %d", dir,
                max_stores, KS_STORE_MAX_STORES);
        return KS_ERR_INVALID;
    }
    if (!readonly && ks_mkdir_p(dir, 0755) != 0) {
        int e = errno;
        put_err(err, errlen, "%s: cannot create the directory: %s", dir,
                strerror(e));
        return map_rc(e);
    }

    ks_store_env *env = calloc(1, sizeof *env);
    if (!env || !(env->dir = strdup(dir))) {
        free(env);
        put_err(err, errlen, "%s: out of memory", dir);
        return KS_ERR_NOMEM;
    }
    env->readonly = readonly;
    env->max_stores = readonly ? KS_STORE_READONLY_MAXDBS - 1 : max_stores;
    env->real = realpath(dir, NULL);
    if (!env->real) {
        int e = errno;
        put_err(err, errlen, "%s: %s", dir,
                e == ENOENT ? "no store environment here" : strerror(e));
        env_free(env);
        return map_rc(e);
    }
    if (readonly) {
        /* Check first: LMDB would create lock.mdb before failing. */
        size_t n = strlen(env->real) + sizeof "/data.mdb";
        char *data = malloc(n);
        int e = ENOMEM;
        if (data) {
            snprintf(data, n, "%s/data.mdb", env->real);
            e = access(data, F_OK) == 0 ? 0 : errno;
            free(data);
        }
        if (e) {
            put_err(err, errlen, "%s: %s", dir,
                    e == ENOENT ? "no store environment here" : strerror(e));
            env_free(env);
            return map_rc(e);
        }
    }
    int krc = reg_add(env->real);
    if (krc) {
        if (krc == KS_ERR_STATE)
            put_err(err, errlen,
                    "%s: store environment already open in this process",
                    dir);
        else
            put_err(err, errlen, "%s: out of memory", dir);
        env_free(env);
        return krc;
    }

    const char *step = "mdb_env_create";
    int rc = mdb_env_create(&env->mdb);
    if (rc == 0) {
        step = "mdb_env_set_maxdbs";
        rc = mdb_env_set_maxdbs(env->mdb, (MDB_dbi)env->max_stores + 1);
    }
    if (rc == 0 && !readonly) {
        step = "mdb_env_set_mapsize";
        rc = mdb_env_set_mapsize(env->mdb, (size_t)map_size);
    }
    if (rc == 0) {
        step = "mdb_env_open";
        /* See the top of this file for MDB_NOMETASYNC. A read-only env
         * takes the map size the writer recorded in the file. */
        unsigned flags = readonly ? MDB_RDONLY : MDB_NOMETASYNC;
        rc = mdb_env_open(env->mdb, dir, flags, 0644);
    }
    if (rc == 0) {
        int dead = 0;
        step = "mdb_reader_check"; /* frees slots of killed processes */
        rc = mdb_reader_check(env->mdb, &dead);
    }
    if (rc == 0) {
        /* The __meta database: created by the writer, optional for a
         * reader of an env that never committed. */
        MDB_txn *txn = NULL;
        step = "opening " KS_STORE_META;
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
    if (rc != 0) {
        put_err(err, errlen, "%s: %s: %s", dir, step, mdb_strerror(rc));
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
    mdb_env_close(env->mdb);
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
    int rc = mdb_env_set_mapsize(env->mdb, (size_t)new_map_size);
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

/* ------------------------------------------------------------------ */
/* Stores                                                              */
/* ------------------------------------------------------------------ */

int ks_store_db_open(ks_store_env *env, const char *name, ks_store_db **out)
{
    if (!env || !name || !out)
        return KS_ERR_INVALID;
    *out = NULL;
    size_t len = strlen(name);
    if (len == 0 || len > KS_STORE_MAX_NAME || strcmp(name, KS_STORE_META) == 0) {
        set_err(env, "%s: invalid store name '%s'", env->dir, name);
        return KS_ERR_INVALID;
    }
    for (size_t i = 0; i < env->ndbs; i++)
        if (strcmp(env->dbs[i]->name, name) == 0) {
            *out = env->dbs[i];
            return 0;
        }
    if (env->wtxn || env->scanning) {
        set_err(env, "%s: store '%s' opened inside a transaction", env->dir,
                name);
        return KS_ERR_STATE;
    }
    if (env->ndbs >= env->max_stores) {
        set_err(env, "%s: store '%s': too many stores (max_stores %u)",
                env->dir, name, env->max_stores);
        return KS_ERR_INVALID;
    }
    if (env->ndbs == env->dbcap) {
        size_t cap = env->dbcap ? env->dbcap * 2 : 8;
        ks_store_db **d = realloc(env->dbs, cap * sizeof *d);
        if (!d)
            return KS_ERR_NOMEM;
        env->dbs = d;
        env->dbcap = cap;
    }
    ks_store_db *db = calloc(1, sizeof *db);
    if (!db || !(db->name = strdup(name))) {
        free(db);
        return KS_ERR_NOMEM;
    }
    db->env = env;
    db->ckpt_key_len = (size_t)snprintf(db->ckpt_key, sizeof db->ckpt_key,
                                        KS_STORE_CKPT_PREFIX "%s", name);
    db->ver_key_len = (size_t)snprintf(db->ver_key, sizeof db->ver_key,
                                       KS_STORE_VER_PREFIX "%s", name);

    /* A handle opened in a txn is usable by others once that txn commits;
     * a separate txn does it (the read snapshot ends: one read txn per
     * thread and env). */
    rtxn_drop(env);
    MDB_txn *txn = NULL;
    int rc = mdb_txn_begin(env->mdb, NULL, env->readonly ? MDB_RDONLY : 0,
                           &txn);
    if (rc == 0) {
        rc = mdb_dbi_open(txn, name, env->readonly ? 0 : MDB_CREATE,
                          &db->dbi);
        if (rc == 0)
            rc = mdb_txn_commit(txn);
        else
            mdb_txn_abort(txn);
    }
    if (rc) {
        if (rc == MDB_NOTFOUND)
            set_err(env, "%s: no store '%s'", env->dir, name);
        else
            set_err(env, "%s: cannot open store '%s': %s", env->dir, name,
                    mdb_strerror(rc));
        free(db->name);
        free(db);
        return map_rc(rc);
    }
    env->dbs[env->ndbs++] = db;
    *out = db;
    return 0;
}

const char *ks_store_db_name(const ks_store_db *db)
{
    return db ? db->name : NULL;
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

/* ------------------------------------------------------------------ */
/* Data                                                                */
/* ------------------------------------------------------------------ */

static int check_key(ks_store_db *db, ks_bytes key)
{
    if (key.len == 0 || !key.data) {
        set_err(db->env, "store '%s' in %s: empty key", db->name,
                db->env->dir);
        return KS_ERR_INVALID;
    }
    if (key.len > KS_KEY_MAX) {
        set_err(db->env, "store '%s' in %s: key of %zu bytes (max %d)",
                db->name, db->env->dir, key.len, KS_KEY_MAX);
        return KS_ERR_TOO_LARGE;
    }
    return 0;
}

/* Checks common to put/del/checkpoint_set: an open, live batch. */
static int write_txn(ks_store_db *db, MDB_txn **txn)
{
    ks_store_env *env = db->env;
    int rc = check_dead(env);
    if (rc)
        return rc;
    if (!env->wtxn) {
        set_err(env, "store '%s' in %s: write outside a transaction",
                db->name, env->dir);
        return KS_ERR_STATE;
    }
    *txn = env->wtxn;
    return 0;
}

int ks_store_get(ks_store_db *db, ks_bytes key, ks_bytes *value)
{
    if (!db || !value)
        return KS_ERR_INVALID;
    int rc = check_key(db, key);
    MDB_txn *txn;
    if (rc || (rc = read_txn(db->env, &txn)))
        return rc;
    MDB_val k = {key.len, (void *)key.data}, v;
    rc = mdb_get(txn, db->dbi, &k, &v);
    if (rc == MDB_NOTFOUND)
        return KS_ERR_NOT_FOUND;
    if (rc) {
        set_err(db->env, "store '%s' in %s: get: %s", db->name, db->env->dir,
                mdb_strerror(rc));
        return map_rc(rc);
    }
    value->data = v.mv_data;
    value->len = v.mv_size;
    return 0;
}

int ks_store_put(ks_store_db *db, ks_bytes key, ks_bytes value)
{
    if (!db)
        return KS_ERR_INVALID;
    int rc = check_key(db, key);
    if (rc)
        return rc;
    if (value.len && !value.data) {
        set_err(db->env, "store '%s' in %s: NULL value", db->name,
                db->env->dir);
        return KS_ERR_INVALID;
    }
    if (value.len > 0xffffffffu) { /* LMDB's MAXDATASIZE */
        set_err(db->env, "store '%s' in %s: value of %zu bytes (max 4 GiB)",
                db->name, db->env->dir, value.len);
        return KS_ERR_TOO_LARGE;
    }
    MDB_txn *txn;
    if ((rc = write_txn(db, &txn)))
        return rc;
    MDB_val k = {key.len, (void *)key.data};
    MDB_val v = {value.len, (void *)value.data};
    rc = mdb_put(txn, db->dbi, &k, &v, 0);
    if (rc)
        return write_failed(db->env, db, "put", rc);
    return 0;
}

int ks_store_del(ks_store_db *db, ks_bytes key)
{
    if (!db)
        return KS_ERR_INVALID;
    int rc = check_key(db, key);
    MDB_txn *txn;
    if (rc || (rc = write_txn(db, &txn)))
        return rc;
    MDB_val k = {key.len, (void *)key.data};
    rc = mdb_del(txn, db->dbi, &k, NULL);
    if (rc == MDB_NOTFOUND)
        return 0;
    if (rc)
        return write_failed(db->env, db, "delete", rc);
    return 0;
}

int ks_store_range(ks_store_db *db, ks_bytes from, ks_bytes to, ks_range_cb cb,
                   void *arg)
{
    if (!db || !cb || (from.len && !from.data) || (to.len && !to.data))
        return KS_ERR_INVALID;
    ks_store_env *env = db->env;
    if (from.len > KS_KEY_MAX || to.len > KS_KEY_MAX) {
        set_err(env, "store '%s' in %s: range bound over %d bytes", db->name,
                env->dir, KS_KEY_MAX);
        return KS_ERR_TOO_LARGE;
    }
    MDB_txn *txn;
    int rc = read_txn(env, &txn);
    if (rc)
        return rc;
    MDB_val lo = {from.len, (void *)from.data};
    MDB_val hi = {to.len, (void *)to.data};
    if (from.len && to.len && mdb_cmp(txn, db->dbi, &lo, &hi) >= 0)
        return 0; /* empty interval */

    MDB_cursor *cur;
    rc = mdb_cursor_open(txn, db->dbi, &cur);
    if (rc) {
        set_err(env, "store '%s' in %s: range: %s", db->name, env->dir,
                mdb_strerror(rc));
        return map_rc(rc);
    }
    env->scanning++;
    MDB_val k = lo, v;
    rc = mdb_cursor_get(cur, &k, &v, from.len ? MDB_SET_RANGE : MDB_FIRST);
    while (rc == 0) {
        if (to.len && mdb_cmp(txn, db->dbi, &k, &hi) >= 0)
            break;
        ks_bytes kb = {k.mv_data, k.mv_size}, vb = {v.mv_data, v.mv_size};
        if (cb(arg, kb, vb) != 0)
            break;
        rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    env->scanning--;
    mdb_cursor_close(cur);
    if (rc != 0 && rc != MDB_NOTFOUND) {
        set_err(env, "store '%s' in %s: range: %s", db->name, env->dir,
                mdb_strerror(rc));
        return map_rc(rc);
    }
    return 0;
}

int ks_store_count(ks_store_db *db, uint64_t *count)
{
    if (!db || !count)
        return KS_ERR_INVALID;
    MDB_txn *txn;
    int rc = read_txn(db->env, &txn);
    if (rc)
        return rc;
    MDB_stat st;
    rc = mdb_stat(txn, db->dbi, &st);
    if (rc) {
        set_err(db->env, "store '%s' in %s: count: %s", db->name,
                db->env->dir, mdb_strerror(rc));
        return map_rc(rc);
    }
    *count = (uint64_t)st.ms_entries;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Checkpoints                                                         */
/* ------------------------------------------------------------------ */

/* Read the `size`-byte meta value of `db` under `key` (a checkpoint, a
 * state version) into out; `what` names it in errors. */
static int meta_get(ks_store_db *db, const void *key, size_t key_len, const char *what,
                    size_t size, void *out)
{
    ks_store_env *env = db->env;
    MDB_txn *txn;
    int rc = read_txn(env, &txn);
    if (rc)
        return rc;
    if (!env->have_meta)
        return KS_ERR_NOT_FOUND;
    MDB_val k = {key_len, (void *)key}, v;
    rc = mdb_get(txn, env->meta, &k, &v);
    if (rc == MDB_NOTFOUND)
        return KS_ERR_NOT_FOUND;
    if (rc) {
        set_err(env, "store '%s' in %s: %s: %s", db->name, env->dir, what, mdb_strerror(rc));
        return map_rc(rc);
    }
    if (v.mv_size != size) {
        set_err(env, "store '%s' in %s: corrupt %s (%zu bytes)", db->name, env->dir, what,
                v.mv_size);
        return KS_ERR_IO;
    }
    memcpy(out, v.mv_data, size);
    return 0;
}

int ks_store_checkpoint_get(ks_store_db *db, int64_t *offset)
{
    if (!db || !offset)
        return KS_ERR_INVALID;
    unsigned char b[8];
    int rc = meta_get(db, db->ckpt_key, db->ckpt_key_len, "checkpoint", sizeof b, b);
    if (rc == 0)
        *offset = ks_int64_decode(b);
    return rc;
}

int ks_store_checkpoint_set(ks_store_db *db, int64_t offset)
{
    if (!db)
        return KS_ERR_INVALID;
    MDB_txn *txn;
    int rc = write_txn(db, &txn);
    if (rc)
        return rc;
    unsigned char buf[8];
    ks_int64_encode(offset, buf);
    MDB_val k = {db->ckpt_key_len, db->ckpt_key}, v = {sizeof buf, buf};
    rc = mdb_put(txn, db->env->meta, &k, &v, 0);
    if (rc)
        return write_failed(db->env, db, "checkpoint", rc);
    return 0;
}

/* ------------------------------------------------------------------ */
/* State versions                                                      */
/* ------------------------------------------------------------------ */

int ks_store_version_get(ks_store_db *db, uint32_t *version)
{
    if (!db || !version)
        return KS_ERR_INVALID;
    unsigned char b[4];
    int rc = meta_get(db, db->ver_key, db->ver_key_len, "state version", sizeof b, b);
    if (rc == 0)
        *version = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
    return rc;
}

int ks_store_version_set(ks_store_db *db, uint32_t version)
{
    if (!db)
        return KS_ERR_INVALID;
    MDB_txn *txn;
    int rc = write_txn(db, &txn);
    if (rc)
        return rc;
    unsigned char buf[4] = {(unsigned char)(version >> 24), (unsigned char)(version >> 16),
                            (unsigned char)(version >> 8), (unsigned char)version};
    MDB_val k = {db->ver_key_len, db->ver_key}, v = {sizeof buf, buf};
    rc = mdb_put(txn, db->env->meta, &k, &v, 0);
    if (rc)
        return write_failed(db->env, db, "state version", rc);
    return 0;
}
