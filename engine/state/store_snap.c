/*
 * store_snap.c - read snapshots for threads other than an env's owner
 * (store.h). The owner's cached read txn (store_txn.c) is bound to its
 * thread, so another thread opens its own MDB_RDONLY txn; the env's
 * `snaps` lock keeps grow (mdb_env_set_mapsize) and close away while it
 * is open.
 */
#include <lmdb.h>
#include <stdlib.h>

#include "state/store_internal.h"

struct ks_store_snap {
    ks_store_env *env;
    MDB_txn *txn;
};

int ks_store_snap_begin(ks_store_env *env, ks_store_snap **out)
{
    *out = NULL;
    if (!env)
        return KS_ERR_INVALID;
    ks_store_snap *s = calloc(1, sizeof *s);
    if (!s)
        return KS_ERR_NOMEM;
    pthread_rwlock_rdlock(&env->snaps);
    int rc = mdb_txn_begin(env->mdb, NULL, MDB_RDONLY, &s->txn);
    if (rc) {
        pthread_rwlock_unlock(&env->snaps);
        free(s);
        return map_rc(rc);
    }
    s->env = env;
    *out = s;
    return 0;
}

int ks_store_snap_get(ks_store_snap *s, ks_store_db *db, ks_bytes key, ks_bytes *value)
{
    if (!s || !db || db->env != s->env || !key.len || key.len > KS_KEY_MAX)
        return KS_ERR_INVALID;
    MDB_val k = {key.len, (void *)key.data}, v;
    int rc = mdb_get(s->txn, db->dbi, &k, &v);
    if (rc == MDB_NOTFOUND)
        return KS_ERR_NOT_FOUND;
    if (rc)
        return map_rc(rc);
    value->data = v.mv_data;
    value->len = v.mv_size;
    return 0;
}

int ks_store_snap_range(ks_store_snap *s, ks_store_db *db, ks_bytes from, ks_bytes to,
                        ks_range_cb cb, void *arg)
{
    if (!s || !db || db->env != s->env || !cb || from.len > KS_KEY_MAX || to.len > KS_KEY_MAX)
        return KS_ERR_INVALID;
    int rc = ks_store_range_in(s->txn, db->dbi, from, to, cb, arg);
    return rc ? map_rc(rc) : 0;
}

int ks_store_snap_checkpoint(ks_store_snap *s, ks_store_db *db, int64_t *offset)
{
    if (!s || !db || db->env != s->env || !offset)
        return KS_ERR_INVALID;
    if (!s->env->have_meta)
        return KS_ERR_NOT_FOUND;
    MDB_val k = {db->ckpt_key_len, db->ckpt_key}, v;
    int rc = mdb_get(s->txn, s->env->meta, &k, &v);
    if (rc == MDB_NOTFOUND)
        return KS_ERR_NOT_FOUND;
    if (rc)
        return map_rc(rc);
    if (v.mv_size != 8)
        return KS_ERR_IO;
    *offset = ks_int64_decode(v.mv_data);
    return 0;
}

void ks_store_snap_end(ks_store_snap *s)
{
    if (!s)
        return;
    mdb_txn_abort(s->txn);
    pthread_rwlock_unlock(&s->env->snaps);
    free(s);
}
