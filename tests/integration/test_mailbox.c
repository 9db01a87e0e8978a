/*
 * test_mailbox.c - outbox -> dispatcher -> mailbox -> results -> outbox row,
 * against the real broker, with real `kstreams run` processes.
 *
 * 20 users (5 per partition of a 4-partition mailbox topic) send 10
 * commands each over HTTP: deposits and debits whose outcome depends on
 * the order (a debit over the balance is refused: PUSHED_FAILURE). A
 * reference computes, per command, the status and the balance after it.
 *
 *   1. all in one engine: every row ends SUCCESS or PUSHED_FAILURE as the
 *      reference says, with the reference's balance in its result (so each
 *      user's commands ran in order, each exactly once), and the results
 *      topic holds each event id exactly once
 *   2. the outbox and the mailbox in two engine processes (two
 *      applications), the mailbox engine killed with SIGKILL mid-stream and
 *      restarted: the same checks
 */
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "itest.h"

#define USERS 20
#define PER_USER 10
#define PARTS 4
#define N (USERS * PER_USER)

static char dir[256];
static char ids[USERS][PER_USER][40];
static int want_ok[USERS][PER_USER];
static long want_balance[USERS][PER_USER];

/* --- commands and their reference -------------------------------------- */

static void command(int u, int k, char *op, long *amount)
{
    if (k % 3 == 0) {
        strcpy(op, "deposit");
        *amount = 1 + (u * 7 + k * 13) % 10;
    } else {
        strcpy(op, "debit");
        *amount = 1 + (u * 11 + k * 5) % 8;
    }
}

static void reference(void)
{
    for (int u = 0; u < USERS; u++) {
        long b = 0;
        for (int k = 0; k < PER_USER; k++) {
            char op[16];
            long a;
            command(u, k, op, &a);
            if (strcmp(op, "deposit") == 0)
                b += a, want_ok[u][k] = 1;
            else if (a > b)
                want_ok[u][k] = 0;
            else
                b -= a, want_ok[u][k] = 1;
            want_balance[u][k] = b;
        }
    }
}

/* POST every command round-robin over users; remember the ids. */
static int post_all(int port, int from_k, int to_k)
{
    int ok = 0;
    for (int k = from_k; k < to_k; k++)
        for (int u = 0; u < USERS; u++) {
            char op[16], body[256], resp[256];
            long a;
            command(u, k, op, &a);
            snprintf(body, sizeof body,
                     "{\"user\":\"user-%02d\",\"payload\":{\"op\":\"%s\",\"amount\":%ld}}", u,
                     op, a);
            if (it_http(port, "POST", "/outbox/commands/events", body, resp, sizeof resp) == 201 &&
                sscanf(resp, "{\"id\":\"%32[0-9a-f]\"", ids[u][k]) == 1)
                ok++;
        }
    return ok;
}

/* Rows per terminal status, by GET of every id. Returns the number of
 * terminal rows; checks them against the reference when `check`. */
static int terminal_rows(int port, int check, int *wrong)
{
    int terminal = 0;
    *wrong = 0;
    for (int u = 0; u < USERS; u++)
        for (int k = 0; k < PER_USER; k++) {
            char path[128], resp[4096];
            snprintf(path, sizeof path, "/outbox/events/%s", ids[u][k]);
            if (it_http(port, "GET", path, NULL, resp, sizeof resp) != 200)
                continue;
            json_error_t e;
            json_t *j = json_loads(resp, 0, &e);
            const char *st = json_string_value(json_object_get(j, "status"));
            int ok = st && !strcmp(st, "SUCCESS"), pf = st && !strcmp(st, "PUSHED_FAILURE");
            if (ok || pf) {
                terminal++;
                if (check) {
                    const char *res = json_string_value(json_object_get(j, "result"));
                    json_t *r = res ? json_loads(res, 0, &e) : NULL;
                    long bal = r ? (long)json_integer_value(json_object_get(r, "balance")) : -1;
                    if (ok != want_ok[u][k] || bal != want_balance[u][k]) {
                        if ((*wrong)++ < 5)
                            printf("\n  user-%02d command %d: %s balance %ld, want %s %ld", u,
                                   k, st, bal, want_ok[u][k] ? "SUCCESS" : "PUSHED_FAILURE",
                                   want_balance[u][k]);
                    }
                    json_decref(r);
                }
            }
            json_decref(j);
        }
    return terminal;
}

static int wait_terminal(int port, int max_ms)
{
    int64_t end = it_now_ms() + max_ms;
    int wrong, t = 0;
    while (it_now_ms() < end) {
        if ((t = terminal_rows(port, 0, &wrong)) == N)
            return t;
        it_sleep_ms(500);
    }
    return t;
}

