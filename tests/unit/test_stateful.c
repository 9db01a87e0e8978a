/*
 * test_stateful.c - the shipped stateful plugins (count, aggregate, reduce)
 * and the example plugin page_views, run by a real task over real LMDB
 * stores, without a broker.
 *
 * A harness builds a topology from a YAML text (plugins from the build
 * tree), creates task 0 with io callbacks that capture what a worker would
 * produce (sink records, changelog writes) and simulates the changelog's
 * delivery offsets with a counter, as the worker's delivery reports do.
 * Batches end with ks_task_commit_stores (after the "Kafka transaction
 * committed") or ks_task_abort_stores.
 */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/config.h"
#include "state/store.h"
#include "runtime/cache.h"
#include "runtime/task.h"
#include "runtime/task_cache.h"
#include "runtime/topology.h"
#include "unit/test_util.h"

#define PLUGINS_DIR KS_TEST_BUILDDIR "/plugins/.libs"
#define EXAMPLES_DIR KS_TEST_BUILDDIR "/examples/page-views/.libs"
#define PAGE_VIEWS_YAML KS_TEST_SRCDIR "/../examples/page-views/pipeline.yaml"

#define MAX_CAPTURE 4096

/* A record as io.emit saw it (copied). */
typedef struct out_rec {
    char sink[64];
    char *key; /* NUL-terminated copy; NULL when the key was NULL */
    size_t key_len;
    unsigned char *value; /* NULL for a tombstone */
    size_t value_len;
    int64_t timestamp;
} out_rec;

/* A changelog write as io.changelog saw it (copied), with its simulated
 * offset. */
typedef struct cl_rec {
    int store;
    char *key;
    size_t key_len;
    unsigned char *value; /* NULL: tombstone */
    size_t value_len;
    int64_t offset;
} cl_rec;

typedef struct harness {
    char tmp[64];         /* mkdtemp root, removed at the end  */
    char state_dir[128];  /* the pipeline's state_dir          */
    char copy_dir[128];   /* private copies of plugin builds   */
    ks_topology *topo;
    ks_task *task;
    ks_task_io io;
    out_rec out[MAX_CAPTURE];
    size_t nout;
    cl_rec cl[MAX_CAPTURE];
    size_t ncl;
    size_t ncl_committed; /* changelog records of committed batches */
    int64_t next_offset;  /* next simulated changelog offset        */
    int64_t next_input;   /* next source offset                     */
} harness;

static harness H; /* large: not on the stack */
/* the io of the next h_start: 1 = with record caches, as a worker's */
static int H_CACHE;

