/*
 * store_meta.c - the "__meta" database of an environment: per store, the
 * changelog checkpoint ("ckpt:<store>", int64 big-endian) and the state
 * version ("ver:<store>", uint32 big-endian). Both are written in the
 * batch, so they commit and abort with the data they describe.
 */
#include <lmdb.h>
#include <stdint.h>
#include <string.h>

#include "state/store_internal.h"

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

/* Write the meta value `value` of `db` under `key` in the batch's write
 * transaction, so it commits or aborts with the data it describes; `what`
 * names it in errors. */
static int meta_put(ks_store_db *db, const void *key, size_t key_len, const char *what,
                    const void *value, size_t size)
{
    MDB_txn *txn;
    int rc = write_txn(db, &txn);
    if (rc)
        return rc;
    MDB_val k = {key_len, (void *)key}, v = {size, (void *)value};
    rc = mdb_put(txn, db->env->meta, &k, &v, 0);
    if (rc)
        return write_failed(db->env, db, what, rc);
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
    unsigned char buf[8];
    ks_int64_encode(offset, buf);
    return meta_put(db, db->ckpt_key, db->ckpt_key_len, "checkpoint", buf, sizeof buf);
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
    unsigned char buf[4] = {(unsigned char)(version >> 24), (unsigned char)(version >> 16),
                            (unsigned char)(version >> 8), (unsigned char)version};
    return meta_put(db, db->ver_key, db->ver_key_len, "state version", buf, sizeof buf);
}
