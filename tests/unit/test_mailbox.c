/*
 * test_mailbox.c - the shipped `mailbox` processor with the example
 * handler balances.apply (examples/mailbox), run by a real task over real
 * LMDB stores without a broker: results, the idempotency ledger (a repeat
 * of group + topic + partition + offset is "already processed" and
 * re-sends the stored result without running the handler), the ledger row
 * and the handler's writes committed or aborted together, the ledger
 * surviving a task restart, and its retention (`ledger_retention`: old rows
 * pruned in bounded batches, recent ones kept, a pruned replay dropped),
 * also through the public test driver; and the configuration errors of
 * the ledger in PostgreSQL (`ledger_backend: postgres`, no server needed:
 * tests/integration/test_mailbox_pg.c runs it), the password never
 * logged, and which statements a handler's sql_exec refuses.
 */
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "kstreams/testdriver.h"
#include "ledger/ledger_pg.h"
#include "state/store.h"
#include "runtime/task.h"
#include "runtime/topology.h"
#include "unit/test_util.h"

#define MB_PLUGINS_DIR KS_TEST_BUILDDIR "/plugins/.libs"
#define MB_EXAMPLE_DIR KS_TEST_BUILDDIR "/examples/mailbox/.libs"
#define MB_MAX 256

typedef struct mb_out {
    char key[64];
    char value[512];
} mb_out;

typedef struct mb_h {
    char tmp[64], state_dir[128], copy_dir[128];
    ks_topology *topo;
    ks_task *task;
    ks_task_io io;
    mb_out out[MB_MAX];
    size_t nout;
    int64_t next_cl;
    size_t cl_writes;
    size_t cl_deletes; /* tombstones among cl_writes */
} mb_h;

static mb_h M;

static int mb_emit(void *arg, ks_task *task, const ks_topo_node *sink, const ks_record *rec)
{
    (void)task;
    (void)sink;
    mb_h *h = arg;
    if (h->nout == MB_MAX)
        return KS_ERR_NOMEM;
    mb_out *o = &h->out[h->nout++];
    snprintf(o->key, sizeof o->key, "%.*s", (int)rec->key_len, (const char *)rec->key);
    snprintf(o->value, sizeof o->value, "%.*s", (int)rec->value_len,
             (const char *)rec->value);
    return 0;
}

static int mb_changelog(void *arg, ks_task *task, int store, ks_bytes key,
                        const ks_bytes *value)
{
    (void)key;
    (void)value;
    mb_h *h = arg;
    h->cl_writes++;
    if (!value)
        h->cl_deletes++;
    task->changelog_hi[store] = h->next_cl++;
    return 0;
}

static int mb_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Build the topology and task 0 over h->tmp; `cfg` is the mailbox node's
 * `config:` (YAML flow text) or NULL. Returns 0; -1 when the pipeline or
 * the topology (config schema) is refused; -2 when the task (init) is; err
 * says why. */
/* The example's mailbox node between its source and sink; the three %s
 * are an optional "    config: {...}" line. */
#define MAILBOX_TOPOLOGY                                                                   \
    "sources:\n"                                                                           \
    "  commands: { topic: mailbox, key: string, value: json }\n"                           \
    "nodes:\n"                                                                             \
    "  - name: mailbox\n"                                                                  \
    "    type: mailbox\n"                                                                  \
    "    from: commands\n"                                                                 \
    "    stores: [ledger, balances]\n"                                                     \
    "    functions: { handler: balances.apply }\n"                                         \
    "%s%s%s"                                                                               \
    "sinks:\n"                                                                             \
    "  - { from: mailbox, topic: bank-outbox-results, key: string, value: json }\n"

static int mb_open(mb_h *h, const char *cfg, char *err, size_t errlen)
{
    char yaml[4096];
    int n = snprintf(yaml, sizeof yaml,
                     "application: bank\n"
                     "kafka: { bootstrap: 127.0.0.1:9092 }\n"
                     "state_dir: \"%s\"\n"
                     "plugin_path: [\"%s\", \"%s\"]\n"
                     MAILBOX_TOPOLOGY,
                     h->state_dir, MB_PLUGINS_DIR, MB_EXAMPLE_DIR, cfg ? "    config: " : "",
                     cfg ? cfg : "", cfg ? "\n" : "");
    ks_pipeline *p = NULL;
    if (ks_pipeline_parse("mailbox.yaml", yaml, (size_t)n, &p, err, errlen) != 0)
        return -1;
    if (ks_topology_build(p, ks_host_api_table(), h->copy_dir, &h->topo, err, errlen) != 0)
        return -1; /* the topology owns p from here, also on failure */
    h->io = (ks_task_io){.arg = h, .emit = mb_emit, .changelog = mb_changelog};
    if (ks_task_create(h->topo, 0, &h->io, &h->task, err, errlen) != 0) {
        ks_topology_free(h->topo);
        h->topo = NULL;
        return -2;
    }
    return 0;
}

