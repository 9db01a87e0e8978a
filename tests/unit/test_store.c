/*
 * test_store.c - engine/state/store.c against real LMDB files in a mkdtemp
 * directory under /tmp.
 */
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "state/store.h"
#include "unit/test_util.h"

#define MiB (1024u * 1024u)

/* One temporary directory per test; the env lives two levels below it so
 * that ks_store_env_open has to create parents. */
typedef struct fixture {
    char tmp[64];
    char dir[128];
} fixture;

static void fx_init(fixture *fx)
{
    snprintf(fx->tmp, sizeof fx->tmp, "/tmp/ks-store-test-XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(fx->tmp));
    snprintf(fx->dir, sizeof fx->dir, "%s/app/task-0", fx->tmp);
}

static int rm_one(const char *path, const struct stat *st, int flag,
                  struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void fx_done(fixture *fx)
{
    nftw(fx->tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static ks_store_env *open_env(const char *dir, uint64_t map_size)
{
    ks_store_env *env = NULL;
    char err[256] = "";
    int rc = ks_store_env_open(dir, map_size, 4, &env, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "open %s: %d %s\n", dir, rc, err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    return env;
}

static ks_store_db *open_db(ks_store_env *env, const char *name)
{
    ks_store_db *db = NULL;
    CU_ASSERT_EQUAL_FATAL(ks_store_db_open(env, name, &db), 0);
    return db;
}

static ks_bytes B(const char *s) { return (ks_bytes){s, strlen(s)}; }

static int put_s(ks_store_db *db, const char *k, const char *v)
{
    return ks_store_put(db, B(k), B(v));
}

/* 1 when db[k] == v. */
static int has(ks_store_db *db, const char *k, const char *v)
{
    ks_bytes out;
    if (ks_store_get(db, B(k), &out) != 0)
        return 0;
    return out.len == strlen(v) && memcmp(out.data, v, out.len) == 0;
}

static int absent(ks_store_db *db, const char *k)
{
    ks_bytes out;
    return ks_store_get(db, B(k), &out) == KS_ERR_NOT_FOUND;
}

static uint64_t count_of(ks_store_db *db)
{
    uint64_t n = 0;
    CU_ASSERT_EQUAL(ks_store_count(db, &n), 0);
    return n;
}

/* ------------------------------------------------------------------ */

static void test_put_get_delete(void)
{
    fixture fx;
    fx_init(&fx);
    ks_store_env *env = open_env(fx.dir, MiB);
    ks_store_db *db = open_db(env, "counts");
    CU_ASSERT_STRING_EQUAL(ks_store_db_name(db), "counts");

    CU_ASSERT_EQUAL(put_s(db, "k", "v"), KS_ERR_STATE); /* no txn */
    CU_ASSERT_EQUAL(ks_store_del(db, B("k")), KS_ERR_STATE);
    CU_ASSERT_FALSE(ks_store_in_txn(env));
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(ks_store_begin(env), 0); /* idempotent */
    CU_ASSERT_TRUE(ks_store_in_txn(env));
    CU_ASSERT_EQUAL(put_s(db, "k1", "v1"), 0);
    CU_ASSERT_EQUAL(put_s(db, "k2", "v2"), 0);
    CU_ASSERT_EQUAL(put_s(db, "k1", "v1b"), 0); /* overwrite */
    CU_ASSERT_EQUAL(ks_store_put(db, B("empty"), (ks_bytes){NULL, 0}), 0);
    CU_ASSERT_TRUE(has(db, "k1", "v1b"));
    CU_ASSERT_TRUE(has(db, "empty", ""));
    CU_ASSERT_EQUAL(ks_store_del(db, B("k2")), 0);
    CU_ASSERT_TRUE(absent(db, "k2"));
    CU_ASSERT_EQUAL(ks_store_del(db, B("never")), 0); /* absent: fine */
    CU_ASSERT_EQUAL(put_s(db, "", "x"), KS_ERR_INVALID);
    CU_ASSERT_EQUAL(ks_store_commit(env), 0);
    CU_ASSERT_FALSE(ks_store_in_txn(env));
    CU_ASSERT_EQUAL(ks_store_commit(env), KS_ERR_STATE); /* none open */

    /* outside the txn: the committed state */
    CU_ASSERT_TRUE(has(db, "k1", "v1b"));
    CU_ASSERT_TRUE(absent(db, "k2"));
    ks_store_read_end(env);

    ks_store_env_close(env);
    fx_done(&fx);
}

static void test_commit_persists(void)
{
    fixture fx;
    fx_init(&fx);
    ks_store_env *env = open_env(fx.dir, MiB);
    ks_store_db *db = open_db(env, "counts");
    ks_store_db *db2 = open_db(env, "other");
    ks_store_db *again = NULL;
    CU_ASSERT_EQUAL(ks_store_db_open(env, "counts", &again), 0);
    CU_ASSERT_PTR_EQUAL(again, db);
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(put_s(db, "a", "1"), 0);
    CU_ASSERT_EQUAL(put_s(db2, "a", "2"), 0);
    CU_ASSERT_EQUAL(ks_store_commit(env), 0);
    /* an open batch is aborted by close */
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(put_s(db, "b", "lost"), 0);
    ks_store_env_close(env);

    env = open_env(fx.dir, MiB);
    db = open_db(env, "counts");
    db2 = open_db(env, "other");
    CU_ASSERT_TRUE(has(db, "a", "1"));
    CU_ASSERT_TRUE(has(db2, "a", "2"));
    CU_ASSERT_TRUE(absent(db, "b"));
    ks_store_env_close(env);
    fx_done(&fx);
}

static void test_abort_undoes_data_and_checkpoint(void)
{
    fixture fx;
    fx_init(&fx);
    ks_store_env *env = open_env(fx.dir, MiB);
    ks_store_db *db = open_db(env, "counts");
    int64_t off = 0;

    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(put_s(db, "k1", "old"), 0);
    CU_ASSERT_EQUAL(ks_store_checkpoint_set(db, 10), 0);
    CU_ASSERT_EQUAL(ks_store_commit(env), 0);

    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(put_s(db, "k1", "new"), 0);
    CU_ASSERT_EQUAL(put_s(db, "k2", "new"), 0);
    CU_ASSERT_EQUAL(ks_store_checkpoint_set(db, 20), 0);
    CU_ASSERT_EQUAL(ks_store_checkpoint_get(db, &off), 0);
    CU_ASSERT_EQUAL(off, 20);
    ks_store_abort(env);
    CU_ASSERT_FALSE(ks_store_in_txn(env));
    ks_store_abort(env); /* no txn: nothing */

    CU_ASSERT_TRUE(has(db, "k1", "old"));
    CU_ASSERT_TRUE(absent(db, "k2"));
    CU_ASSERT_EQUAL(ks_store_checkpoint_get(db, &off), 0);
    CU_ASSERT_EQUAL(off, 10);
    ks_store_env_close(env);

    env = open_env(fx.dir, MiB);
    db = open_db(env, "counts");
    CU_ASSERT_TRUE(has(db, "k1", "old"));
    CU_ASSERT_TRUE(absent(db, "k2"));
    CU_ASSERT_EQUAL(ks_store_checkpoint_get(db, &off), 0);
    CU_ASSERT_EQUAL(off, 10);
    ks_store_env_close(env);
    fx_done(&fx);
}

static void test_checkpoint(void)
{
    fixture fx;
    fx_init(&fx);
    ks_store_env *env = open_env(fx.dir, MiB);
    ks_store_db *a = open_db(env, "a");
    ks_store_db *b = open_db(env, "b");
    int64_t off = 123;

    CU_ASSERT_EQUAL(ks_store_checkpoint_get(a, &off), KS_ERR_NOT_FOUND);
    CU_ASSERT_EQUAL(off, 123);
    CU_ASSERT_EQUAL(ks_store_checkpoint_set(a, 5), KS_ERR_STATE); /* no txn */
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(ks_store_checkpoint_set(a, INT64_MIN), 0);
    CU_ASSERT_EQUAL(ks_store_checkpoint_set(b, INT64_MAX), 0);
    CU_ASSERT_EQUAL(ks_store_commit(env), 0);
    CU_ASSERT_EQUAL(ks_store_checkpoint_get(a, &off), 0);
    CU_ASSERT_EQUAL(off, INT64_MIN);
    CU_ASSERT_EQUAL(ks_store_checkpoint_get(b, &off), 0);
    CU_ASSERT_EQUAL(off, INT64_MAX);

    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(ks_store_checkpoint_set(a, 1234567890123LL), 0);
    CU_ASSERT_EQUAL(ks_store_commit(env), 0);
    CU_ASSERT_EQUAL(ks_store_checkpoint_get(a, &off), 0);
    CU_ASSERT_EQUAL(off, 1234567890123LL);
    CU_ASSERT_EQUAL(ks_store_checkpoint_get(b, &off), 0);
    CU_ASSERT_EQUAL(off, INT64_MAX);
    /* checkpoints are not entries of the store */
    CU_ASSERT_EQUAL(count_of(a), 0);
    ks_store_env_close(env);
    fx_done(&fx);
}

/* clear empties one store and drops its checkpoint, with the batch: an
 * abort keeps both; the other stores and the state version stay. */
static void test_clear(void)
{
    fixture fx;
    fx_init(&fx);
    ks_store_env *env = open_env(fx.dir, MiB);
    ks_store_db *a = open_db(env, "a");
    ks_store_db *b = open_db(env, "b");
    int64_t off = 0;
    uint32_t ver = 0;
    CU_ASSERT_EQUAL(ks_store_clear(a), KS_ERR_STATE); /* no txn */
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(put_s(a, "k1", "1"), 0);
    CU_ASSERT_EQUAL(put_s(a, "k2", "2"), 0);
    CU_ASSERT_EQUAL(put_s(b, "k1", "b"), 0);
    CU_ASSERT_EQUAL(ks_store_checkpoint_set(a, 7), 0);
    CU_ASSERT_EQUAL(ks_store_checkpoint_set(b, 9), 0);
    CU_ASSERT_EQUAL(ks_store_version_set(a, 3), 0);
    CU_ASSERT_EQUAL(ks_store_commit(env), 0);

    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(ks_store_clear(a), 0);
    CU_ASSERT_EQUAL(count_of(a), 0); /* the batch sees it */
    ks_store_abort(env);
    CU_ASSERT_EQUAL(count_of(a), 2);
    CU_ASSERT_EQUAL(ks_store_checkpoint_get(a, &off), 0);
    CU_ASSERT_EQUAL(off, 7);

    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(ks_store_clear(a), 0);
    CU_ASSERT_EQUAL(put_s(a, "k3", "3"), 0);
    CU_ASSERT_EQUAL(ks_store_commit(env), 0);
    ks_store_env_close(env);

    env = open_env(fx.dir, MiB);
    a = open_db(env, "a");
    b = open_db(env, "b");
    CU_ASSERT_EQUAL(count_of(a), 1);
    CU_ASSERT_TRUE(absent(a, "k1"));
    CU_ASSERT_TRUE(has(a, "k3", "3"));
    CU_ASSERT_EQUAL(ks_store_checkpoint_get(a, &off), KS_ERR_NOT_FOUND);
    CU_ASSERT_EQUAL(ks_store_version_get(a, &ver), 0);
    CU_ASSERT_EQUAL(ver, 3);
    CU_ASSERT_TRUE(has(b, "k1", "b"));
    CU_ASSERT_EQUAL(ks_store_checkpoint_get(b, &off), 0);
    CU_ASSERT_EQUAL(off, 9);
    ks_store_env_close(env);
    fx_done(&fx);
}

/* State versions: in __meta, per store, with the batch; kept across a
 * reopen; never an entry of the store. */
static void test_state_version(void)
{
    fixture fx;
    fx_init(&fx);
    ks_store_env *env = open_env(fx.dir, MiB);
    ks_store_db *a = open_db(env, "a");
    ks_store_db *b = open_db(env, "b");
    uint32_t v = 7;
    CU_ASSERT_EQUAL(ks_store_version_get(a, &v), KS_ERR_NOT_FOUND);
    CU_ASSERT_EQUAL(v, 7);
    CU_ASSERT_EQUAL(ks_store_version_set(a, 1), KS_ERR_STATE); /* no txn */
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(ks_store_put(a, (ks_bytes){"k", 1}, (ks_bytes){"old", 3}), 0);
    CU_ASSERT_EQUAL(ks_store_version_set(a, 1), 0);
    CU_ASSERT_EQUAL(ks_store_commit(env), 0);
    CU_ASSERT_EQUAL(ks_store_version_get(a, &v), 0);
    CU_ASSERT_EQUAL(v, 1);
    CU_ASSERT_EQUAL(ks_store_version_get(b, &v), KS_ERR_NOT_FOUND);

    /* data and version abort together */
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(ks_store_put(a, (ks_bytes){"k", 1}, (ks_bytes){"new", 3}), 0);
    CU_ASSERT_EQUAL(ks_store_version_set(a, 0xfffffffeu), 0);
    CU_ASSERT_EQUAL(ks_store_version_get(a, &v), 0); /* the batch sees its own */
    CU_ASSERT_EQUAL(v, 0xfffffffeu);
    ks_store_abort(env);
    ks_bytes val;
    CU_ASSERT_EQUAL(ks_store_get(a, (ks_bytes){"k", 1}, &val), 0);
    CU_ASSERT_EQUAL(memcmp(val.data, "old", 3), 0);
    CU_ASSERT_EQUAL(ks_store_version_get(a, &v), 0);
    CU_ASSERT_EQUAL(v, 1);
    CU_ASSERT_EQUAL(count_of(a), 1);
    ks_store_env_close(env);

    env = open_env(fx.dir, MiB);
    a = open_db(env, "a");
    CU_ASSERT_EQUAL(ks_store_version_get(a, &v), 0);
    CU_ASSERT_EQUAL(v, 1);
    ks_store_env_close(env);
    fx_done(&fx);
}

/* Range: collect keys into a buffer as "len:bytes" records. */
typedef struct collect {
    ks_bytes keys[32];
    char store[32][8];
    size_t n;
    size_t stop_after; /* 0: never */
} collect;

static int collect_cb(void *arg, ks_bytes key, ks_bytes value)
{
    collect *c = arg;
    CU_ASSERT_TRUE(key.len <= sizeof c->store[0]);
    CU_ASSERT_EQUAL(value.len, 1);
    memcpy(c->store[c->n], key.data, key.len);
    c->keys[c->n] = (ks_bytes){c->store[c->n], key.len};
    c->n++;
    return c->stop_after && c->n >= c->stop_after;
}

static int key_is(const collect *c, size_t i, const char *k, size_t len)
{
    return i < c->n && c->keys[i].len == len &&
           memcmp(c->keys[i].data, k, len) == 0;
}

#define KEY(lit) lit, sizeof(lit) - 1

static void test_range(void)
{
    fixture fx;
    fx_init(&fx);
    ks_store_env *env = open_env(fx.dir, MiB);
    ks_store_db *db = open_db(env, "r");
    /* inserted out of order; byte order is the expected order below */
    static const struct {
        const char *k;
        size_t len;
    } keys[] = {{KEY("b")},      {KEY("a\0b")}, {KEY("\xff")},
                {KEY("a")},      {KEY("ab")},   {KEY("\0")},
                {KEY("a\0")},    {KEY("ba")},   {KEY("\0\0")}};
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CU_ASSERT_EQUAL(
            ks_store_put(db, (ks_bytes){keys[i].k, keys[i].len}, B("v")), 0);
    CU_ASSERT_EQUAL(ks_store_commit(env), 0);

    collect c = {0};
    ks_bytes none = {NULL, 0};
    CU_ASSERT_EQUAL(ks_store_range(db, none, none, collect_cb, &c), 0);
    CU_ASSERT_EQUAL(c.n, 9);
    CU_ASSERT_TRUE(key_is(&c, 0, KEY("\0")));
    CU_ASSERT_TRUE(key_is(&c, 1, KEY("\0\0")));
    CU_ASSERT_TRUE(key_is(&c, 2, KEY("a")));
    CU_ASSERT_TRUE(key_is(&c, 3, KEY("a\0")));
    CU_ASSERT_TRUE(key_is(&c, 4, KEY("a\0b")));
    CU_ASSERT_TRUE(key_is(&c, 5, KEY("ab")));
    CU_ASSERT_TRUE(key_is(&c, 6, KEY("b")));
    CU_ASSERT_TRUE(key_is(&c, 7, KEY("ba")));
    CU_ASSERT_TRUE(key_is(&c, 8, KEY("\xff")));

    /* [a, b) */
    memset(&c, 0, sizeof c);
    CU_ASSERT_EQUAL(ks_store_range(db, B("a"), B("b"), collect_cb, &c), 0);
    CU_ASSERT_EQUAL(c.n, 4);
    CU_ASSERT_TRUE(key_is(&c, 0, KEY("a")));
    CU_ASSERT_TRUE(key_is(&c, 3, KEY("ab")));

    /* from the start to "a\0b" (excluded); binary bound */
    memset(&c, 0, sizeof c);
    CU_ASSERT_EQUAL(ks_store_range(db, none, (ks_bytes){KEY("a\0b")},
                                   collect_cb, &c),
                    0);
    CU_ASSERT_EQUAL(c.n, 4);
    CU_ASSERT_TRUE(key_is(&c, 3, KEY("a\0")));

    /* from a key between entries to the end */
    memset(&c, 0, sizeof c);
    CU_ASSERT_EQUAL(ks_store_range(db, B("aa"), none, collect_cb, &c), 0);
    CU_ASSERT_EQUAL(c.n, 4);
    CU_ASSERT_TRUE(key_is(&c, 0, KEY("ab")));
    CU_ASSERT_TRUE(key_is(&c, 3, KEY("\xff")));

    /* early stop */
    memset(&c, 0, sizeof c);
    c.stop_after = 2;
    CU_ASSERT_EQUAL(ks_store_range(db, none, none, collect_cb, &c), 0);
    CU_ASSERT_EQUAL(c.n, 2);

    /* empty intervals */
    memset(&c, 0, sizeof c);
    CU_ASSERT_EQUAL(ks_store_range(db, B("b"), B("a"), collect_cb, &c), 0);
    CU_ASSERT_EQUAL(ks_store_range(db, B("b"), B("b"), collect_cb, &c), 0);
    CU_ASSERT_EQUAL(ks_store_range(db, B("\xff\xff"), none, collect_cb, &c),
                    0);
    CU_ASSERT_EQUAL(c.n, 0);

    /* inside a txn the scan sees the batch's own writes */
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(put_s(db, "aa", "v"), 0);
    CU_ASSERT_EQUAL(ks_store_del(db, B("ab")), 0);
    memset(&c, 0, sizeof c);
    CU_ASSERT_EQUAL(ks_store_range(db, B("a"), B("b"), collect_cb, &c), 0);
    CU_ASSERT_EQUAL(c.n, 4);
    CU_ASSERT_TRUE(key_is(&c, 3, KEY("aa")));
    ks_store_abort(env);

    ks_store_env_close(env);
    fx_done(&fx);
}

static void test_key_limits(void)
{
    fixture fx;
    fx_init(&fx);
    ks_store_env *env = open_env(fx.dir, MiB);
    ks_store_db *db = open_db(env, "k");
    char big[512];
    memset(big, 'x', sizeof big);
    ks_bytes out;
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(ks_store_put(db, (ks_bytes){big, 500}, B("v")), 0);
    CU_ASSERT_EQUAL(ks_store_get(db, (ks_bytes){big, 500}, &out), 0);
    CU_ASSERT_EQUAL(ks_store_put(db, (ks_bytes){big, 501}, B("v")),
                    KS_ERR_TOO_LARGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(ks_store_last_error(env), "501 bytes"));
    CU_ASSERT_EQUAL(ks_store_get(db, (ks_bytes){big, 501}, &out),
                    KS_ERR_TOO_LARGE);
    CU_ASSERT_EQUAL(ks_store_del(db, (ks_bytes){big, 512}), KS_ERR_TOO_LARGE);
    CU_ASSERT_EQUAL(ks_store_range(db, (ks_bytes){big, 501},
                                   (ks_bytes){NULL, 0}, collect_cb, NULL),
                    KS_ERR_TOO_LARGE);
    CU_ASSERT_EQUAL(ks_store_put(db, (ks_bytes){NULL, 0}, B("v")),
                    KS_ERR_INVALID);
    /* the txn is still healthy */
    CU_ASSERT_EQUAL(put_s(db, "ok", "v"), 0);
    CU_ASSERT_EQUAL(ks_store_commit(env), 0);
    CU_ASSERT_EQUAL(count_of(db), 2);

    /* store names */
    ks_store_db *bad = NULL;
    CU_ASSERT_EQUAL(ks_store_db_open(env, "__meta", &bad), KS_ERR_INVALID);
    CU_ASSERT_EQUAL(ks_store_db_open(env, "", &bad), KS_ERR_INVALID);
    ks_store_env_close(env);
    fx_done(&fx);
}

static void test_max_stores(void)
{
    fixture fx;
    fx_init(&fx);
    ks_store_env *env = NULL;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(
        ks_store_env_open(fx.dir, MiB, 2, &env, err, sizeof err), 0);
    ks_store_db *db = NULL;
    CU_ASSERT_EQUAL(ks_store_db_open(env, "one", &db), 0);
    CU_ASSERT_EQUAL(ks_store_db_open(env, "two", &db), 0);
    CU_ASSERT_EQUAL(ks_store_db_open(env, "three", &db), KS_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(ks_store_last_error(env), "max_stores 2"));
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(ks_store_db_open(env, "one", &db), 0); /* known: fine */
    ks_store_abort(env);
    ks_store_env_close(env);
    fx_done(&fx);
}

static void test_map_full(void)
{
    fixture fx;
    fx_init(&fx);
    ks_store_env *env = open_env(fx.dir, 64 * 1024);
    ks_store_db *db = open_db(env, "counts");
    char val[1000], key[32];
    memset(val, 'v', sizeof val);

    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(put_s(db, "keep", "me"), 0);
    CU_ASSERT_EQUAL(ks_store_checkpoint_set(db, 7), 0);
    CU_ASSERT_EQUAL(ks_store_commit(env), 0);

    /* fill until full; commit of the dead txn says STORE_FULL too */
    for (int round = 0; round < 2; round++) {
        CU_ASSERT_EQUAL_FATAL(ks_store_begin(env), 0);
        int rc = 0, i;
        for (i = 0; i < 10000 && rc == 0; i++) {
            snprintf(key, sizeof key, "key-%06d", i);
            rc = ks_store_put(db, B(key), (ks_bytes){val, sizeof val});
        }
        CU_ASSERT_EQUAL_FATAL(rc, KS_ERR_STORE_FULL);
        CU_ASSERT_TRUE(i > 5);
        const char *msg = ks_store_last_error(env);
        char want[256];
        snprintf(want, sizeof want,
                 "store 'counts' in %s: LMDB map full (map_size 65536 "
                 "bytes); raise `map_size` of the store in the pipeline YAML",
                 fx.dir);
        CU_ASSERT_STRING_EQUAL(msg, want);
        /* the txn is dead */
        ks_bytes out;
        uint64_t n;
        int64_t off;
        CU_ASSERT_TRUE(ks_store_in_txn(env));
        CU_ASSERT_EQUAL(put_s(db, "x", "y"), KS_ERR_STATE);
        CU_ASSERT_EQUAL(ks_store_del(db, B("keep")), KS_ERR_STATE);
        CU_ASSERT_EQUAL(ks_store_get(db, B("keep"), &out), KS_ERR_STATE);
        CU_ASSERT_EQUAL(ks_store_count(db, &n), KS_ERR_STATE);
        CU_ASSERT_EQUAL(ks_store_checkpoint_get(db, &off), KS_ERR_STATE);
        CU_ASSERT_EQUAL(ks_store_checkpoint_set(db, 9), KS_ERR_STATE);
        CU_ASSERT_EQUAL(ks_store_begin(env), KS_ERR_STATE);
        CU_ASSERT_EQUAL(ks_store_env_grow(env, MiB), KS_ERR_STATE);
        if (round == 0) {
            CU_ASSERT_EQUAL(ks_store_commit(env), KS_ERR_STORE_FULL);
            CU_ASSERT_STRING_EQUAL(ks_store_last_error(env), want);
            CU_ASSERT_FALSE(ks_store_in_txn(env));
        } else {
            ks_store_abort(env);
        }
    }
    CU_ASSERT_TRUE(has(db, "keep", "me"));
    CU_ASSERT_EQUAL(count_of(db), 1);

    CU_ASSERT_EQUAL(ks_store_env_grow(env, 4 * MiB), 0);
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    for (int i = 0; i < 500; i++) {
        snprintf(key, sizeof key, "key-%06d", i);
        CU_ASSERT_EQUAL(
            ks_store_put(db, B(key), (ks_bytes){val, sizeof val}), 0);
    }
    CU_ASSERT_EQUAL(ks_store_commit(env), 0);
    CU_ASSERT_EQUAL(count_of(db), 501);
    CU_ASSERT_TRUE(has(db, "keep", "me"));
    int64_t off = 0;
    CU_ASSERT_EQUAL(ks_store_checkpoint_get(db, &off), 0);
    CU_ASSERT_EQUAL(off, 7);
    ks_store_env_close(env);

    /* the data survives a reopen with the old (too small) map_size */
    env = open_env(fx.dir, 64 * 1024);
    db = open_db(env, "counts");
    CU_ASSERT_EQUAL(count_of(db), 501);
    ks_store_env_close(env);
    fx_done(&fx);
}

/* ks_store_prepare_commit keeps room for LMDB's own commit: batches of one
 * put each, prepared then committed, until the map is full. The map must
 * count as full at a put or at prepare, never inside the commit (which
 * the engine runs after the Kafka commit). */
static void test_prepare_commit_reserve(void)
{
    fixture fx;
    fx_init(&fx);
    ks_store_env *env = open_env(fx.dir, 128 * 1024);
    ks_store_db *db = open_db(env, "counts");
    char val[1000], key[32];
    memset(val, 'v', sizeof val);
    const char *msg = NULL;
    int committed = 0, put_rc = 0, prep_rc = 0, commit_fails = 0;
    for (int i = 0; i < 10000; i++) {
        CU_ASSERT_EQUAL_FATAL(ks_store_begin(env), 0);
        snprintf(key, sizeof key, "key-%06d", i);
        put_rc = ks_store_put(db, B(key), (ks_bytes){val, sizeof val});
        if (put_rc == 0) {
            CU_ASSERT_EQUAL(ks_store_checkpoint_set(db, i), 0);
            CU_ASSERT_EQUAL(ks_store_batch_error(env, &msg), 0);
            prep_rc = ks_store_prepare_commit(env);
        }
        if (put_rc != 0 || prep_rc != 0)
            break;
        /* prepared: the commit must find its pages */
        int rc = ks_store_commit(env);
        commit_fails += rc != 0;
        CU_ASSERT_EQUAL(rc, 0);
        committed++;
    }
    /* with 1000-byte values a put needs a page or two, the reserve eight:
     * prepare notices the full map first */
    CU_ASSERT_EQUAL(put_rc, 0);
    CU_ASSERT_EQUAL(prep_rc, KS_ERR_STORE_FULL);
    CU_ASSERT_EQUAL(commit_fails, 0);
    CU_ASSERT_TRUE(committed > 20);
    CU_ASSERT_EQUAL(ks_store_batch_error(env, &msg), KS_ERR_STORE_FULL);
    char want[400];
    snprintf(want, sizeof want,
             "store 'counts' in %s: LMDB map full (map_size 131072 bytes, of which "
             "32768 are kept free for LMDB's commit); raise `map_size` of the store "
             "in the pipeline YAML",
             fx.dir);
    CU_ASSERT_STRING_EQUAL(msg, want);
    CU_ASSERT_STRING_EQUAL(ks_store_last_error(env), want);
    /* dead like after a failed put: commit refuses, abort undoes */
    CU_ASSERT_EQUAL(put_s(db, "x", "y"), KS_ERR_STATE);
    CU_ASSERT_EQUAL(ks_store_prepare_commit(env), KS_ERR_STORE_FULL);
    ks_store_abort(env);
    CU_ASSERT_EQUAL(ks_store_batch_error(env, &msg), 0);
    CU_ASSERT_EQUAL(count_of(db), (uint64_t)committed);
    int64_t off = -1;
    CU_ASSERT_EQUAL(ks_store_checkpoint_get(db, &off), 0);
    CU_ASSERT_EQUAL(off, committed - 1);
    /* no txn: nothing to prepare */
    CU_ASSERT_EQUAL(ks_store_prepare_commit(env), 0);
    /* a bigger map: the batch goes through */
    CU_ASSERT_EQUAL(ks_store_env_grow(env, 4 * MiB), 0);
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    snprintf(key, sizeof key, "key-%06d", committed);
    CU_ASSERT_EQUAL(ks_store_put(db, B(key), (ks_bytes){val, sizeof val}), 0);
    CU_ASSERT_EQUAL(ks_store_prepare_commit(env), 0);
    CU_ASSERT_EQUAL(ks_store_commit(env), 0);
    CU_ASSERT_EQUAL(count_of(db), (uint64_t)committed + 1);
    ks_store_env_close(env);
    fx_done(&fx);
}

static void test_double_open_refused(void)
{
    fixture fx;
    fx_init(&fx);
    ks_store_env *env = open_env(fx.dir, MiB), *env2 = NULL;
    char err[256] = "", want[256], alias[200];

    CU_ASSERT_EQUAL(ks_store_env_open(fx.dir, MiB, 4, &env2, err, sizeof err),
                    KS_ERR_STATE);
    CU_ASSERT_PTR_NULL(env2);
    snprintf(want, sizeof want,
             "%s: store environment already open in this process", fx.dir);
    CU_ASSERT_STRING_EQUAL(err, want);
    /* another spelling of the same directory */
    snprintf(alias, sizeof alias, "%s/app/../app/./task-0/", fx.tmp);
    CU_ASSERT_EQUAL(ks_store_env_open(alias, MiB, 4, &env2, err, sizeof err),
                    KS_ERR_STATE);
    CU_ASSERT_EQUAL(ks_store_env_open_readonly(fx.dir, &env2, err, sizeof err),
                    KS_ERR_STATE);
    CU_ASSERT_EQUAL(ks_store_env_wipe(fx.dir), KS_ERR_STATE);

    ks_store_env_close(env);
    env = open_env(alias, MiB); /* free again after close */
    ks_store_env_close(env);
    fx_done(&fx);
}

/* Child side of the readonly test; returns the exit code (0 = good). */
static int readonly_child(const char *dir)
{
    ks_store_env *ro = NULL;
    ks_store_db *db = NULL, *none = NULL;
    char err[256];
    ks_bytes out;
    int64_t off = 0;
    uint64_t n = 0;
    if (ks_store_env_open_readonly(dir, &ro, err, sizeof err) != 0) {
        fprintf(stderr, "child: %s\n", err);
        return 10;
    }
    int code = 0;
    if (ks_store_db_open(ro, "counts", &db) != 0)
        code = 11;
    else if (!has(db, "k1", "v1"))
        code = 12;
    else if (ks_store_get(db, B("k2"), &out) != KS_ERR_NOT_FOUND)
        code = 13; /* uncommitted in the parent */
    else if (ks_store_checkpoint_get(db, &off) != 0 || off != 7)
        code = 14;
    else if (ks_store_count(db, &n) != 0 || n != 1)
        code = 15;
    else if (ks_store_begin(ro) != KS_ERR_STATE)
        code = 16;
    else if (ks_store_db_open(ro, "nosuch", &none) != KS_ERR_NOT_FOUND)
        code = 17;
    ks_store_env_close(ro);
    return code;
}

static void test_readonly_other_process(void)
{
    fixture fx;
    fx_init(&fx);
    ks_store_env *ro = NULL;
    char err[256];
    char empty[160];

    /* no env there: NOT_FOUND, and nothing gets created */
    CU_ASSERT_EQUAL(ks_store_env_open_readonly(fx.dir, &ro, err, sizeof err),
                    KS_ERR_NOT_FOUND);
    snprintf(empty, sizeof empty, "%s/empty", fx.tmp);
    CU_ASSERT_EQUAL_FATAL(mkdir(empty, 0755), 0);
    CU_ASSERT_EQUAL(ks_store_env_open_readonly(empty, &ro, err, sizeof err),
                    KS_ERR_NOT_FOUND);
    CU_ASSERT_EQUAL(rmdir(empty), 0); /* still empty */

    ks_store_env *env = open_env(fx.dir, MiB);
    ks_store_db *db = open_db(env, "counts");
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(put_s(db, "k1", "v1"), 0);
    CU_ASSERT_EQUAL(ks_store_checkpoint_set(db, 7), 0);
    CU_ASSERT_EQUAL(ks_store_commit(env), 0);
    /* an uncommitted write the child must not see */
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(put_s(db, "k2", "v2"), 0);

    fflush(NULL);
    pid_t pid = fork();
    CU_ASSERT_TRUE_FATAL(pid >= 0);
    if (pid == 0)
        _exit(readonly_child(fx.dir)); /* never touches the parent's env */
    int status = 0;
    CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
    CU_ASSERT_TRUE(WIFEXITED(status));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr, "readonly child: status %d\n", status);
    CU_ASSERT_EQUAL(WEXITSTATUS(status), 0);

    CU_ASSERT_EQUAL(ks_store_commit(env), 0);
    CU_ASSERT_TRUE(has(db, "k2", "v2"));
    ks_store_env_close(env);
    fx_done(&fx);
}

/* A reader in another process while the writer grows the map past the
 * reader's mapping: the reader adopts the new size (MDB_MAP_RESIZED). */
static void test_readonly_after_grow(void)
{
    fixture fx;
    fx_init(&fx);
    ks_store_env *env = open_env(fx.dir, 64 * 1024);
    ks_store_db *db = open_db(env, "counts");
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(put_s(db, "first", "1"), 0);
    CU_ASSERT_EQUAL(ks_store_commit(env), 0);

    int to_child[2], to_parent[2];
    CU_ASSERT_EQUAL_FATAL(pipe(to_child), 0);
    CU_ASSERT_EQUAL_FATAL(pipe(to_parent), 0);
    fflush(NULL);
    pid_t pid = fork();
    CU_ASSERT_TRUE_FATAL(pid >= 0);
    if (pid == 0) {
        ks_store_env *ro = NULL;
        ks_store_db *rdb = NULL;
        char err[256], c = 'r';
        uint64_t n = 0;
        int code = 0;
        if (ks_store_env_open_readonly(fx.dir, &ro, err, sizeof err) != 0 ||
            ks_store_db_open(ro, "counts", &rdb) != 0)
            code = 20;
        else if (!has(rdb, "first", "1"))
            code = 21;
        if (write(to_parent[1], &c, 1) != 1 || read(to_child[0], &c, 1) != 1)
            code = code ? code : 22;
        if (!code) {
            ks_store_read_end(ro);
            if (!has(rdb, "last", "2"))
                code = 23;
            else if (ks_store_count(rdb, &n) != 0 || n != 302)
                code = 24;
        }
        if (ro)
            ks_store_env_close(ro);
        _exit(code);
    }
    char c;
    CU_ASSERT_EQUAL(read(to_parent[0], &c, 1), 1);
    CU_ASSERT_EQUAL(ks_store_env_grow(env, 4 * MiB), 0);
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    char val[1000], key[32];
    memset(val, 'v', sizeof val);
    for (int i = 0; i < 300; i++) {
        snprintf(key, sizeof key, "key-%06d", i);
        CU_ASSERT_EQUAL(
            ks_store_put(db, B(key), (ks_bytes){val, sizeof val}), 0);
    }
    CU_ASSERT_EQUAL(put_s(db, "last", "2"), 0);
    CU_ASSERT_EQUAL(ks_store_commit(env), 0);
    CU_ASSERT_EQUAL(write(to_child[1], "g", 1), 1);
    int status = 0;
    CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr, "readonly child: status %d\n", status);
    CU_ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(to_child[0]);
    close(to_child[1]);
    close(to_parent[0]);
    close(to_parent[1]);
    ks_store_env_close(env);
    fx_done(&fx);
}

static void test_own_writes_and_count(void)
{
    fixture fx;
    fx_init(&fx);
    ks_store_env *env = open_env(fx.dir, MiB);
    ks_store_db *db = open_db(env, "c");
    ks_store_db *other = open_db(env, "d");

    CU_ASSERT_EQUAL(count_of(db), 0);
    CU_ASSERT_TRUE(absent(db, "a")); /* a read snapshot is now open */
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(put_s(db, "a", "1"), 0);
    CU_ASSERT_EQUAL(put_s(db, "b", "2"), 0);
    CU_ASSERT_EQUAL(put_s(db, "c", "3"), 0);
    CU_ASSERT_EQUAL(put_s(other, "a", "x"), 0);
    CU_ASSERT_TRUE(has(db, "a", "1"));
    CU_ASSERT_EQUAL(count_of(db), 3);
    CU_ASSERT_EQUAL(count_of(other), 1);
    CU_ASSERT_EQUAL(ks_store_del(db, B("b")), 0);
    CU_ASSERT_EQUAL(count_of(db), 2);
    CU_ASSERT_EQUAL(ks_store_commit(env), 0);
    CU_ASSERT_EQUAL(count_of(db), 2);
    CU_ASSERT_TRUE(has(db, "c", "3"));

    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(put_s(db, "z", "9"), 0);
    CU_ASSERT_EQUAL(count_of(db), 3);
    ks_store_abort(env);
    CU_ASSERT_EQUAL(count_of(db), 2);
    CU_ASSERT_TRUE(absent(db, "z"));
    ks_store_env_close(env);
    fx_done(&fx);
}

static void test_wipe(void)
{
    fixture fx;
    fx_init(&fx);
    char path[200];
    struct stat st;
    CU_ASSERT_EQUAL(ks_store_env_wipe(fx.dir), 0); /* nothing there */

    ks_store_env *env = open_env(fx.dir, MiB);
    ks_store_db *db = open_db(env, "w");
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(put_s(db, "a", "1"), 0);
    CU_ASSERT_EQUAL(ks_store_commit(env), 0);
    snprintf(path, sizeof path, "%s/data.mdb", fx.dir);
    CU_ASSERT_EQUAL(stat(path, &st), 0);
    snprintf(path, sizeof path, "%s/lock.mdb", fx.dir);
    CU_ASSERT_EQUAL(stat(path, &st), 0);
    ks_store_env_close(env);

    CU_ASSERT_EQUAL(ks_store_env_wipe(fx.dir), 0);
    CU_ASSERT_EQUAL(stat(fx.dir, &st), -1);
    CU_ASSERT_EQUAL(errno, ENOENT);

    env = open_env(fx.dir, MiB);
    db = open_db(env, "w");
    CU_ASSERT_EQUAL(count_of(db), 0);
    int64_t off;
    CU_ASSERT_EQUAL(ks_store_checkpoint_get(db, &off), KS_ERR_NOT_FOUND);
    ks_store_env_close(env);
    fx_done(&fx);
}

static void test_snapshot(void)
{
    fixture fx;
    fx_init(&fx);
    ks_store_env *env = open_env(fx.dir, MiB);
    ks_store_db *db = open_db(env, "s");
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(put_s(db, "a", "1"), 0);
    CU_ASSERT_EQUAL(put_s(db, "b", "2"), 0);
    CU_ASSERT_EQUAL(ks_store_commit(env), 0);

    /* two borrowed values outside a txn stay valid together */
    ks_bytes va, vb;
    CU_ASSERT_EQUAL(ks_store_get(db, B("a"), &va), 0);
    CU_ASSERT_EQUAL(ks_store_get(db, B("b"), &vb), 0);
    CU_ASSERT_TRUE(va.len == 1 && memcmp(va.data, "1", 1) == 0);
    CU_ASSERT_TRUE(vb.len == 1 && memcmp(vb.data, "2", 1) == 0);

    /* a commit in between: the next read outside sees it */
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(put_s(db, "a", "3"), 0);
    CU_ASSERT_EQUAL(ks_store_commit(env), 0);
    CU_ASSERT_TRUE(has(db, "a", "3"));
    ks_store_read_end(env);
    CU_ASSERT_TRUE(has(db, "a", "3"));
    /* grow with a snapshot open: allowed (the snapshot ends) */
    CU_ASSERT_EQUAL(ks_store_env_grow(env, 2 * MiB), 0);
    CU_ASSERT_TRUE(has(db, "b", "2"));
    ks_store_env_close(env);
    fx_done(&fx);
}

/* ---- snapshots of another thread (ks_store_snap_*) ---- */

typedef struct snap_read {
    ks_store_env *env;
    ks_store_db *db;
    int got_a, got_c, range_n, begin_rc;
    char a[8];
} snap_read;

static int count_entry(void *arg, ks_bytes k, ks_bytes v)
{
    (void)k, (void)v;
    ((snap_read *)arg)->range_n++;
    return 0;
}

/* What another thread (the query server's) sees while the owner's batch is
 * open: only what was committed. */
static void *read_in_thread(void *arg)
{
    snap_read *r = arg;
    ks_store_snap *snap = NULL;
    r->begin_rc = ks_store_snap_begin(r->env, &snap);
    if (r->begin_rc != 0)
        return NULL;
    ks_bytes v;
    r->got_a = ks_store_snap_get(snap, r->db, B("a"), &v) == 0;
    if (r->got_a)
        snprintf(r->a, sizeof r->a, "%.*s", (int)v.len, (const char *)v.data);
    r->got_c = ks_store_snap_get(snap, r->db, B("c"), &v) == 0;
    ks_store_snap_range(snap, r->db, (ks_bytes){0}, (ks_bytes){0}, count_entry, r);
    ks_store_snap_end(snap);
    return NULL;
}

static void test_snap_other_thread(void)
{
    fixture fx;
    fx_init(&fx);
    ks_store_env *env = open_env(fx.dir, MiB);
    ks_store_db *db = open_db(env, "s");
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(put_s(db, "a", "1"), 0);
    CU_ASSERT_EQUAL(put_s(db, "b", "2"), 0);
    CU_ASSERT_EQUAL(ks_store_commit(env), 0);
    /* the owner's next batch, open and uncommitted */
    CU_ASSERT_EQUAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(put_s(db, "a", "9"), 0);
    CU_ASSERT_EQUAL(put_s(db, "c", "3"), 0);
    snap_read r = {.env = env, .db = db};
    pthread_t t;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, read_in_thread, &r), 0);
    pthread_join(t, NULL);
    CU_ASSERT_EQUAL(r.begin_rc, 0);
    CU_ASSERT_TRUE(r.got_a && strcmp(r.a, "1") == 0); /* not the open batch's 9 */
    CU_ASSERT_FALSE(r.got_c);
    CU_ASSERT_EQUAL(r.range_n, 2);
    CU_ASSERT_EQUAL(ks_store_commit(env), 0);
    /* committed: the next snapshot sees it */
    memset(&r, 0, sizeof r);
    r.env = env;
    r.db = db;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, read_in_thread, &r), 0);
    pthread_join(t, NULL);
    CU_ASSERT_TRUE(r.got_a && strcmp(r.a, "9") == 0 && r.got_c && r.range_n == 3);
    /* a handle of another env is refused */
    fixture fx2;
    fx_init(&fx2);
    ks_store_env *env2 = open_env(fx2.dir, MiB);
    ks_store_db *db2 = open_db(env2, "s");
    ks_store_snap *snap = NULL;
    ks_bytes v;
    CU_ASSERT_EQUAL(ks_store_snap_begin(env, &snap), 0);
    CU_ASSERT_EQUAL(ks_store_snap_get(snap, db2, B("a"), &v), KS_ERR_INVALID);
    ks_store_snap_end(snap);
    ks_store_env_close(env2);
    fx_done(&fx2);
    ks_store_env_close(env);
    fx_done(&fx);
}

