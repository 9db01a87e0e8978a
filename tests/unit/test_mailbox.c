/*
 * test_mailbox.c - the shipped `mailbox` processor with the example
 * handler balances.apply (examples/mailbox), run by a real task over real
 * LMDB stores without a broker: results, the idempotency ledger (a repeat
 * of group + topic + partition + offset is "already processed" and
 * re-sends the stored result without running the handler), the ledger row
 * and the handler's writes committed or aborted together, and the ledger
 * surviving a task restart.
 */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "store.h"
#include "task.h"
#include "topology.h"
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

static void mb_start(mb_h *h)
{
    memset(h, 0, sizeof *h);
    snprintf(h->tmp, sizeof h->tmp, "/tmp/ks-mailbox-test-XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(h->tmp));
    snprintf(h->state_dir, sizeof h->state_dir, "%s/state", h->tmp);
    snprintf(h->copy_dir, sizeof h->copy_dir, "%s/copies", h->tmp);
    char yaml[4096];
    int n = snprintf(yaml, sizeof yaml,
                     "application: bank\n"
                     "kafka: { bootstrap: 127.0.0.1:9092 }\n"
                     "state_dir: \"%s\"\n"
                     "plugin_path: [\"%s\", \"%s\"]\n"
                     "sources:\n"
                     "  commands: { topic: mailbox, key: string, value: json }\n"
                     "nodes:\n"
                     "  - name: mailbox\n"
                     "    type: mailbox\n"
                     "    from: commands\n"
                     "    stores: [ledger, balances]\n"
                     "    functions: { handler: balances.apply }\n"
                     "sinks:\n"
                     "  - { from: mailbox, topic: bank-outbox-results, key: string, "
                     "value: json }\n",
                     h->state_dir, MB_PLUGINS_DIR, MB_EXAMPLE_DIR);
    ks_pipeline *p = NULL;
    char err[1024] = "";
    int rc = ks_pipeline_parse("mailbox.yaml", yaml, (size_t)n, &p, err, sizeof err);
    if (rc)
        fprintf(stderr, "\nparse: %s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    rc = ks_topology_build(p, ks_host_api_table(), h->copy_dir, &h->topo, err, sizeof err);
    if (rc)
        fprintf(stderr, "\ntopology: %s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    h->io = (ks_task_io){.arg = h, .emit = mb_emit, .changelog = mb_changelog};
    rc = ks_task_create(h->topo, 0, &h->io, &h->task, err, sizeof err);
    if (rc)
        fprintf(stderr, "\ntask: %s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
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

/* A command at `offset` of partition 0 with event id "e..<n>". */
static ks_verdict cmd(mb_h *h, int64_t offset, const char *user, const char *payload,
                      int with_id)
{
    char id[33];
    snprintf(id, sizeof id, "%032lld", (long long)offset);
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

void ks_test_register_mailbox(void)
{
    CU_pSuite s = CU_add_suite("mailbox", NULL, NULL);
    CU_add_test(s, "mailbox: SUCCESS / PUSHED_FAILURE results per command", test_results);
    CU_add_test(s, "mailbox: a repeat is already processed, result re-sent",
                test_already_processed);
    CU_add_test(s, "mailbox: ledger row and handler writes commit or abort together",
                test_ledger_atomic);
}