/* A fresh h over a new temporary directory. */
static void mb_dirs(mb_h *h)
{
    memset(h, 0, sizeof *h);
    snprintf(h->tmp, sizeof h->tmp, "/tmp/ks-mailbox-test-XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(h->tmp));
    snprintf(h->state_dir, sizeof h->state_dir, "%.63s/state", h->tmp);
    snprintf(h->copy_dir, sizeof h->copy_dir, "%.63s/copies", h->tmp);
}

static void mb_start_cfg(mb_h *h, const char *cfg)
{
    mb_dirs(h);
    char err[1024] = "";
    int rc = mb_open(h, cfg, err, sizeof err);
    if (rc)
        fprintf(stderr, "\nopen: %s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
}

static void mb_start(mb_h *h) { mb_start_cfg(h, NULL); }

/* Stop the task and drop the topology, keeping the state directory (a
 * redeploy with another config). */
static void mb_close_keep(mb_h *h)
{
    ks_task_destroy(h->task);
    ks_topology_free(h->topo);
    h->task = NULL;
    h->topo = NULL;
}

static void mb_reopen(mb_h *h)
{
    char err[1024] = "";
    ks_task_destroy(h->task);
    int rc = ks_task_create(h->topo, 0, &h->io, &h->task, err, sizeof err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
}

static void mb_stop(mb_h *h)
{
    ks_task_destroy(h->task);
    ks_topology_free(h->topo);
    nftw(h->tmp, mb_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* A command at `offset` of partition 0 with event id `id` (32 bytes). */
static ks_verdict cmd_id(mb_h *h, int64_t offset, const char *id, const char *user,
                         const char *payload, int with_id)
{
    ks_header hd = {"ks.event_id", id, 32};
    ks_record rec = {.key = user,
                     .key_len = strlen(user),
                     .value = payload,
                     .value_len = strlen(payload),
                     .timestamp = 1000 + offset,
                     .topic = "mailbox",
                     .partition = 0,
                     .offset = offset,
                     .headers = with_id ? &hd : NULL,
                     .header_count = with_id ? 1 : 0};
    return ks_task_process(h->task, &h->topo->nodes[0], &rec);
}

/* A command at `offset` of partition 0 with event id "0..0<offset>". */
static ks_verdict cmd(mb_h *h, int64_t offset, const char *user, const char *payload,
                      int with_id)
{
    char id[33];
    snprintf(id, sizeof id, "%032lld", (long long)offset);
    return cmd_id(h, offset, id, user, payload, with_id);
}

static int store_idx(mb_h *h, const char *name)
{
    const ks_pipeline *p = h->topo->pipeline;
    for (size_t s = 0; s < p->store_count; s++)
        if (strcmp(p->stores[s].name, name) == 0)
            return (int)s;
    return -1;
}

static int64_t balance(mb_h *h, const char *user)
{
    ks_bytes v;
    if (ks_store_get(h->task->dbs[store_idx(h, "balances")], (ks_bytes){user, strlen(user)},
                     &v) != 0 ||
        v.len != 8)
        return -1;
    return ks_int64_decode(v.data);
}

static int ledger_has(mb_h *h, int64_t offset)
{
    char k[128];
    int n = snprintf(k, sizeof k, "ks.ledger/bank/mailbox/0/%020lld", (long long)offset);
    ks_bytes v;
    return ks_store_get(h->task->dbs[store_idx(h, "ledger")], (ks_bytes){k, (size_t)n}, &v) ==
           0;
}

static int out_has(const mb_h *h, size_t i, int64_t offset, const char *status,
                   const char *result)
{
    char id[33];
    snprintf(id, sizeof id, "%032lld", (long long)offset);
    if (i >= h->nout || strcmp(h->out[i].key, id) != 0)
        return 0;
    char want[256];
    snprintf(want, sizeof want, "\"status\":\"%s\",\"result\":%s", status, result);
    if (!strstr(h->out[i].value, want)) {
        printf("\n  out[%zu] = %s (want %s)\n", i, h->out[i].value, want);
        return 0;
    }
    return 1;
}

static void test_results(void)
{
    mb_h *h = &M;
    mb_start(h);
    CU_ASSERT_EQUAL(cmd(h, 0, "u1", "{\"op\":\"deposit\",\"amount\":10}", 1), KS_OK);
    CU_ASSERT_EQUAL(cmd(h, 1, "u1", "{\"op\":\"debit\",\"amount\":15}", 1), KS_OK);
    CU_ASSERT_EQUAL(cmd(h, 2, "u1", "{\"op\":\"debit\",\"amount\":4}", 1), KS_OK);
    CU_ASSERT_EQUAL(cmd(h, 3, "u2", "{\"op\":\"debit\",\"amount\":1}", 1), KS_OK);
    CU_ASSERT_EQUAL_FATAL(h->nout, 4);
    CU_ASSERT(out_has(h, 0, 0, "SUCCESS", "{\"balance\":10}"));
    CU_ASSERT(out_has(h, 1, 1, "PUSHED_FAILURE",
                      "{\"error\":\"insufficient funds\",\"balance\":10}"));
    CU_ASSERT(out_has(h, 2, 2, "SUCCESS", "{\"balance\":6}"));
    CU_ASSERT(out_has(h, 3, 3, "PUSHED_FAILURE",
                      "{\"error\":\"insufficient funds\",\"balance\":0}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h->out[0].value, "\"user\":\"u1\""));
    CU_ASSERT_EQUAL(ks_task_commit_stores(h->task), 0);
    CU_ASSERT_EQUAL(balance(h, "u1"), 6);
    CU_ASSERT_EQUAL(balance(h, "u2"), -1); /* refused: nothing written */
    for (int64_t o = 0; o < 4; o++)
        CU_ASSERT(ledger_has(h, o));
    /* a command without an event id cannot report: poison */
    CU_ASSERT_EQUAL(cmd(h, 4, "u1", "{\"op\":\"deposit\",\"amount\":1}", 0), KS_SKIP);
    CU_ASSERT_EQUAL(h->nout, 4);
    ks_task_abort_stores(h->task);
    mb_stop(h);
}

static void test_already_processed(void)
{
    mb_h *h = &M;
    mb_start(h);
    CU_ASSERT_EQUAL(cmd(h, 7, "u1", "{\"op\":\"deposit\",\"amount\":10}", 1), KS_OK);
    CU_ASSERT_EQUAL(ks_task_commit_stores(h->task), 0);
    size_t writes = h->cl_writes;
    /* the same group + topic + partition + offset again (a replay after a
     * crash between the store commit and the offset commit) */
    CU_ASSERT_EQUAL(cmd(h, 7, "u1", "{\"op\":\"deposit\",\"amount\":10}", 1), KS_OK);
    CU_ASSERT_EQUAL(ks_task_commit_stores(h->task), 0);
    CU_ASSERT_EQUAL(balance(h, "u1"), 10); /* not redone */
    CU_ASSERT_EQUAL(h->cl_writes, writes); /* nothing written */
    CU_ASSERT_EQUAL_FATAL(h->nout, 2);
    /* the stored result is sent again: reconciles a missing SUCCESS */
    CU_ASSERT_STRING_EQUAL(h->out[1].key, h->out[0].key);
    CU_ASSERT_STRING_EQUAL(h->out[1].value, h->out[0].value);
    /* also after a restart of the task (the ledger is on disk) */
    mb_reopen(h);
    CU_ASSERT_EQUAL(cmd(h, 7, "u1", "{\"op\":\"deposit\",\"amount\":10}", 1), KS_OK);
    CU_ASSERT_EQUAL(ks_task_commit_stores(h->task), 0);
    CU_ASSERT_EQUAL(balance(h, "u1"), 10);
    CU_ASSERT_EQUAL(h->nout, 3);
    /* another offset is another command */
    CU_ASSERT_EQUAL(cmd(h, 8, "u1", "{\"op\":\"deposit\",\"amount\":10}", 1), KS_OK);
    CU_ASSERT_EQUAL(ks_task_commit_stores(h->task), 0);
    CU_ASSERT_EQUAL(balance(h, "u1"), 20);
    mb_stop(h);
}

/* A ledger row is for one event: another event at its offset (a recreated
 * topic) stops the task rather than being skipped as a repeat; rows of
 * 0.1.x, without the event id, are still repeats. */
static void test_ledger_other_event(void)
{
    mb_h *h = &M;
    mb_start(h);
    CU_ASSERT_EQUAL(cmd(h, 7, "u1", "{\"op\":\"deposit\",\"amount\":10}", 1), KS_OK);
    CU_ASSERT_EQUAL(ks_task_commit_stores(h->task), 0);
    CU_ASSERT_EQUAL_FATAL(h->nout, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(h->out[0].value, "\"event\":\"" /* offset 7's id */
                                                   "00000000000000000000000000000007\""));
    const char *other = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    CU_ASSERT_EQUAL(cmd_id(h, 7, other, "u1", "{\"op\":\"deposit\",\"amount\":5}", 1),
                    KS_FATAL);
    ks_task_abort_stores(h->task);
    CU_ASSERT_EQUAL(h->nout, 1);           /* no result sent */
    CU_ASSERT_EQUAL(balance(h, "u1"), 10); /* handler not run */
    /* a 0.1.x row (no "event"): a repeat, as before */
    char k[128];
    int n = snprintf(k, sizeof k, "ks.ledger/bank/mailbox/0/%020lld", 9LL);
    const char *old = "{\"status\":\"SUCCESS\",\"result\":{\"balance\":1},\"user\":\"u1\"}";
    CU_ASSERT_EQUAL_FATAL(ks_store_begin(h->task->env), 0);
    CU_ASSERT_EQUAL(ks_store_put(h->task->dbs[store_idx(h, "ledger")], (ks_bytes){k, (size_t)n},
                                 (ks_bytes){old, strlen(old)}),
                    0);
    CU_ASSERT_EQUAL(ks_task_commit_stores(h->task), 0);
    CU_ASSERT_EQUAL(cmd_id(h, 9, other, "u1", "{\"op\":\"deposit\",\"amount\":5}", 1),
                    KS_OK);
    CU_ASSERT_EQUAL_FATAL(h->nout, 2);
    CU_ASSERT_STRING_EQUAL(h->out[1].value, old); /* the stored result, again */
    CU_ASSERT_EQUAL(balance(h, "u1"), 10);
    ks_task_abort_stores(h->task);
    mb_stop(h);
}

static void test_ledger_atomic(void)
{
    mb_h *h = &M;
    mb_start(h);
    CU_ASSERT_EQUAL(cmd(h, 0, "u1", "{\"op\":\"deposit\",\"amount\":5}", 1), KS_OK);
    CU_ASSERT_EQUAL(ks_task_commit_stores(h->task), 0);
    /* a batch that aborts (its Kafka transaction failed): the ledger row
     * and the balance go together */
    CU_ASSERT_EQUAL(cmd(h, 1, "u1", "{\"op\":\"deposit\",\"amount\":3}", 1), KS_OK);
    CU_ASSERT_EQUAL(balance(h, "u1"), 8);
    CU_ASSERT(ledger_has(h, 1));
    ks_task_abort_stores(h->task);
    CU_ASSERT_EQUAL(balance(h, "u1"), 5);
    CU_ASSERT(!ledger_has(h, 1));
    /* the replay of that batch runs the handler (once) */
    CU_ASSERT_EQUAL(cmd(h, 1, "u1", "{\"op\":\"deposit\",\"amount\":3}", 1), KS_OK);
    CU_ASSERT_EQUAL(ks_task_commit_stores(h->task), 0);
    CU_ASSERT_EQUAL(balance(h, "u1"), 8);
    CU_ASSERT(ledger_has(h, 1));
    mb_stop(h);
}

/* ---- retention ------------------------------------------------------ */

/* plugins/mailbox.c: a partition is pruned at most once per PRUNE_EVERY
 * offsets, at most PRUNE_MAX rows at a time. */
#define PRUNE_EVERY 64
#define PRUNE_MAX 256
#define LEDGER_P0 "ks.ledger/bank/mailbox/0/"

typedef struct rows {
    uint64_t count;   /* offset rows */
    int64_t lo, hi;   /* their smallest and largest offset */
    int64_t horizon;  /* the horizon row's value, -1 when absent */
    uint64_t other;   /* any other key under the prefix */
} rows;

static int rows_cb(void *arg, ks_bytes key, ks_bytes value)
{
    rows *r = arg;
    size_t plen = sizeof LEDGER_P0 - 1;
    const char *k = key.data;
    if (key.len < plen || memcmp(k, LEDGER_P0, plen) != 0) {
        r->other++;
        return 0;
    }
    if (key.len == plen + 7 && memcmp(k + plen, "horizon", 7) == 0) {
        char text[32];
        snprintf(text, sizeof text, "%.*s", (int)value.len, (const char *)value.data);
        r->horizon = strtoll(text, NULL, 10);
        return 0;
    }
    if (key.len != plen + 20) {
        r->other++;
        return 0;
    }
    char text[21];
    memcpy(text, k + plen, 20);
    text[20] = '\0';
    int64_t o = strtoll(text, NULL, 10);
    if (r->count == 0 || o < r->lo)
        r->lo = o;
    if (r->count == 0 || o > r->hi)
        r->hi = o;
    r->count++;
    return 0;
}

static rows ledger_rows(mb_h *h)
{
    rows r = {.horizon = -1};
    CU_ASSERT_EQUAL(ks_store_range(h->task->dbs[store_idx(h, "ledger")], (ks_bytes){NULL, 0},
                                   (ks_bytes){NULL, 0}, rows_cb, &r),
                    0);
    return r;
}

/* Commands offset from..to-1 of partition 0, each a deposit of 1 for u1,
 * committed every 100 as the engine's batches would be. */
static void deposits(mb_h *h, int64_t from, int64_t to)
{
    for (int64_t o = from; o < to; o++) {
        h->nout = 0;
        CU_ASSERT_EQUAL_FATAL(cmd(h, o, "u1", "{\"op\":\"deposit\",\"amount\":1}", 1), KS_OK);
        if (o % 100 == 99)
            CU_ASSERT_EQUAL(ks_task_commit_stores(h->task), 0);
    }
    CU_ASSERT_EQUAL(ks_task_commit_stores(h->task), 0);
}

static void test_retention(void)
{
    mb_h *h = &M;
    mb_start_cfg(h, "{ ledger_retention: 50 }");
    deposits(h, 0, 1000);
    CU_ASSERT_EQUAL(balance(h, "u1"), 1000);
    rows r = ledger_rows(h);
    /* the newest 50 offsets always; at most PRUNE_EVERY - 1 more between
     * two prunes (the last one ran at 960: rows 911..999) */
    CU_ASSERT(r.count >= 50 && r.count < 50 + PRUNE_EVERY);
    CU_ASSERT_EQUAL(r.hi, 999);
    CU_ASSERT_EQUAL(r.count, (uint64_t)(r.hi - r.lo + 1)); /* no holes */
    CU_ASSERT_EQUAL(r.horizon, r.lo);
    CU_ASSERT_EQUAL(r.other, 0);
    for (int64_t o = 950; o < 1000; o++)
        CU_ASSERT(ledger_has(h, o));
    CU_ASSERT(!ledger_has(h, 0));
    CU_ASSERT(!ledger_has(h, 500));
    CU_ASSERT(!ledger_has(h, 900));
    /* one tombstone per pruned row, none for absent keys */
    CU_ASSERT_EQUAL(h->cl_deletes, 1000 - r.count);

    /* a replay of a recent offset is still "already processed" */
    size_t writes = h->cl_writes;
    h->nout = 0;
    CU_ASSERT_EQUAL(cmd(h, 990, "u1", "{\"op\":\"deposit\",\"amount\":1}", 1), KS_OK);
    CU_ASSERT_EQUAL(ks_task_commit_stores(h->task), 0);
    CU_ASSERT_EQUAL(balance(h, "u1"), 1000); /* handler not rerun */
    CU_ASSERT_EQUAL_FATAL(h->nout, 1);       /* stored result re-sent */
    CU_ASSERT(out_has(h, 0, 990, "SUCCESS", "{\"balance\":991}"));
    /* a replay below the horizon: its row is gone, but it was processed;
     * dropped: no handler, no result, nothing written */
    h->nout = 0;
    CU_ASSERT_EQUAL(cmd(h, 10, "u1", "{\"op\":\"deposit\",\"amount\":1}", 1), KS_OK);
    CU_ASSERT_EQUAL(ks_task_commit_stores(h->task), 0);
    CU_ASSERT_EQUAL(balance(h, "u1"), 1000);
    CU_ASSERT_EQUAL(h->nout, 0);
    CU_ASSERT_EQUAL(h->cl_writes, writes);
    /* the same after a restart: the horizon is in the store */
    mb_reopen(h);
    CU_ASSERT_EQUAL(cmd(h, 10, "u1", "{\"op\":\"deposit\",\"amount\":1}", 1), KS_OK);
    CU_ASSERT_EQUAL(cmd(h, 995, "u1", "{\"op\":\"deposit\",\"amount\":1}", 1), KS_OK);
    CU_ASSERT_EQUAL(ks_task_commit_stores(h->task), 0);
    CU_ASSERT_EQUAL(balance(h, "u1"), 1000);
    CU_ASSERT_EQUAL(h->nout, 1); /* only 995's result */
    CU_ASSERT_EQUAL(h->cl_writes, writes);
    /* new commands go on being pruned after the restart */
    deposits(h, 1000, 1100);
    CU_ASSERT_EQUAL(balance(h, "u1"), 1100);
    r = ledger_rows(h);
    CU_ASSERT(r.count >= 50 && r.count < 50 + PRUNE_EVERY);
    CU_ASSERT_EQUAL(r.hi, 1099);
    mb_stop(h);
}

static void test_retention_bounded(void)
{
    mb_h *h = &M;
    mb_start(h); /* the default retention keeps every row of a short run */
    deposits(h, 0, 600);
    rows r = ledger_rows(h);
    CU_ASSERT_EQUAL(r.count, 600);
    CU_ASSERT_EQUAL(r.horizon, -1);
    CU_ASSERT_EQUAL(h->cl_deletes, 0);
    /* redeployed with a small retention: the backlog goes in bounded
     * batches, not in one record's batch */
    mb_close_keep(h);
    char err[1024] = "";
    CU_ASSERT_EQUAL_FATAL(mb_open(h, "{ ledger_retention: 10 }", err, sizeof err), 0);
    deposits(h, 600, 601);
    CU_ASSERT_EQUAL(h->cl_deletes, PRUNE_MAX);
    r = ledger_rows(h);
    CU_ASSERT_EQUAL(r.count, 601 - PRUNE_MAX);
    CU_ASSERT_EQUAL(r.lo, PRUNE_MAX);
    CU_ASSERT_EQUAL(r.horizon, 600 - 10 + 1);
    /* prunes at 664, 728, 792: 256 + 256 + the rest below 783 */
    deposits(h, 601, 800);
    r = ledger_rows(h);
    CU_ASSERT_EQUAL(r.lo, 792 - 10 + 1);
    CU_ASSERT_EQUAL(r.hi, 799);
    CU_ASSERT_EQUAL(r.count, 800 - 783);
    CU_ASSERT_EQUAL(h->cl_deletes, 783);
    CU_ASSERT_EQUAL(balance(h, "u1"), 800);
    mb_stop(h);
}

/* Run f with fd 2 going to a file; return what it wrote (static). */
static const char *capture_stderr(int (*f)(mb_h *, char *, size_t), mb_h *h, char *err,
                                  size_t errlen, int *rc)
{
    static char text[8192];
    char path[160];
    snprintf(path, sizeof path, "%s/stderr.txt", h->tmp);
    fflush(stderr);
    int saved = dup(2);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CU_ASSERT_FATAL(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    *rc = f(h, err, errlen);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    text[n > 0 ? n : 0] = '\0';
    return text;
}

static int open_negative(mb_h *h, char *err, size_t errlen)
{
    return mb_open(h, "{ ledger_retention: -5 }", err, errlen);
}

static void test_retention_config(void)
{
    mb_h *h = &M;
    mb_dirs(h);
    char err[1024] = "";
    /* not a number: the schema refuses it at the value */
    CU_ASSERT_EQUAL(mb_open(h, "{ ledger_retention: lots }", err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "mailbox.yaml:13:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(
        err, "config key 'ledger_retention' of node 'mailbox' must be an integer, found 'lots'"));
    /* negative: init refuses it, and the log says which node and key */
    int rc;
    err[0] = '\0';
    const char *log = capture_stderr(open_negative, h, err, sizeof err, &rc);
    CU_ASSERT_EQUAL(rc, -2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "init of node 'mailbox'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "node 'mailbox': config key 'ledger_retention' must be 0 "
                                       "(keep every ledger row) or a number of offsets per "
                                       "partition >= 1, found -5"));
    if (!strstr(log, "ledger_retention"))
        printf("\n  log: %s\n", log);
    /* 0 is valid: keep every row */
    CU_ASSERT_EQUAL(mb_open(h, "{ ledger_retention: 0 }", err, sizeof err), 0);
    deposits(h, 0, 200);
    rows r = ledger_rows(h);
    CU_ASSERT_EQUAL(r.count, 200);
    CU_ASSERT_EQUAL(r.horizon, -1);
    mb_stop(h);
}

/* ---- the ledger in PostgreSQL: configuration and refusals -------------- */

static int open_pg_unset(mb_h *h, char *err, size_t errlen)
{
    unsetenv("KS_UNIT_NO_SUCH_DSN");
    return mb_open(h, "{ ledger_backend: postgres, ledger_dsn_env: KS_UNIT_NO_SUCH_DSN }", err,
                   errlen);
}

static int open_pg_nothing(mb_h *h, char *err, size_t errlen)
{
    return mb_open(h, "{ ledger_backend: postgres }", err, errlen);
}

static int open_pg_bad_backend(mb_h *h, char *err, size_t errlen)
{
    return mb_open(h, "{ ledger_backend: mysql }", err, errlen);
}

/* nothing listens on port 1: the connection fails at init */
static int open_pg_refused(mb_h *h, char *err, size_t errlen)
{
    setenv("KS_UNIT_PG_DSN",
           "host=127.0.0.1 port=1 dbname=bank user=bank password=s3cr3t-pw connect_timeout=2",
           1);
    return mb_open(h, "{ ledger_backend: postgres, ledger_dsn_env: KS_UNIT_PG_DSN }", err,
                   errlen);
}

static void test_pg_config(void)
{
    mb_h *h = &M;
    mb_dirs(h);
    char err[1024] = "";
    int rc;
    const char *log = capture_stderr(open_pg_unset, h, err, sizeof err, &rc);
    CU_ASSERT_EQUAL(rc, -2);
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "node 'mailbox': the environment variable "
                                       "KS_UNIT_NO_SUCH_DSN (ledger_dsn_env) is not set"));
    log = capture_stderr(open_pg_nothing, h, err, sizeof err, &rc);
    CU_ASSERT_EQUAL(rc, -2);
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "`ledger_backend: postgres` needs `ledger_dsn_env` or "
                                       "an `outbox: { backend: postgres }`"));
    log = capture_stderr(open_pg_bad_backend, h, err, sizeof err, &rc);
    CU_ASSERT_EQUAL(rc, -2);
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "config key 'ledger_backend' must be store or postgres, "
                                       "found 'mysql'"));
