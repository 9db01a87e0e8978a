/*
 * global_table.c - the process's global table store (global_table.h).
 */
#include "runtime/global_table.h"

#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"
#include "base/log.h"
#include "runtime/serde.h"

#define POSITIONS_DB "__positions" /* "<table>\0<partition>" -> next offset */

struct ks_global {
    const ks_pipeline *p;
    MDB_env *env;
    MDB_dbi *dbi;        /* per p->globals entry */
    MDB_dbi positions;
    MDB_txn *wtxn;       /* the writer's open transaction, or NULL */
    char dir[4096];
};

static int map_rc(int rc)
{
    return rc == MDB_NOTFOUND ? KS_ERR_NOT_FOUND : rc == MDB_MAP_FULL ? KS_ERR_STORE_FULL
                                                                     : KS_ERR_IO;
}

/* The largest map_size any global table's store asks for (default 1 GiB). */
static uint64_t map_size_of(const ks_pipeline *p)
{
    uint64_t size = 1ull << 30;
    for (size_t i = 0; i < p->global_count; i++)
        if (p->stores[p->globals[i].table_store].map_size > size)
            size = p->stores[p->globals[i].table_store].map_size;
    return size;
}

static int open_dbs(ks_global *g, char *err, size_t errlen)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(g->env, NULL, 0, &txn);
    for (size_t i = 0; rc == 0 && i < g->p->global_count; i++)
        rc = mdb_dbi_open(txn, g->p->globals[i].name, MDB_CREATE, &g->dbi[i]);
    if (rc == 0)
        rc = mdb_dbi_open(txn, POSITIONS_DB, MDB_CREATE, &g->positions);
    if (rc == 0)
        return mdb_txn_commit(txn) == 0 ? 0 : (snprintf(err, errlen, "%s: commit failed",
                                                        g->dir), KS_ERR_IO);
    mdb_txn_abort(txn);
    snprintf(err, errlen, "%s: %s", g->dir, mdb_strerror(rc));
    return map_rc(rc);
}