/* The results topic: every event id exactly once (read_committed). */
static void check_results_topic(const char *topic)
{
    it_msgs out = {0};
    it_consume(topic, N, 3000, 60000, &out);
    int seen[USERS][PER_USER] = {{0}};
    long foreign = 0, dups = 0;
    for (size_t i = 0; i < out.count; i++) {
        int hit = 0;
        for (int u = 0; u < USERS && !hit; u++)
            for (int k = 0; k < PER_USER && !hit; k++)
                if (out.items[i].key && !strcmp(out.items[i].key, ids[u][k])) {
                    hit = 1;
                    if (seen[u][k]++)
                        dups++;
                }
        if (!hit)
            foreign++;
    }
    printf("\n  %s: %zu results for %d commands, %ld duplicates, %ld foreign", topic,
           out.count, N, dups, foreign);
    CU_ASSERT_EQUAL(out.count, (size_t)N);
    CU_ASSERT_EQUAL(dups, 0);
    CU_ASSERT_EQUAL(foreign, 0);
    it_msgs_free(&out);
}

static void check_rows(int port)
{
    int wrong;
    int t = terminal_rows(port, 1, &wrong);
    printf("\n  rows: %d of %d terminal, %d differ from the reference", t, N, wrong);
    CU_ASSERT_EQUAL(t, N);
    CU_ASSERT_EQUAL(wrong, 0);
}

/* --- pipelines ------------------------------------------------------------- */

static const char *PLUGIN_DIRS = KS_TEST_BUILDDIR "/plugins/.libs\", \"" KS_TEST_BUILDDIR
                                                  "/examples/mailbox/.libs";

/* results_topic: NULL for the default, <application>-outbox-results */
static void write_outbox_part(FILE *f, const char *topic, int port, const char *results_topic)
{
    fprintf(f,
            "outbox:\n"
            "  name: commands\n"
            "  topic: %s\n"
            "  listen: 127.0.0.1:%d\n"
            "  max_users_per_partition: %d\n"
            "  stale_after: 2s\n",
            topic, port, USERS / PARTS);
    if (results_topic)
        fprintf(f, "  results_topic: %s\n", results_topic);
}

/* A pipeline with the mailbox (sending results to `results`), the outbox
 * (when outbox_port), or both; `custom`: the outbox names `results` as its
 * results_topic (else it is the default name). */
static void write_yaml(const char *path, const char *app, const char *results, int custom,
                       const char *topic, int outbox_port, int mailbox, const char *state,
                       int commit_ms)
{
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f,
            "application: %s\n"
            "kafka: { bootstrap: [%s] }\n"
            "state_dir: %s\n"
            "commit_interval_ms: %d\n"
            "plugin_path: [\"%s\"]\n",
            app, it_bootstrap(), state, commit_ms, PLUGIN_DIRS);
    if (mailbox)
        fprintf(f,
                "sources:\n"
                "  commands: { topic: %s, key: string, value: json }\n"
                "nodes:\n"
                "  - name: mailbox\n"
                "    type: mailbox\n"
                "    from: commands\n"
                "    stores: [ledger, balances]\n"
                "    functions: { handler: balances.apply }\n"
                "sinks:\n"
                "  - { from: mailbox, topic: %s, key: string, value: json, create: true }\n",
                topic, results);
    else
        fprintf(f,
                "sources:\n"
                "  in: { topic: %s-in, create: true }\n"
                "sinks:\n"
                "  - { from: in, topic: %s-out, create: true }\n",
                app, app);
    if (outbox_port)
        write_outbox_part(f, topic, outbox_port, custom ? results : NULL);
    fclose(f);
}

static int base_port(void)
{
    static int base;
    if (!base)
        base = it_port_base(2);
    return base;
}

/* --- 1. all in one ------------------------------------------------------- */

static void test_all_in_one(void)
{
    it_tempdir(dir, sizeof dir);
    reference();
    char app[128], topic[128], yaml[512], log[512], state[512], results[256];
    it_unique(app, sizeof app, "mbone");
    it_unique(topic, sizeof topic, "mailbox-one");
    CU_ASSERT_EQUAL_FATAL(it_create_topic(topic, PARTS), 0);
    snprintf(yaml, sizeof yaml, "%s/one.yaml", dir);
    snprintf(log, sizeof log, "%s/one.log", dir);
    snprintf(state, sizeof state, "%s/state-one", dir);
    int port = base_port();
    snprintf(results, sizeof results, "%s-outbox-results", app); /* the default */
    write_yaml(yaml, app, results, 0, topic, port, 1, state, 100);
    pid_t pid = it_engine_start(yaml, "one", log);
    CU_ASSERT_EQUAL(it_http_wait(port, "/outbox/events/x", 10000), 0);
    int64_t t0 = it_now_ms();
    CU_ASSERT_EQUAL(post_all(port, 0, PER_USER), N);
    int t = wait_terminal(port, 90000);
    printf("\n  all in one: %d of %d rows terminal %lld ms after the first POST", t, N,
           (long long)(it_now_ms() - t0));
    check_rows(port);
    CU_ASSERT_EQUAL(it_engine_stop(pid, 30000), 0);
    check_results_topic(results);
    CU_ASSERT(it_log_count(log, "results applied") >= 1);
}