#ifdef KS_HAVE_POSTGRES
    log = capture_stderr(open_pg_refused, h, err, sizeof err, &rc);
    CU_ASSERT_EQUAL(rc, -2);
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "ledger: PostgreSQL unreachable"));
    CU_ASSERT_PTR_NULL(strstr(log, "s3cr3t-pw"));
#else
    (void)open_pg_refused;
#endif
}

static void test_pg_txn_control(void)
{
    static const char *const refused[] = {"COMMIT", "  rollback", "BEGIN", "begin isolation "
                                          "level serializable", "START TRANSACTION",
                                          "SAVEPOINT x", "release savepoint x", "END",
                                          "abort", "PREPARE TRANSACTION 'x'", "SET search_path "
                                          "= evil", "set local statement_timeout = 0",
                                          "(COMMIT)", "Reset all", "discard all"};
    static const char *const allowed[] = {"SELECT 1", "INSERT INTO t VALUES ($1)",
                                          "update t set a = 1", "WITH x AS (SELECT 1) "
                                          "SELECT * FROM x", "DELETE FROM t",
                                          "LOCK TABLE t", "SELECT 'COMMIT'", "settings",
                                          "beginning", ""};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        CU_ASSERT_EQUAL(ks_ledger_sql_is_txn_control(refused[i]), 1);
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        CU_ASSERT_EQUAL(ks_ledger_sql_is_txn_control(allowed[i]), 0);
    /* outside a handler (no ledger transaction): misuse, whatever the SQL */
    CU_ASSERT_EQUAL(ks_ledger_exec(NULL, "SELECT 1", 0, NULL, NULL, NULL), KS_FATAL);
}