int ks_global_open(const ks_pipeline *p, const char *dir, ks_global **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    if (p->global_count == 0)
        return 0;
    ks_global *g = calloc(1, sizeof *g);
    if (!g || !(g->dbi = calloc(p->global_count, sizeof *g->dbi))) {
        free(g);
        snprintf(err, errlen, "out of memory");
        return KS_ERR_NOMEM;
    }
    g->p = p;
    snprintf(g->dir, sizeof g->dir, "%s", dir);
    int rc = ks_mkdir_p(dir, 0755) != 0 ? KS_ERR_IO : 0;
    if (rc != 0)
        snprintf(err, errlen, "%s: cannot create the directory", dir);
    int mrc = rc ? 0 : mdb_env_create(&g->env);
    if (rc == 0 && mrc == 0)
        mrc = mdb_env_set_maxdbs(g->env, (MDB_dbi)p->global_count + 1);
    if (rc == 0 && mrc == 0)
        mrc = mdb_env_set_mapsize(g->env, (size_t)map_size_of(p));
    /* NOTLS: a worker thread holds one reader per task it runs */
    if (rc == 0 && mrc == 0)
        mrc = mdb_env_open(g->env, dir, MDB_NOTLS | MDB_NOMETASYNC, 0644);
    if (rc == 0 && mrc != 0) {
        snprintf(err, errlen, "%s: %s", dir, mdb_strerror(mrc));
        rc = map_rc(mrc);
    }
    if (rc == 0)
        rc = open_dbs(g, err, errlen);
    if (rc != 0) {
        ks_global_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

void ks_global_dir(const ks_pipeline *p, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s/global", p->state_dir ? p->state_dir : "./state",
             p->application);
}

void ks_global_close(ks_global *g)
{
    if (!g)
        return;
    if (g->wtxn)
        mdb_txn_abort(g->wtxn);
    if (g->env)
        mdb_env_close(g->env);
    free(g->dbi);
    free(g);
}

int ks_global_begin(ks_global *g)
{
    if (g->wtxn)
        return 0;
    int rc = mdb_txn_begin(g->env, NULL, 0, &g->wtxn);
    if (rc != 0) {
        g->wtxn = NULL;
        ks_error("global", "%s: begin: %s", g->dir, mdb_strerror(rc));
        return map_rc(rc);
    }
    return 0;
}

int ks_global_commit(ks_global *g)
{
    if (!g->wtxn)
        return 0;
    int rc = mdb_txn_commit(g->wtxn);
    g->wtxn = NULL;
    if (rc != 0)
        ks_error("global", "%s: commit: %s", g->dir, mdb_strerror(rc));
    return rc ? map_rc(rc) : 0;
}

void ks_global_abort(ks_global *g)
{
    if (g->wtxn)
        mdb_txn_abort(g->wtxn);
    g->wtxn = NULL;
}

static size_t position_key(const ks_global *g, int table, int32_t partition, char *buf,
                           size_t len)
{
    int n = snprintf(buf, len, "%s%c%d", g->p->globals[table].name, 0, (int)partition);
    return n < 0 ? 0 : (size_t)n;
}

/* 1 when the table holds the record (as table.c's applicable()). */
static int applicable(const ks_cfg_source *t, ks_bytes key, const ks_bytes *value)
{
    const char *why;
    return key.len > 0 && key.len <= KS_KEY_MAX &&
           ks_serde_check(t->key_serde, key.data, key.len, &why) == 0 &&
           (!value || ks_serde_check(t->value_serde, value->data, value->len, &why) == 0);
}

static int write_value(ks_global *g, int table, ks_bytes key, const ks_bytes *value,
                       int64_t ts)
{
    MDB_val k = {key.len, (void *)key.data};
    if (!value) {
        int rc = mdb_del(g->wtxn, g->dbi[table], &k, NULL);
        return rc == MDB_NOTFOUND ? 0 : rc;
    }
    MDB_val v = {8 + value->len, NULL};
    int rc = mdb_put(g->wtxn, g->dbi[table], &k, &v, MDB_RESERVE);
    if (rc == 0) {
        ks_int64_encode(ts, v.mv_data);
        if (value->len)
            memcpy((unsigned char *)v.mv_data + 8, value->data, value->len);
    }
    return rc;
}

int ks_global_apply(ks_global *g, int table, int32_t partition, int64_t offset, ks_bytes key,
                    const ks_bytes *value, int64_t timestamp)
{
    int rc = ks_global_begin(g);
    if (rc != 0)
        return rc;
    const ks_cfg_source *t = &g->p->globals[table];
    if (applicable(t, key, value))
        rc = write_value(g, table, key, value, timestamp);
    else if (key.len == 0) /* as Kafka Streams: a table record needs a key */
        ks_debug("global", "global table %s: record %s[%d]@%lld has no key: ignored", t->name,
                 t->topic, (int)partition, (long long)offset);
    else
        ks_warn("global", "global table %s: record %s[%d]@%lld skipped (no key, a key over "
                          "%d bytes, or not in the table's serdes)",
                t->name, t->topic, (int)partition, (long long)offset, KS_KEY_MAX);
    char pk[300];
    unsigned char next[8];
    ks_int64_encode(offset + 1, next);
    MDB_val k = {position_key(g, table, partition, pk, sizeof pk), pk}, v = {8, next};
    if (rc == 0)
        rc = mdb_put(g->wtxn, g->positions, &k, &v, 0);
    if (rc != 0) {
        ks_error("global", "global table %s in %s: write: %s", t->name, g->dir,
                 mdb_strerror(rc));
        return map_rc(rc);
    }
    return 0;
}

int ks_global_wipe(ks_global *g, int table, int32_t partitions)
{
    int rc = ks_global_begin(g);
    if (rc != 0)
        return rc;
    rc = mdb_drop(g->wtxn, g->dbi[table], 0); /* 0: empty it, keep the handle */
    for (int32_t part = 0; rc == 0 && part < partitions; part++) {
        char pk[300];
        MDB_val k = {position_key(g, table, part, pk, sizeof pk), pk};
        rc = mdb_del(g->wtxn, g->positions, &k, NULL);
        if (rc == MDB_NOTFOUND)
            rc = 0;
    }
    if (rc != 0) {
        ks_error("global", "global table %s in %s: wipe: %s", g->p->globals[table].name, g->dir,
                 mdb_strerror(rc));
        ks_global_abort(g);
        return map_rc(rc);
    }
    return ks_global_commit(g);
}

int ks_global_position(ks_global *g, int table, int32_t partition, int64_t *next)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(g->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0)
        return map_rc(rc);
    char pk[300];
    MDB_val k = {position_key(g, table, partition, pk, sizeof pk), pk}, v;
    rc = mdb_get(txn, g->positions, &k, &v);
    if (rc == 0 && v.mv_size == 8)
        *next = ks_int64_decode(v.mv_data);
    mdb_txn_abort(txn);
    return rc ? map_rc(rc) : 0;
}