static void *dup_mem(const void *p, size_t n)
{
    char *c = malloc(n + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    if (n)
        memcpy(c, p, n);
    c[n] = '\0';
    return c;
}

static int capture_emit(void *arg, ks_task *task, const ks_topo_node *sink,
                        const ks_record *rec)
{
    (void)task;
    harness *h = arg;
    if (h->nout == MAX_CAPTURE)
        return KS_ERR_NOMEM;
    out_rec *o = &h->out[h->nout++];
    snprintf(o->sink, sizeof o->sink, "%s", sink->name);
    o->key = rec->key ? dup_mem(rec->key, rec->key_len) : NULL;
    o->key_len = rec->key_len;
    o->value = rec->value ? dup_mem(rec->value, rec->value_len) : NULL;
    o->value_len = rec->value_len;
    o->timestamp = rec->timestamp;
    return 0;
}

/* Capture the write and "deliver" it at the next offset, as the worker's
 * delivery report would: that sets changelog_hi for the checkpoint. */
static int capture_changelog(void *arg, ks_task *task, int store, ks_bytes key,
                             const ks_bytes *value)
{
    harness *h = arg;
    if (h->ncl == MAX_CAPTURE)
        return KS_ERR_NOMEM;
    cl_rec *c = &h->cl[h->ncl++];
    c->store = store;
    c->key = dup_mem(key.data, key.len);
    c->key_len = key.len;
    c->value = value ? dup_mem(value->data, value->len) : NULL;
    c->value_len = value ? value->len : 0;
    c->offset = h->next_offset++;
    task->changelog_hi[store] = c->offset;
    return 0;
}

static void clear_out(harness *h)
{
    for (size_t i = 0; i < h->nout; i++) {
        free(h->out[i].key);
        free(h->out[i].value);
    }
    h->nout = 0;
}

static void drop_changelog_from(harness *h, size_t from)
{
    for (size_t i = from; i < h->ncl; i++) {
        free(h->cl[i].key);
        free(h->cl[i].value);
    }
    h->ncl = from;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* A fresh harness with its temporary directories. */
static void h_prepare(harness *h)
{
    memset(h, 0, sizeof *h);
    snprintf(h->tmp, sizeof h->tmp, "/tmp/ks-stateful-test-XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(h->tmp));
    CU_ASSERT_FATAL(snprintf(h->state_dir, sizeof h->state_dir, "%s/state", h->tmp) <
                    (int)sizeof h->state_dir);
    CU_ASSERT_FATAL(snprintf(h->copy_dir, sizeof h->copy_dir, "%s/copies", h->tmp) <
                    (int)sizeof h->copy_dir);
}

/* Build the topology of `body` (everything after the common header) and
 * create task 0. */
static void h_start(harness *h, const char *body)
{
    h_prepare(h);

    char yaml[8192];
    int n = snprintf(yaml, sizeof yaml,
                     "application: stateful-test\n"
                     "kafka: { bootstrap: 127.0.0.1:9092 }\n"
                     "state_dir: \"%s\"\n"
                     "plugin_path: [\"%s\", \"%s\"]\n"
                     "%s",
                     h->state_dir, PLUGINS_DIR, EXAMPLES_DIR, body);
    CU_ASSERT_FATAL(n > 0 && (size_t)n < sizeof yaml);

    ks_pipeline *p = NULL;
    char err[1024] = "";
    int rc = ks_pipeline_parse("stateful.yaml", yaml, (size_t)n, &p, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "\nparse: %s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    rc = ks_topology_build(p, ks_host_api_table(), h->copy_dir, &h->topo, err,
                           sizeof err);
    if (rc != 0)
        fprintf(stderr, "\ntopology: %s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);

    h->io = (ks_task_io){
        .arg = h, .emit = capture_emit, .changelog = capture_changelog, .cache = H_CACHE};
    rc = ks_task_create(h->topo, 0, &h->io, &h->task, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "\ntask: %s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
}

/* Create task 0 again (stores reopened from disk). */
static void h_reopen(harness *h)
{
    char err[1024] = "";
    ks_task_destroy(h->task);
    h->task = NULL;
    int rc = ks_task_create(h->topo, 0, &h->io, &h->task, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "\ntask: %s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
}

static void h_stop(harness *h)
{
    ks_task_destroy(h->task);
    ks_topology_free(h->topo);
    clear_out(h);
    drop_changelog_from(h, 0);
    nftw(h->tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    memset(h, 0, sizeof *h);
}

/* Feed one record to the first source; key/value NULL allowed. */
static ks_verdict feed_ts(harness *h, const char *key, const char *value, int64_t ts)
{
    ks_record rec = {
        .key = key,
        .key_len = key ? strlen(key) : 0,
        .value = value,
        .value_len = value ? strlen(value) : 0,
        .timestamp = ts,
        .topic = h->topo->nodes[0].source->topic,
        .partition = 0,
        .offset = h->next_input++,
    };
    return ks_task_process(h->task, &h->topo->nodes[0], &rec);
}

static ks_verdict feed(harness *h, const char *key, const char *value)
{
    return feed_ts(h, key, value, 1000 + h->next_input);
}

/* End the batch as a worker does after the Kafka transaction committed. */
static void commit(harness *h)
{
    CU_ASSERT_EQUAL(ks_task_commit_stores(h->task), 0);
    h->ncl_committed = h->ncl;
}

/* End the batch as after an aborted Kafka transaction: its changelog
 * records are aborted too (read_committed never sees them). */
static void abort_batch(harness *h)
{
    ks_task_abort_stores(h->task);
    drop_changelog_from(h, h->ncl_committed);
}

/* 1 when output i is (key, int64 n). */
static int out_is_count(const harness *h, size_t i, const char *key, int64_t n)
{
    if (i >= h->nout)
        return 0;
    const out_rec *o = &h->out[i];
    return o->key && strcmp(o->key, key) == 0 && o->value && o->value_len == 8 &&
           ks_int64_decode(o->value) == n;
}

/* 1 when output i is (key, the text value). */
static int out_is_text(const harness *h, size_t i, const char *key, const char *value)
{
    if (i >= h->nout)
        return 0;
    const out_rec *o = &h->out[i];
    return o->key && strcmp(o->key, key) == 0 && o->value &&
           o->value_len == strlen(value) && memcmp(o->value, value, o->value_len) == 0;
}

static int store_index(const harness *h, const char *name)
{
    const ks_pipeline *p = h->topo->pipeline;
    for (size_t s = 0; s < p->store_count; s++)
        if (strcmp(p->stores[s].name, name) == 0)
            return (int)s;
    CU_FAIL_FATAL("no such store");
    return -1;
}

/* The int64 in store `s` under key; -1 when absent. */
static int64_t stored_count(harness *h, int s, const char *key)
{
    ks_bytes v;
    if (ks_store_get(h->task->dbs[s], (ks_bytes){key, strlen(key)}, &v) != 0)
        return -1;
    CU_ASSERT_EQUAL(v.len, 8);
    return v.len == 8 ? ks_int64_decode(v.data) : -1;
}

/* ---- store contents == committed changelog, compacted ------------------ */

typedef struct walk {
    const harness *h;
    int store;
    size_t entries;
    int mismatches;
} walk;

/* The last committed changelog record of `key` in `store`, or NULL. */
static const cl_rec *last_write(const harness *h, int store, ks_bytes key)
{
    const cl_rec *last = NULL;
    for (size_t i = 0; i < h->ncl_committed; i++) {
        const cl_rec *c = &h->cl[i];
        if (c->store == store && c->key_len == key.len &&
            memcmp(c->key, key.data, key.len) == 0)
            last = c;
    }
    return last;
}

static int check_entry(void *arg, ks_bytes key, ks_bytes value)
{
    walk *w = arg;
    w->entries++;
    const cl_rec *c = last_write(w->h, w->store, key);
    if (!c || !c->value || c->value_len != value.len ||
        memcmp(c->value, value.data, value.len) != 0)
        w->mismatches++;
    return 0;
}

/* Every store entry is its key's last changelog value, and every key whose
 * last changelog record is not a tombstone is in the store. */
static void assert_store_matches_changelog(harness *h, int store)
{
    walk w = {h, store, 0, 0};
    CU_ASSERT_EQUAL(ks_store_range(h->task->dbs[store], (ks_bytes){NULL, 0},
                                   (ks_bytes){NULL, 0}, check_entry, &w),
                    0);
    CU_ASSERT_EQUAL(w.mismatches, 0);
    size_t live = 0;
    for (size_t i = 0; i < h->ncl_committed; i++) {
        const cl_rec *c = &h->cl[i];
        if (c->store == store &&
            last_write(h, store, (ks_bytes){c->key, c->key_len}) == c && c->value)
            live++;
    }
    CU_ASSERT_EQUAL(w.entries, live);
    ks_store_read_end(h->task->env);
}

/* ---- count ---------------------------------------------------------------- */

static const char *COUNT_YAML =
    "sources:\n"
    "  in: { topic: in, key: string, value: string }\n"
    "nodes:\n"
    "  - { name: per_key, type: count, from: in, store: counts }\n"
    "sinks:\n"
    "  - { name: out, from: per_key, topic: out, key: string, value: int64 }\n";

/* The same count with a record cache (off by default). */
static const char *COUNT_CACHED_YAML =
    "sources:\n"
    "  in: { topic: in, key: string, value: string }\n"
    "nodes:\n"
    "  - { name: per_key, type: count, from: in, store: counts, cache_bytes: 1MiB }\n"
    "sinks:\n"
    "  - { name: out, from: per_key, topic: out, key: string, value: int64 }\n";

static void test_count(void)
{
    harness *h = &H;
    h_start(h, COUNT_YAML);
    int s = store_index(h, "counts");
    CU_ASSERT_EQUAL(ks_task_checkpoint(h->task, s), -1); /* never committed */

    const char *keys[] = {"a", "b", "a", "a", "b", "c"};
    const int64_t want[] = {1, 1, 2, 3, 2, 1};
    for (size_t i = 0; i < 6; i++)
        CU_ASSERT_EQUAL(feed_ts(h, keys[i], "x", 5000 + (int64_t)i), KS_OK);
    CU_ASSERT_EQUAL_FATAL(h->nout, 6);
    for (size_t i = 0; i < 6; i++) {
        CU_ASSERT(out_is_count(h, i, keys[i], want[i]));
        CU_ASSERT_EQUAL(h->out[i].timestamp, 5000 + (int64_t)i);
        CU_ASSERT_STRING_EQUAL(h->out[i].sink, "out");
    }
    /* one changelog write per record, offsets 0..5 */
    CU_ASSERT_EQUAL(h->ncl, 6);
    commit(h);
    CU_ASSERT_EQUAL(ks_task_checkpoint(h->task, s), 5 + 1);
    CU_ASSERT_EQUAL(stored_count(h, s, "a"), 3);
    CU_ASSERT_EQUAL(stored_count(h, s, "b"), 2);
    CU_ASSERT_EQUAL(stored_count(h, s, "c"), 1);
    assert_store_matches_changelog(h, s);

    /* second batch */
    clear_out(h);
    CU_ASSERT_EQUAL(feed(h, "c", "x"), KS_OK);
    CU_ASSERT(out_is_count(h, 0, "c", 2));
    commit(h);
    CU_ASSERT_EQUAL(ks_task_checkpoint(h->task, s), 6 + 1);
    assert_store_matches_changelog(h, s);
    h_stop(h);
}

static void test_count_persists(void)
{
    harness *h = &H;
    h_start(h, COUNT_YAML);
    int s = store_index(h, "counts");
    CU_ASSERT_EQUAL(feed(h, "a", "x"), KS_OK);
    CU_ASSERT_EQUAL(feed(h, "a", "x"), KS_OK);
    CU_ASSERT_EQUAL(feed(h, "b", "x"), KS_OK);
    commit(h);
    int64_t checkpoint = ks_task_checkpoint(h->task, s);
    CU_ASSERT_EQUAL(checkpoint, 2 + 1);

    h_reopen(h); /* closes the env; stores come back from disk */
    CU_ASSERT_EQUAL(ks_task_checkpoint(h->task, s), checkpoint);
    CU_ASSERT_EQUAL(stored_count(h, s, "a"), 2);
    clear_out(h);
    CU_ASSERT_EQUAL(feed(h, "a", "x"), KS_OK);
    CU_ASSERT_EQUAL(feed(h, "b", "x"), KS_OK);
    CU_ASSERT(out_is_count(h, 0, "a", 3));
    CU_ASSERT(out_is_count(h, 1, "b", 2));
    commit(h);
    CU_ASSERT_EQUAL(ks_task_checkpoint(h->task, s), 4 + 1);
    assert_store_matches_changelog(h, s);

    /* an uncommitted batch does not survive a close */
    CU_ASSERT_EQUAL(feed(h, "a", "x"), KS_OK);
    h_reopen(h);
    drop_changelog_from(h, h->ncl_committed);
    CU_ASSERT_EQUAL(stored_count(h, s, "a"), 3);
    CU_ASSERT_EQUAL(ks_task_checkpoint(h->task, s), 4 + 1);
    h_stop(h);
}

static void test_count_abort(void)
{
    harness *h = &H;
    h_start(h, COUNT_YAML);
    int s = store_index(h, "counts");
    CU_ASSERT_EQUAL(feed(h, "a", "x"), KS_OK);
    commit(h);
    CU_ASSERT_EQUAL(ks_task_checkpoint(h->task, s), 0 + 1);

    /* a batch that the Kafka transaction failed for */
    CU_ASSERT_EQUAL(feed(h, "a", "x"), KS_OK);
    CU_ASSERT_EQUAL(feed(h, "new", "x"), KS_OK);
    CU_ASSERT_EQUAL(stored_count(h, s, "a"), 2); /* the batch sees its writes */
    abort_batch(h);
    CU_ASSERT_EQUAL(stored_count(h, s, "a"), 1);
    CU_ASSERT_EQUAL(stored_count(h, s, "new"), -1);
    CU_ASSERT_EQUAL(ks_task_checkpoint(h->task, s), 0 + 1);
    assert_store_matches_changelog(h, s);

    /* the replay counts from the committed state */
    clear_out(h);
    CU_ASSERT_EQUAL(feed(h, "a", "x"), KS_OK);
    CU_ASSERT_EQUAL(feed(h, "new", "x"), KS_OK);
    CU_ASSERT(out_is_count(h, 0, "a", 2));
    CU_ASSERT(out_is_count(h, 1, "new", 1));
    commit(h);
    /* offsets 1 and 2 went to the aborted transaction */
    CU_ASSERT_EQUAL(ks_task_checkpoint(h->task, s), 4 + 1);
    assert_store_matches_changelog(h, s);
    h_stop(h);
}

/* The committed changelog alone rebuilds the store (restore after the
 * local state is lost), and counting goes on from it. */
static void test_count_restore(void)
{
    harness *h = &H;
    h_start(h, COUNT_YAML);
    int s = store_index(h, "counts");
    const char *keys[] = {"u1", "u2", "u1", "u3", "u1"};
    for (size_t i = 0; i < 5; i++)
        CU_ASSERT_EQUAL(feed(h, keys[i], "x"), KS_OK);
    commit(h);
    CU_ASSERT_EQUAL(feed(h, "u2", "x"), KS_OK);
    commit(h);

    /* lose the local state */
    ks_task_destroy(h->task);
    h->task = NULL;
    char dir[512];
    CU_ASSERT_FATAL(snprintf(dir, sizeof dir, "%s/stateful-test/task-0", h->state_dir) <
                    (int)sizeof dir);
    CU_ASSERT_EQUAL(ks_store_env_wipe(dir), 0);
    h_reopen(h);
    CU_ASSERT_EQUAL(ks_task_checkpoint(h->task, s), -1);
    CU_ASSERT_EQUAL(stored_count(h, s, "u1"), -1);

    for (size_t i = 0; i < h->ncl_committed; i++) {
        const cl_rec *c = &h->cl[i];
        ks_bytes v = {c->value, c->value_len};
        CU_ASSERT_EQUAL(ks_task_restore_put(h->task, c->store,
                                            (ks_bytes){c->key, c->key_len},
                                            c->value ? &v : NULL, c->offset),
                        0);
    }
    CU_ASSERT_EQUAL(ks_task_commit_stores(h->task), 0);
    CU_ASSERT_EQUAL(ks_task_checkpoint(h->task, s), 5 + 1);
    CU_ASSERT_EQUAL(stored_count(h, s, "u1"), 3);
    CU_ASSERT_EQUAL(stored_count(h, s, "u2"), 2);
    assert_store_matches_changelog(h, s);

    clear_out(h);
    CU_ASSERT_EQUAL(feed(h, "u1", "x"), KS_OK);
    CU_ASSERT(out_is_count(h, 0, "u1", 4));
    commit(h);
    h_stop(h);
}

static void test_count_drops(void)
{
    harness *h = &H;
    h_start(h, COUNT_YAML);
    int s = store_index(h, "counts");
    /* NULL key: skipped, not an error */
    CU_ASSERT_EQUAL(feed(h, NULL, "x"), KS_OK);
    CU_ASSERT_EQUAL(feed(h, "", "x"), KS_OK);
    /* tombstone: ignored */
    CU_ASSERT_EQUAL(feed(h, "a", NULL), KS_OK);
    CU_ASSERT_EQUAL(h->nout, 0);
    CU_ASSERT_EQUAL(h->ncl, 0);
    CU_ASSERT_EQUAL(stored_count(h, s, "a"), -1);
    /* a key the store cannot hold is a poison record */
    char big[600];
    memset(big, 'k', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CU_ASSERT_EQUAL(feed(h, big, "x"), KS_SKIP);
    CU_ASSERT_EQUAL(h->nout, 0);
    /* an empty value is a value */
    CU_ASSERT_EQUAL(feed(h, "a", ""), KS_OK);
    CU_ASSERT(out_is_count(h, 0, "a", 1));
    commit(h);
    assert_store_matches_changelog(h, s);
    h_stop(h);
}

static void test_count_store_full(void)
{
    harness *h = &H;
    h_start(h, "stores:\n"
               "  tiny: { map_size: 64KiB }\n"
               "sources:\n"
               "  in: { topic: in, key: string, value: string }\n"
               "nodes:\n"
               "  - { name: per_key, type: count, from: in, store: tiny }\n"
               "sinks:\n"
               "  - { name: out, from: per_key, topic: out, key: string, value: int64 }\n");
    ks_verdict v = KS_OK;
    char key[480];
    for (int i = 0; i < 10000 && v == KS_OK; i++) {
        snprintf(key, sizeof key, "%0400d", i); /* 400-byte keys fill it fast */
        v = feed(h, key, "x");
    }
    CU_ASSERT_EQUAL(v, KS_FATAL);
    abort_batch(h);
    h_stop(h);
}

/* ---- aggregate ------------------------------------------------------------ */

static const char *AGG_YAML =
    "sources:\n"
    "  views: { topic: page-views, key: string, value: json }\n"
    "nodes:\n"
    "  - name: bytes_per_user\n"
    "    type: aggregate\n"
    "    from: views\n"
    "    store: bytes\n"
    "    functions: { init: page_views.zero, add: page_views.add_bytes }\n"
    "sinks:\n"
    "  - { from: bytes_per_user, topic: bytes, key: string, value: int64 }\n";

static void test_aggregate(void)
{
    harness *h = &H;
    h_start(h, AGG_YAML);
    int s = store_index(h, "bytes");
    CU_ASSERT_EQUAL(feed(h, "u1", "{\"bytes\": 100}"), KS_OK);
    CU_ASSERT_EQUAL(feed(h, "u1", "{\"bytes\": 50, \"url\": \"/x\"}"), KS_OK);
    CU_ASSERT_EQUAL(feed(h, "u2", "{\"bytes\": 7}"), KS_OK);
    CU_ASSERT_EQUAL(feed(h, "u1", "{\"url\": \"/no-bytes\"}"), KS_OK); /* + 0 */
    CU_ASSERT_EQUAL(feed(h, "u2", NULL), KS_OK);                       /* ignored */
    CU_ASSERT_EQUAL(feed(h, NULL, "{\"bytes\": 1}"), KS_OK);           /* ignored */
    CU_ASSERT_EQUAL_FATAL(h->nout, 4);
    CU_ASSERT(out_is_count(h, 0, "u1", 100));
    CU_ASSERT(out_is_count(h, 1, "u1", 150));
    CU_ASSERT(out_is_count(h, 2, "u2", 7));
    CU_ASSERT(out_is_count(h, 3, "u1", 150));
    commit(h);
    CU_ASSERT_EQUAL(stored_count(h, s, "u1"), 150);
    CU_ASSERT_EQUAL(ks_task_checkpoint(h->task, s), 3 + 1);
    assert_store_matches_changelog(h, s);

    /* not JSON: the function says poison, the store is untouched */
    clear_out(h);
    CU_ASSERT_EQUAL(feed(h, "u1", "garbage"), KS_SKIP);
    CU_ASSERT_EQUAL(h->nout, 0);
    CU_ASSERT_EQUAL(stored_count(h, s, "u1"), 150);
    abort_batch(h);

    /* survives a restart */
    h_reopen(h);
    CU_ASSERT_EQUAL(feed(h, "u2", "{\"bytes\": 3}"), KS_OK);
    CU_ASSERT(out_is_count(h, 0, "u2", 10));
    commit(h);
    assert_store_matches_changelog(h, s);
    h_stop(h);
}

/* init() of aggregate/reduce refuses missing functions and wrong kinds:
 * the task does not start. */
static void expect_task_refused(const char *body)
{
    harness *h = &H;
    h_prepare(h);
    char yaml[4096];
    int n = snprintf(yaml, sizeof yaml,
                     "application: stateful-test\n"
                     "kafka: { bootstrap: 127.0.0.1:9092 }\n"
                     "state_dir: \"%s\"\n"
                     "plugin_path: [\"%s\", \"%s\"]\n%s",
                     h->state_dir, PLUGINS_DIR, EXAMPLES_DIR, body);
    ks_pipeline *p = NULL;
    char err[1024] = "";
    CU_ASSERT_EQUAL_FATAL(ks_pipeline_parse("refused.yaml", yaml, (size_t)n, &p, err,
                                            sizeof err),
                          0);
    CU_ASSERT_EQUAL_FATAL(
        ks_topology_build(p, ks_host_api_table(), h->copy_dir, &h->topo, err, sizeof err),
        0);
    h->io = (ks_task_io){.arg = h, .emit = capture_emit, .changelog = capture_changelog};
    err[0] = '\0';
    CU_ASSERT_EQUAL(ks_task_create(h->topo, 0, &h->io, &h->task, err, sizeof err), -1);
    CU_ASSERT_PTR_NULL(h->task);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "init of node"));
    h_stop(h);
}

static void test_functions_refused(void)
{
    /* wrong kinds */
    expect_task_refused(
        "sources: { in: { topic: in } }\n"
        "nodes:\n"
        "  - { name: agg, type: aggregate, from: in, store: s,\n"
        "      functions: { init: page_views.add_bytes, add: page_views.zero } }\n"
        "sinks: [ { from: agg, topic: out } ]\n");
    /* 'add' missing */
    expect_task_refused("sources: { in: { topic: in } }\n"
                        "nodes:\n"
                        "  - { name: agg, type: aggregate, from: in, store: s,\n"
                        "      functions: { init: page_views.zero } }\n"
                        "sinks: [ { from: agg, topic: out } ]\n");
    /* a reducer that is an aggregator */
    expect_task_refused("sources: { in: { topic: in } }\n"
                        "nodes:\n"
                        "  - { name: red, type: reduce, from: in, store: s,\n"
                        "      functions: { reduce: page_views.add_bytes } }\n"
                        "sinks: [ { from: red, topic: out } ]\n");
    /* 'reduce' missing */
    expect_task_refused("sources: { in: { topic: in } }\n"
                        "nodes:\n"
                        "  - { name: red, type: reduce, from: in, store: s,\n"
                        "      functions: { max: page_views.max_bytes } }\n"
                        "sinks: [ { from: red, topic: out } ]\n");
}

/* ---- reduce --------------------------------------------------------------- */

static void test_reduce(void)
{
    harness *h = &H;
    h_start(h, "sources:\n"
               "  views: { topic: page-views, key: string, value: json }\n"
               "nodes:\n"
               "  - name: biggest\n"
               "    type: reduce\n"
               "    from: views\n"
               "    store: biggest-view\n"
               "    functions: { reduce: page_views.max_bytes }\n"
               "sinks:\n"
               "  - { from: biggest, topic: biggest, key: string, value: json }\n");
    int s = store_index(h, "biggest-view");
    const char *v10 = "{\"url\": \"/a\", \"bytes\": 10}";
    const char *v5 = "{\"url\": \"/b\", \"bytes\": 5}";
    const char *v20 = "{\"url\": \"/c\",\"bytes\":20}";
    const char *w1 = "{\"url\": \"/w\"}";
    CU_ASSERT_EQUAL(feed(h, "u1", v10), KS_OK); /* first: as is */
    CU_ASSERT_EQUAL(feed(h, "u1", v5), KS_OK);  /* smaller: keeps v10 */
    CU_ASSERT_EQUAL(feed(h, "u2", w1), KS_OK);
    CU_ASSERT_EQUAL(feed(h, "u1", v20), KS_OK); /* bigger: v20 */
    CU_ASSERT_EQUAL(feed(h, "u1", NULL), KS_OK); /* ignored */
    CU_ASSERT_EQUAL_FATAL(h->nout, 4);
    CU_ASSERT(out_is_text(h, 0, "u1", v10));
    CU_ASSERT(out_is_text(h, 1, "u1", v10));
    CU_ASSERT(out_is_text(h, 2, "u2", w1));
    CU_ASSERT(out_is_text(h, 3, "u1", v20));
    commit(h);
    CU_ASSERT_EQUAL(ks_task_checkpoint(h->task, s), 3 + 1);
    assert_store_matches_changelog(h, s);
    ks_bytes got;
    CU_ASSERT_EQUAL_FATAL(ks_store_get(h->task->dbs[s], (ks_bytes){"u1", 2}, &got), 0);
    CU_ASSERT(got.len == strlen(v20) && memcmp(got.data, v20, got.len) == 0);
    ks_store_read_end(h->task->env);

    /* a later value that is not JSON: poison, nothing changes */
    clear_out(h);
    CU_ASSERT_EQUAL(feed(h, "u1", "[1, 2]"), KS_SKIP);
    CU_ASSERT_EQUAL(h->nout, 0);
    abort_batch(h);
    assert_store_matches_changelog(h, s);
    h_stop(h);
}

/* ---- drop_bots -------------------------------------------------------------- */

static void test_drop_bots(void)
{
    harness *h = &H;
    h_start(h, "sources:\n"
               "  views: { topic: page-views, key: string, value: json }\n"
               "nodes:\n"
               "  - { name: clean, type: page_views.drop_bots, from: views,\n"
               "      config: { bot_marker: crawler } }\n"
               "  - { name: default_marker, type: page_views.drop_bots, from: views }\n"
               "sinks:\n"
               "  - { name: custom, from: clean, topic: a, key: string, value: json }\n"
               "  - { name: default, from: default_marker, topic: b, key: string, "
               "value: json }\n");
    const char *human = "{\"user_agent\": \"Mozilla/5.0\", \"bytes\": 1}";
    const char *crawler = "{\"user_agent\": \"acme-crawler/1.0\"}";
    const char *bot = "{\"user_agent\": \"Googlebot/2.1\"}";
    const char *no_agent = "{\"url\": \"/\"}";
    const char *odd_agent = "{\"user_agent\": 42}";
    CU_ASSERT_EQUAL(feed_ts(h, "u1", human, 77), KS_OK);
    CU_ASSERT_EQUAL(feed(h, "u2", crawler), KS_OK);
    CU_ASSERT_EQUAL(feed(h, "u3", bot), KS_OK);
    CU_ASSERT_EQUAL(feed(h, "u4", no_agent), KS_OK);
    CU_ASSERT_EQUAL(feed(h, "u5", odd_agent), KS_OK);
    /* not page views: dropped by both, not poison */
    CU_ASSERT_EQUAL(feed(h, "u6", NULL), KS_OK);
    CU_ASSERT_EQUAL(feed(h, "u7", "[1, 2]"), KS_OK);
    CU_ASSERT_EQUAL(feed(h, "u8", "not json"), KS_OK);
    CU_ASSERT_EQUAL(feed(h, "u9", "\"a string\""), KS_OK);

    /* forwarded unchanged: same key, value bytes and timestamp */
    const char *custom[] = {"u1", "u3", "u4", "u5"};
    const char *custom_v[] = {human, bot, no_agent, odd_agent};
    const char *dflt[] = {"u1", "u2", "u4", "u5"};
    const char *dflt_v[] = {human, crawler, no_agent, odd_agent};
    size_t nc = 0, nd = 0;
    for (size_t i = 0; i < h->nout; i++) {
        if (strcmp(h->out[i].sink, "custom") == 0) {
            CU_ASSERT_FATAL(nc < 4);
            CU_ASSERT(out_is_text(h, i, custom[nc], custom_v[nc]));
            nc++;
        } else {
            CU_ASSERT_STRING_EQUAL(h->out[i].sink, "default");
            CU_ASSERT_FATAL(nd < 4);
            CU_ASSERT(out_is_text(h, i, dflt[nd], dflt_v[nd]));
            nd++;
        }
    }
    CU_ASSERT_EQUAL(nc, 4);
    CU_ASSERT_EQUAL(nd, 4);
    CU_ASSERT_EQUAL(h->out[0].timestamp, 77);
    h_stop(h);
}

static void test_drop_bots_empty_marker(void)
{
    expect_task_refused("sources: { in: { topic: in } }\n"
                        "nodes:\n"
                        "  - { name: clean, type: page_views.drop_bots, from: in,\n"
                        "      config: { bot_marker: \"\" } }\n"
                        "sinks: [ { from: clean, topic: out } ]\n");
}

/* ---- the shipped example pipeline ------------------------------------------- */

/* examples/page-views/pipeline.yaml as written, with state_dir and
 * plugin_path pointed at this test's directory and build tree. */
static void test_page_views_pipeline(void)
{
    harness *h = &H;
    h_prepare(h);

    ks_pipeline *p = NULL;
    char err[1024] = "";
    int rc = ks_pipeline_load(PAGE_VIEWS_YAML, &p, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    free(p->state_dir);
    p->state_dir = strdup(h->state_dir);
    for (size_t i = 0; i < p->plugin_path_count; i++)
        free(p->plugin_path[i]);
    free(p->plugin_path);
    p->plugin_path = calloc(2, sizeof *p->plugin_path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p->plugin_path);
    p->plugin_path[0] = strdup(PLUGINS_DIR);
    p->plugin_path[1] = strdup(EXAMPLES_DIR);
    p->plugin_path_count = 2;
    CU_ASSERT_FATAL(p->state_dir && p->plugin_path[0] && p->plugin_path[1]);

    rc = ks_topology_build(p, ks_host_api_table(), h->copy_dir, &h->topo, err,
                           sizeof err);
    if (rc != 0)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    h->io = (ks_task_io){.arg = h, .emit = capture_emit, .changelog = capture_changelog};
    rc = ks_task_create(h->topo, 0, &h->io, &h->task, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    int s = store_index(h, "views-per-user");

    CU_ASSERT_EQUAL(feed(h, "alice", "{\"user_agent\": \"Firefox\", \"url\": \"/\"}"), KS_OK);
    CU_ASSERT_EQUAL(feed(h, "bob", "{\"user_agent\": \"bingbot/2.0\"}"), KS_OK);
    CU_ASSERT_EQUAL(feed(h, "alice", "{\"user_agent\": \"Firefox\", \"url\": \"/a\"}"),
                    KS_OK);
    CU_ASSERT_EQUAL(feed(h, "bob", "{\"user_agent\": \"curl/8\"}"), KS_OK);
    CU_ASSERT_EQUAL(feed(h, NULL, "{\"user_agent\": \"Firefox\"}"), KS_OK);
    CU_ASSERT_EQUAL_FATAL(h->nout, 3);
    CU_ASSERT(out_is_count(h, 0, "alice", 1));
    CU_ASSERT(out_is_count(h, 1, "alice", 2));
    CU_ASSERT(out_is_count(h, 2, "bob", 1));
    commit(h);
    CU_ASSERT_EQUAL(stored_count(h, s, "alice"), 2);
    assert_store_matches_changelog(h, s);
    h_stop(h);
}


/* ---- the record cache (cache.h, task_cache.h) ---------------------------- */

static ks_record cache_rec(const char *key, const char *value)
{
    return (ks_record){.key = key, .key_len = strlen(key), .value = value,
                       .value_len = strlen(value), .topic = "in", .partition = 0,
                       .offset = 7};
}

/* The data structure alone: a key updated again is folded and becomes the
 * newest; over its size the oldest comes out first. */
static void test_cache_fold_evict(void)
{
    ks_cache *c = ks_cache_new(1 << 20);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    ks_record a1 = cache_rec("a", "1"), b1 = cache_rec("b", "1"), a2 = cache_rec("a", "22");
    CU_ASSERT_EQUAL(ks_cache_put_record(c, &a1), 0);
    CU_ASSERT_EQUAL(ks_cache_put_record(c, &b1), 0);
    CU_ASSERT_EQUAL(ks_cache_mark_store(c, (ks_bytes){"a", 1}, 0, NULL), 0);
    CU_ASSERT_EQUAL(ks_cache_put_record(c, &a2), 0);
    CU_ASSERT_EQUAL(ks_cache_mark_store(c, (ks_bytes){"x", 1}, 32, NULL), KS_ERR_INVALID);
    CU_ASSERT_EQUAL(c->count, 2);
    CU_ASSERT_EQUAL(c->updates, 3); /* the store write of a is part of its update */
    CU_ASSERT_EQUAL(c->folds, 1);
    /* order of the latest update: b, then a with its latest value */
    CU_ASSERT_EQUAL_FATAL(c->oldest->rec.key_len, 1);
    CU_ASSERT_EQUAL(memcmp(c->oldest->rec.key, "b", 1), 0);
    CU_ASSERT_EQUAL(memcmp(c->newest->rec.value, "22", 2), 0);
    CU_ASSERT_EQUAL(c->newest->dirty_stores, 1u);
    CU_ASSERT_STRING_EQUAL(c->newest->rec.topic, "in");
    CU_ASSERT_PTR_NULL(ks_cache_over(c));
    /* values past the inline buffer, shrinking, growing, with headers */
    const char *big = "a value longer than sixteen bytes";
    ks_header hd = {"h", "hv", 2};
    ks_record b2 = cache_rec("b", big), b3 = cache_rec("b", "shorter than the first one");
    b3.headers = &hd;
    b3.header_count = 1;
    ks_record b4 = cache_rec("b", "0123456789abcdef0123456789abcdef0123456789");
    CU_ASSERT_EQUAL(ks_cache_put_record(c, &b2), 0);
    CU_ASSERT_EQUAL(ks_cache_put_record(c, &b3), 0);
    CU_ASSERT_EQUAL(memcmp(c->newest->rec.value, b3.value, b3.value_len), 0);
    CU_ASSERT_EQUAL(c->newest->rec.value_len, b3.value_len);
    CU_ASSERT_EQUAL_FATAL(c->newest->rec.header_count, 1);
    CU_ASSERT_STRING_EQUAL(c->newest->rec.headers[0].name, "h");
    CU_ASSERT_EQUAL(ks_cache_put_record(c, &b4), 0);
    CU_ASSERT_EQUAL(c->newest->rec.value_len, b4.value_len);
    CU_ASSERT_EQUAL(memcmp(c->newest->rec.value, b4.value, b4.value_len), 0);
    CU_ASSERT_EQUAL(c->newest->rec.header_count, 0);
    CU_ASSERT_EQUAL(ks_cache_put_record(c, &b1), 0); /* back to the inline buffer */
    CU_ASSERT_EQUAL(memcmp(c->newest->rec.value, "1", 1), 0);
    CU_ASSERT_EQUAL(c->folds, 5);
    CU_ASSERT_EQUAL(c->count, 2);
    /* a is the oldest again */
    CU_ASSERT_EQUAL(memcmp(c->oldest->rec.key, "a", 1), 0);
    ks_record a3 = cache_rec("a", "22");
    CU_ASSERT_EQUAL(ks_cache_put_record(c, &a3), 0);
    /* many keys: the hash grows, every key found */
    char k[16];
    for (int i = 0; i < 1000; i++) {
        snprintf(k, sizeof k, "k%d", i);
        ks_record r = cache_rec(k, "v");
        CU_ASSERT_EQUAL(ks_cache_put_record(c, &r), 0);
    }
    CU_ASSERT_EQUAL(c->count, 1002);
    for (int i = 0; i < 1000; i += 97) {
        snprintf(k, sizeof k, "k%d", i);
        CU_ASSERT_PTR_NOT_NULL(ks_cache_find(c, (ks_bytes){k, strlen(k)}));
    }
    /* shrink the size: the oldest (b) is over first, then a */
    c->max_bytes = c->bytes - 1;
    ks_cache_entry *e = ks_cache_over(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(memcmp(e->rec.key, "b", 1), 0);
    ks_cache_take(c, e);
    ks_cache_entry_free(e);
    CU_ASSERT_PTR_NULL(ks_cache_over(c));
    CU_ASSERT_PTR_NULL(ks_cache_find(c, (ks_bytes){"b", 1}));
    CU_ASSERT_EQUAL(memcmp(c->oldest->rec.key, "a", 1), 0);
    ks_cache_clear(c);
    CU_ASSERT_EQUAL(c->count, 0);
    CU_ASSERT_EQUAL(c->bytes, 0);
    CU_ASSERT_PTR_NULL(ks_cache_find(c, (ks_bytes){"a", 1}));
    ks_cache_free(c);
}

/* An entry keeps its first store's value (so passing it on reads no
 * store), not a second store's; a write outside the cache drops it. One
 * untouched for KS_CACHE_AGE_UPDATES later updates is over. */
static void test_cache_kept_and_age(void)
{
    ks_cache *c = ks_cache_new(1 << 20);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    ks_bytes a = {"a", 1}, small = {"12345678", 8};
    ks_bytes big = {"a value longer than sixteen bytes", 33};
    CU_ASSERT_EQUAL(ks_cache_mark_store(c, a, 0, &small), 0);
    ks_cache_entry *e = ks_cache_find(c, a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(e->kept_store, 0);
    CU_ASSERT_EQUAL(e->kept_len, 8);
    CU_ASSERT_EQUAL(memcmp(e->kept, "12345678", 8), 0);
    size_t before = c->bytes;
    CU_ASSERT_EQUAL(ks_cache_mark_store(c, a, 0, &big), 0);
    CU_ASSERT_EQUAL(e->kept_len, 33);
    CU_ASSERT_EQUAL(memcmp(e->kept, big.data, 33), 0);
    CU_ASSERT_EQUAL(c->bytes, before + 33); /* counted against the size */
    CU_ASSERT_EQUAL(ks_cache_mark_store(c, a, 1, &small), 0); /* a second store */
    CU_ASSERT_EQUAL(e->kept_store, 0);
    CU_ASSERT_EQUAL(e->kept_len, 33);
    CU_ASSERT_EQUAL(ks_cache_mark_store(c, a, 0, NULL), 0); /* deleted */
    CU_ASSERT_EQUAL(e->kept_store, 0);
    CU_ASSERT_PTR_NULL(e->kept);
    CU_ASSERT_EQUAL(c->bytes, before);
    ks_cache_drop_kept(c, a, 0);
    CU_ASSERT_EQUAL(e->kept_store, -1);
    /* age: a stays until KS_CACHE_AGE_UPDATES updates of other keys came */
    char k[16];
    for (int i = 0; i < KS_CACHE_AGE_UPDATES; i++) {
        snprintf(k, sizeof k, "k%d", i);
        CU_ASSERT_EQUAL(ks_cache_mark_store(c, (ks_bytes){k, strlen(k)}, 0, &small), 0);
    }
    CU_ASSERT_PTR_NULL(ks_cache_over(c));
    CU_ASSERT_EQUAL(ks_cache_mark_store(c, (ks_bytes){"z", 1}, 0, &small), 0);
    e = ks_cache_over(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(memcmp(e->rec.key, "a", 1), 0);
    ks_cache_take(c, e);
    ks_cache_entry_free(e);
    CU_ASSERT_PTR_NULL(ks_cache_over(c)); /* k0 is exactly that old: stays */
    ks_cache_free(c);
}

/* The fold estimate: batches whose keys do not repeat make the cache
 * stand aside; batches that repeat keys bring it back. A count whose
 * cache stands aside passes every update on at once. */
static void test_cache_bypass(void)
{
    ks_cache *c = ks_cache_new(1 << 20);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    char k[16];
    for (int i = 0; i < KS_CACHE_SAMPLE - 1; i++) {
        snprintf(k, sizeof k, "u%d", i);
        ks_cache_observe(c, (ks_bytes){k, strlen(k)});
    }
    CU_ASSERT_EQUAL(ks_cache_end_batch(c), -1); /* too few updates to decide */
    CU_ASSERT_EQUAL(c->bypass, 0);
    ks_cache_observe(c, (ks_bytes){"u0", 2}); /* another batch: no repeat */
    CU_ASSERT_EQUAL(ks_cache_end_batch(c), 0);
    CU_ASSERT_EQUAL(c->bypass, 1);
    ks_cache_observe(c, (ks_bytes){"u0", 2}); /* standing aside: not this batch */
    CU_ASSERT_EQUAL(c->sample_updates, 0);
    while (c->batch & 7)
        CU_ASSERT_EQUAL(ks_cache_end_batch(c), -1);
    for (int i = 0; i < KS_CACHE_SAMPLE; i++) {
        snprintf(k, sizeof k, "h%d", i % 10);
        ks_cache_observe(c, (ks_bytes){k, strlen(k)});
    }
    CU_ASSERT(ks_cache_end_batch(c) >= KS_CACHE_RESUME_ABOVE);
    CU_ASSERT_EQUAL(c->bypass, 0);
    /* not with an entry left: it would come out after bypassing updates */
    CU_ASSERT_EQUAL(ks_cache_mark_store(c, (ks_bytes){"left", 4}, 0, NULL), 0);
    for (int i = 0; i < KS_CACHE_SAMPLE; i++) {
        snprintf(k, sizeof k, "v%d", i);
        ks_cache_observe(c, (ks_bytes){k, strlen(k)});
    }
    CU_ASSERT_EQUAL(ks_cache_end_batch(c), -1);
    CU_ASSERT_EQUAL(c->bypass, 0);
    ks_cache_free(c);

    harness *h = &H;
    H_CACHE = 1;
    h_start(h, COUNT_CACHED_YAML);
    H_CACHE = 0;
    for (int i = 0; i < KS_CACHE_SAMPLE; i++) {
        snprintf(k, sizeof k, "u%d", i);
        CU_ASSERT_EQUAL(feed(h, k, "x"), KS_OK);
    }
    CU_ASSERT_EQUAL(h->nout, 0);
    CU_ASSERT_EQUAL(ks_task_flush_caches(h->task), KS_OK);
    CU_ASSERT_EQUAL(h->nout, KS_CACHE_SAMPLE);
    ks_task_cache_end_batch(h->task);
    commit(h);
    CU_ASSERT_EQUAL(feed(h, "a", "x"), KS_OK); /* at once, as without a cache */
    CU_ASSERT_EQUAL(feed(h, "a", "x"), KS_OK);
    CU_ASSERT_EQUAL_FATAL(h->nout, KS_CACHE_SAMPLE + 2);
    CU_ASSERT(out_is_count(h, KS_CACHE_SAMPLE + 1, "a", 2));
    CU_ASSERT_EQUAL(ks_task_cache_count(h->task), 0);
    commit(h);
    assert_store_matches_changelog(h, store_index(h, "counts"));
    h_stop(h);
}

/* A count with its cache: nothing leaves until the flush, then one output
 * and one changelog record per key with its latest count, in the order of
 * the keys' last updates; an aborted batch leaves nothing owed. */
static void test_cache_count_flush(void)
{
    harness *h = &H;
    H_CACHE = 1;
    h_start(h, COUNT_CACHED_YAML);
    H_CACHE = 0;
    int s = store_index(h, "counts");
    const char *keys[] = {"a", "b", "a", "a", "c", "b"};
    for (size_t i = 0; i < 6; i++)
        CU_ASSERT_EQUAL(feed_ts(h, keys[i], "x", 5000 + (int64_t)i), KS_OK);
    CU_ASSERT_EQUAL(h->nout, 0);
    CU_ASSERT_EQUAL(h->ncl, 0);
    CU_ASSERT_EQUAL(stored_count(h, s, "a"), 3); /* the store has every update */
    CU_ASSERT_EQUAL(ks_task_cache_count(h->task), 3);
    CU_ASSERT_EQUAL(ks_task_flush_caches(h->task), KS_OK);
    CU_ASSERT_EQUAL(ks_task_cache_count(h->task), 0);
    CU_ASSERT_EQUAL_FATAL(h->nout, 3);
    CU_ASSERT(out_is_count(h, 0, "a", 3));
    CU_ASSERT_EQUAL(h->out[0].timestamp, 5003); /* the latest update's */
    CU_ASSERT(out_is_count(h, 1, "c", 1));
    CU_ASSERT(out_is_count(h, 2, "b", 2));
    CU_ASSERT_EQUAL_FATAL(h->ncl, 3);
    CU_ASSERT_EQUAL(memcmp(h->cl[0].key, "a", 1), 0);
    CU_ASSERT_EQUAL(ks_int64_decode(h->cl[0].value), 3);
    CU_ASSERT_EQUAL(memcmp(h->cl[2].key, "b", 1), 0);
    commit(h);
    CU_ASSERT_EQUAL(ks_task_checkpoint(h->task, s), 2 + 1);
    assert_store_matches_changelog(h, s);

    /* an aborted batch: its updates are dropped with the store's */
    clear_out(h);
    CU_ASSERT_EQUAL(feed(h, "a", "x"), KS_OK);
    CU_ASSERT_EQUAL(ks_task_cache_count(h->task), 1);
    abort_batch(h);
    CU_ASSERT_EQUAL(ks_task_cache_count(h->task), 0);
    CU_ASSERT_EQUAL(feed(h, "a", "x"), KS_OK);
    CU_ASSERT_EQUAL(ks_task_flush_caches(h->task), KS_OK);
    CU_ASSERT_EQUAL_FATAL(h->nout, 1);
    CU_ASSERT(out_is_count(h, 0, "a", 4));
    commit(h);
    assert_store_matches_changelog(h, s);
    h_stop(h);
}

/* A cache too small for three keys passes the oldest on at once (its
 * changelog record, then its output); `cache_bytes: 0` passes every
 * update on; a windowed node has no cache to size. */
static void test_cache_evict_and_off(void)
{
    harness *h = &H;
    H_CACHE = 1;
    h_start(h, "sources:\n"
               "  in: { topic: in, key: string, value: string }\n"
               "nodes:\n"
               "  - { name: per_key, type: count, from: in, store: counts, cache_bytes: 250 }\n"
               "  - { name: all, type: count, from: in, store: all, cache_bytes: 0 }\n"
               "sinks:\n"
               "  - { name: out, from: per_key, topic: out, key: string, value: int64 }\n");
    H_CACHE = 0;
    int s = store_index(h, "counts");
    CU_ASSERT_EQUAL(feed(h, "a", "x"), KS_OK);
    CU_ASSERT_EQUAL(feed(h, "b", "x"), KS_OK);
    CU_ASSERT_EQUAL(feed(h, "a", "x"), KS_OK);
    CU_ASSERT_EQUAL(h->nout, 0);
    CU_ASSERT_EQUAL(h->ncl, 3); /* the uncached node's three updates */
    CU_ASSERT_EQUAL(feed(h, "c", "x"), KS_OK); /* b, the oldest, must go */
    CU_ASSERT_EQUAL_FATAL(h->nout, 1);
    CU_ASSERT(out_is_count(h, 0, "b", 1));
    CU_ASSERT_EQUAL(h->task->caches[h->topo->nodes[1].index]->evictions, 1);
    CU_ASSERT_EQUAL(ks_task_flush_caches(h->task), KS_OK);
    CU_ASSERT_EQUAL_FATAL(h->nout, 3);
    CU_ASSERT(out_is_count(h, 1, "a", 2));
    CU_ASSERT(out_is_count(h, 2, "c", 1));
    size_t counts_records = 0;
    for (size_t i = 0; i < h->ncl; i++)
        counts_records += h->cl[i].store == s;
    CU_ASSERT_EQUAL(counts_records, 3);
    CU_ASSERT_EQUAL(h->ncl, 3 + 4);
    commit(h);
    assert_store_matches_changelog(h, s);
    h_stop(h);

    ks_pipeline *p = NULL;
    char err[1024] = "";
    const char *windowed =
        "application: a\nkafka: { bootstrap: 127.0.0.1:9092 }\n"
        "plugin_path: [\"" PLUGINS_DIR "\"]\n"
        "sources:\n  in: { topic: in, key: string, value: string }\n"
        "nodes:\n"
        "  - { name: w, type: count, from: in, store: w, cache_bytes: 1MiB,\n"
        "      window: { kind: tumbling, size: 1m } }\n"
        "sinks:\n  - { from: w, topic: o, key: string, value: int64 }\n";
    int rc = ks_pipeline_parse("w.yaml", windowed, strlen(windowed), &p, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "\nparse: %s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    char tmp[] = "/tmp/ks-cache-test-XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmp));
    ks_topology *t = NULL;
    CU_ASSERT_NOT_EQUAL(ks_topology_build(p, ks_host_api_table(), tmp, &t, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "with `window:` has no record cache"));
    nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void ks_test_register_stateful(void)
{
    CU_pSuite s = CU_add_suite("stateful", NULL, NULL);
    CU_add_test(s, "count emits 1,2,3 per key; checkpoint = offset + 1", test_count);
    CU_add_test(s, "count persists across task restart", test_count_persists);
    CU_add_test(s, "abort rolls counts back", test_count_abort);
    CU_add_test(s, "changelog alone restores counts", test_count_restore);
    CU_add_test(s, "count drops null keys and tombstones", test_count_drops);
    CU_add_test(s, "count: store full is fatal", test_count_store_full);
    CU_add_test(s, "aggregate with page_views.zero/add_bytes", test_aggregate);
    CU_add_test(s, "missing or wrong functions refuse the task", test_functions_refused);
    CU_add_test(s, "reduce with page_views.max_bytes", test_reduce);
    CU_add_test(s, "drop_bots drops bots and non-views", test_drop_bots);
    CU_add_test(s, "drop_bots refuses an empty marker", test_drop_bots_empty_marker);
    CU_add_test(s, "examples/page-views/pipeline.yaml", test_page_views_pipeline);
    CU_add_test(s, "record cache: fold, order, evict", test_cache_fold_evict);
    CU_add_test(s, "record cache: count flushes latest per key, abort drops", test_cache_count_flush);
    CU_add_test(s, "record cache: evicts oldest; 0 = off; not windowed", test_cache_evict_and_off);
    CU_add_test(s, "record cache: keeps the value; passes on old keys", test_cache_kept_and_age);
    CU_add_test(s, "record cache: stands aside when keys do not repeat", test_cache_bypass);
}
