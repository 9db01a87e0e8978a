/*
 * store_db.c - the named stores of an environment and their data: open
 * (one LMDB named database per store), get, put, del, range (a cursor
 * between two bounds) and count. Keys are checked here (KS_KEY_MAX).
 */
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/store_internal.h"
#include "base/grow.h"

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
    ks_store_db **grown = ks_grow(env->dbs, &env->dbcap, env->ndbs, sizeof *grown, 8);
    if (!grown)
        return KS_ERR_NOMEM;
    env->dbs = grown;
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
int ks_store_write_txn(ks_store_db *db, MDB_txn **txn)
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

int ks_store_clear(ks_store_db *db)
{
    if (!db)
        return KS_ERR_INVALID;
    MDB_txn *txn;
    int rc = write_txn(db, &txn);
    if (rc)
        return rc;
    rc = mdb_drop(txn, db->dbi, 0); /* 0: empty it, keep the handle */
    if (rc)
        return write_failed(db->env, db, "clear", rc);
    MDB_val k = {db->ckpt_key_len, db->ckpt_key};
    rc = mdb_del(txn, db->env->meta, &k, NULL);
    if (rc && rc != MDB_NOTFOUND)
        return write_failed(db->env, db, "clear the checkpoint", rc);
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
    env->scanning++;
    rc = ks_store_range_in(txn, db->dbi, from, to, cb, arg);
    env->scanning--;
    if (rc != 0) {
        set_err(env, "store '%s' in %s: range: %s", db->name, env->dir,
                mdb_strerror(rc));
        return map_rc(rc);
    }
    return 0;
}

int ks_store_range_in(MDB_txn *txn, MDB_dbi dbi, ks_bytes from, ks_bytes to, ks_range_cb cb,
                      void *arg)
{
    MDB_val lo = {from.len, (void *)from.data};
    MDB_val hi = {to.len, (void *)to.data};
    if (from.len && to.len && mdb_cmp(txn, dbi, &lo, &hi) >= 0)
        return 0; /* empty interval */
    MDB_cursor *cur;
    int rc = mdb_cursor_open(txn, dbi, &cur);
    if (rc)
        return rc;
    MDB_val k = lo, v;
    rc = mdb_cursor_get(cur, &k, &v, from.len ? MDB_SET_RANGE : MDB_FIRST);
    while (rc == 0) {
        if (to.len && mdb_cmp(txn, dbi, &k, &hi) >= 0)
            break;
        ks_bytes kb = {k.mv_data, k.mv_size}, vb = {v.mv_data, v.mv_size};
        if (cb(arg, kb, vb) != 0)
            break;
        rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    mdb_cursor_close(cur);
    return rc == MDB_NOTFOUND ? 0 : rc;
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