/* ---- the same through the public test driver ------------------------- */

typedef struct drv_rows {
    uint64_t offsets, horizons;
} drv_rows;

static int drv_rows_cb(void *arg, ks_bytes key, ks_bytes value)
{
    (void)value;
    drv_rows *r = arg;
    size_t plen = sizeof LEDGER_P0 - 1;
    if (key.len == plen + 20)
        r->offsets++;
    else if (key.len == plen + 7 && memcmp((const char *)key.data + plen, "horizon", 7) == 0)
        r->horizons++;
    return 0;
}

static ks_driver *driver_run(const char *cfg, int commands)
{
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "application: bank\n"
             "kafka: { bootstrap: 127.0.0.1:9092 }\n"
             MAILBOX_TOPOLOGY,
             cfg ? "    config: " : "", cfg ? cfg : "", cfg ? "\n" : "");
    ks_driver_options opt = {.plugin_path = MB_PLUGINS_DIR ":" MB_EXAMPLE_DIR};
    ks_driver *drv = NULL;
    char err[1024] = "";
    int rc = ks_driver_open_text("mailbox.yaml", yaml, strlen(yaml), &opt, &drv, err, sizeof err);
    if (rc)
        fprintf(stderr, "\nopen: %s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    const char *payload = "{\"op\":\"deposit\",\"amount\":1}";
    for (int i = 0; i < commands; i++) {
        char id[33];
        snprintf(id, sizeof id, "%032d", i);
        ks_header hd = {"ks.event_id", id, 32};
        ks_record rec = {.key = "u1",
                         .key_len = 2,
                         .value = payload,
                         .value_len = strlen(payload),
                         .timestamp = 1000 + i,
                         .partition = 0,
                         .headers = &hd,
                         .header_count = 1};
        CU_ASSERT_EQUAL_FATAL(ks_driver_pipe_record(drv, "commands", &rec), 0);
    }
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, "bank-outbox-results"), (size_t)commands);
    return drv;
}