void ks_test_register_store(void)
{
    CU_pSuite s = CU_add_suite("store", NULL, NULL);
    if (!s)
        return;
    CU_add_test(s, "put/get/delete", test_put_get_delete);
    CU_add_test(s, "commit persists across reopen", test_commit_persists);
    CU_add_test(s, "abort undoes data and checkpoint",
                test_abort_undoes_data_and_checkpoint);
    CU_add_test(s, "checkpoint get/set", test_checkpoint);
    CU_add_test(s, "clear: one store and its checkpoint, with the batch", test_clear);
    CU_add_test(s, "state version get/set, with the batch", test_state_version);
    CU_add_test(s, "range scans", test_range);
    CU_add_test(s, "key limits", test_key_limits);
    CU_add_test(s, "max_stores", test_max_stores);
    CU_add_test(s, "map full, abort, grow", test_map_full);
    CU_add_test(s, "prepare_commit keeps room for LMDB's commit",
                test_prepare_commit_reserve);
    CU_add_test(s, "double open refused", test_double_open_refused);
    CU_add_test(s, "readonly from another process",
                test_readonly_other_process);
    CU_add_test(s, "readonly after the writer grew the map",
                test_readonly_after_grow);
    CU_add_test(s, "own writes and count", test_own_writes_and_count);
    CU_add_test(s, "wipe", test_wipe);
    CU_add_test(s, "read snapshot", test_snapshot);
    CU_add_test(s, "snapshot of another thread: committed data only", test_snap_other_thread);
}