/* A fresh snapshot in r: renewed, or begun the first time. */
static int reader_renew(ks_global *g, ks_global_reader *r, MDB_txn **txn)
{
    int rc = 0;
    if (r->active)
        mdb_txn_reset(r->txn);
    r->active = 0;
    if (r->txn)
        rc = mdb_txn_renew(r->txn);
    else
        rc = mdb_txn_begin(g->env, NULL, MDB_RDONLY, (MDB_txn **)&r->txn);
    if (rc != 0)
        return map_rc(rc);
    r->active = 1;
    *txn = r->txn;
    return 0;
}

/* The position of store `store` among p->globals, or -1. */
static int table_of(const ks_global *g, int store)
{
    for (size_t i = 0; i < g->p->global_count; i++)
        if (g->p->globals[i].table_store == store)
            return (int)i;
    return -1;
}

int ks_global_get(ks_global *g, ks_global_reader *r, int store, ks_bytes key,
                  ks_bytes *value)
{
    int t = g ? table_of(g, store) : -1;
    if (t < 0 || !key.len || (key.len && !key.data))
        return KS_ERR_INVALID;
    if (key.len > KS_KEY_MAX)
        return KS_ERR_TOO_LARGE;
    MDB_txn *txn;
    int rc = reader_renew(g, r, &txn);
    if (rc != 0)
        return rc;
    MDB_val k = {key.len, (void *)key.data}, v;
    rc = mdb_get(txn, g->dbi[t], &k, &v);
    if (rc != 0)
        return map_rc(rc);
    *value = (ks_bytes){v.mv_data, v.mv_size};
    return 0;
}

int ks_global_range(ks_global *g, ks_global_reader *r, int store, ks_bytes from, ks_bytes to,
                    ks_range_cb cb, void *arg)
{
    int t = g ? table_of(g, store) : -1;
    if (t < 0 || !cb)
        return KS_ERR_INVALID;
    MDB_txn *txn;
    MDB_cursor *cur;
    int rc = reader_renew(g, r, &txn);
    if (rc != 0 || (rc = mdb_cursor_open(txn, g->dbi[t], &cur)) != 0)
        return rc < 0 ? rc : map_rc(rc);
    MDB_val lo = {from.len, (void *)from.data}, hi = {to.len, (void *)to.data}, k = lo, v;
    rc = mdb_cursor_get(cur, &k, &v, from.len ? MDB_SET_RANGE : MDB_FIRST);
    while (rc == 0) {
        if (to.len && mdb_cmp(txn, g->dbi[t], &k, &hi) >= 0)
            break;
        if (cb(arg, (ks_bytes){k.mv_data, k.mv_size}, (ks_bytes){v.mv_data, v.mv_size}) != 0)
            break;
        rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    mdb_cursor_close(cur);
    return rc != 0 && rc != MDB_NOTFOUND ? map_rc(rc) : 0;
}

void ks_global_reader_reset(ks_global_reader *r)
{
    if (r->active)
        mdb_txn_reset(r->txn);
    r->active = 0;
}

void ks_global_reader_end(ks_global_reader *r)
{
    if (r->txn)
        mdb_txn_abort(r->txn);
    r->txn = NULL;
    r->active = 0;
}