static void test_retention_driver(void)
{
    /* default: a short run keeps every row */
    ks_driver *drv = driver_run(NULL, 300);
    uint64_t n = 0;
    CU_ASSERT_EQUAL(ks_driver_store_count(drv, "ledger", &n), 0);
    CU_ASSERT_EQUAL(n, 300);
    drv_rows r = {0};
    CU_ASSERT_EQUAL(ks_driver_store_range(drv, "ledger", 0, LEDGER_P0, sizeof LEDGER_P0 - 1, NULL,
                                          0, drv_rows_cb, &r),
                    0);
    CU_ASSERT_EQUAL(r.offsets, 300);
    CU_ASSERT_EQUAL(r.horizons, 0);
    ks_driver_close(drv);
    /* ledger_retention: 20 keeps the newest 20 offsets (and up to 63 more
     * until the next prune) and the horizon row */
    drv = driver_run("{ ledger_retention: 20 }", 300);
    r = (drv_rows){0};
    CU_ASSERT_EQUAL(ks_driver_store_range(drv, "ledger", 0, LEDGER_P0, sizeof LEDGER_P0 - 1, NULL,
                                          0, drv_rows_cb, &r),
                    0);
    CU_ASSERT(r.offsets >= 20 && r.offsets < 20 + PRUNE_EVERY);
    CU_ASSERT_EQUAL(r.horizons, 1);
    CU_ASSERT_EQUAL(ks_driver_store_count(drv, "ledger", &n), 0);
    CU_ASSERT_EQUAL(n, r.offsets + 1);
    ks_driver_close(drv);
}

void ks_test_register_mailbox(void)
{
    CU_pSuite s = CU_add_suite("mailbox", NULL, NULL);
    CU_add_test(s, "mailbox: SUCCESS / PUSHED_FAILURE results per command", test_results);
    CU_add_test(s, "mailbox: a repeat is already processed, result re-sent",
                test_already_processed);
    CU_add_test(s, "mailbox: another event at a ledger row's offset stops the task",
                test_ledger_other_event);
    CU_add_test(s, "mailbox: ledger row and handler writes commit or abort together",
                test_ledger_atomic);
    CU_add_test(s, "mailbox: ledger_retention prunes old rows, recent replays still answered",
                test_retention);
    CU_add_test(s, "mailbox: pruning goes in bounded batches; the default keeps a short run",
                test_retention_bounded);
    CU_add_test(s, "mailbox: ledger_retention config errors name node and key",
                test_retention_config);
    CU_add_test(s, "mailbox: retention through the test driver", test_retention_driver);
    CU_add_test(s, "mailbox: postgres ledger config errors, the password never logged",
                test_pg_config);
    CU_add_test(s, "mailbox: sql_exec refuses transaction control and use outside a handler",
                test_pg_txn_control);
}