/* --- 2. two processes, kill -9 of the mailbox ------------------------------- */

static void test_two_processes_kill(void)
{
    if (!dir[0])
        it_tempdir(dir, sizeof dir);
    reference();
    char app[128], mapp[160], topic[128], results[256];
    char oyaml[512], olog[512], ostate[512], myaml[512], mlog[512], mstate[512];
    it_unique(app, sizeof app, "mbtwo");
    snprintf(mapp, sizeof mapp, "%s-mailbox", app);
    it_unique(topic, sizeof topic, "mailbox-two");
    CU_ASSERT_EQUAL_FATAL(it_create_topic(topic, PARTS), 0);
    snprintf(oyaml, sizeof oyaml, "%s/two-outbox.yaml", dir);
    snprintf(olog, sizeof olog, "%s/two-outbox.log", dir);
    snprintf(ostate, sizeof ostate, "%s/state-two-outbox", dir);
    snprintf(myaml, sizeof myaml, "%s/two-mailbox.yaml", dir);
    snprintf(mlog, sizeof mlog, "%s/two-mailbox.log", dir);
    snprintf(mstate, sizeof mstate, "%s/state-two-mailbox", dir);
    int port = base_port() + 1;
    /* a results topic of the outbox's choosing (results_topic) */
    snprintf(results, sizeof results, "%s-statuses", app);
    write_yaml(oyaml, app, results, 1, topic, port, 0, ostate, 100);
    /* long batches: the kill lands with a mailbox transaction open */
    write_yaml(myaml, mapp, results, 1, topic, 0, 1, mstate, 1000);
    pid_t op = it_engine_start(oyaml, "two-outbox", olog);
    pid_t mp = it_engine_start(myaml, "two-mailbox", mlog);
    CU_ASSERT_EQUAL(it_http_wait(port, "/outbox/events/x", 10000), 0);
    /* post round by round; kill the mailbox engine once results started
     * to come back, with commands still arriving and (1 s batches) a
     * transaction open */
    int wrong, posted = 0, at_kill = -1;
    for (int k = 0; k < PER_USER; k++) {
        posted += post_all(port, k, k + 1);
        if (at_kill < 0 && k >= 2) {
            for (int i = 0; i < 600 && terminal_rows(port, 0, &wrong) < USERS; i++)
                it_sleep_ms(20);
            it_sleep_ms(300);
            it_engine_kill(mp);
            at_kill = terminal_rows(port, 0, &wrong);
        }
    }
    CU_ASSERT_EQUAL(posted, N);
    CU_ASSERT(at_kill >= USERS && at_kill < N); /* mid-stream */
    it_sleep_ms(1000);
    mp = it_engine_start(myaml, "two-mailbox", mlog);
    int64_t t0 = it_now_ms();
    int t = wait_terminal(port, 90000);
    printf("\n  two processes: %d rows terminal at the kill; %d of %d terminal %lld ms after "
           "the restart",
           at_kill, t, N, (long long)(it_now_ms() - t0));
    check_rows(port);
    CU_ASSERT_EQUAL(it_engine_stop(mp, 30000), 0);
    CU_ASSERT_EQUAL(it_engine_stop(op, 30000), 0);
    check_results_topic(results);
    /* the outbox read them from there */
    char reading[320];
    snprintf(reading, sizeof reading, "reading results from %s ", results);
    CU_ASSERT(it_log_count(olog, reading) >= 1);
    printf("\n  mailbox log: %d 'already processed' lines", it_log_count(mlog, "already processed"));
}

int main(void)
{
    static const it_case cases[] = {
        {"outbox and mailbox in one engine: every row terminal, once, in order",
         test_all_in_one},
        {"outbox and mailbox in two engines, kill -9 of the mailbox", test_two_processes_kill},
        {NULL, NULL}};
    const char *only = getenv("KS_TEST_CASE");
    if (only) {
        it_case one[2] = {cases[atoi(only)], {NULL, NULL}};
        return it_main("mailbox", one);
    }
    return it_main("mailbox", cases);
}
