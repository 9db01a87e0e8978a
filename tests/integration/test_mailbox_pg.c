/*
 * test_mailbox_pg.c - the mailbox's idempotency ledger in PostgreSQL
 * (`ledger_backend: postgres`) with a handler whose effect is SQL in the
 * ledger's transaction (tests/plugins/pgbank.c, sql_exec), on a real
 * PostgreSQL 15 (scripts/postgres.sh, started by scripts/test.sh; PG_PORT
 * or KS_PG_DSN) and a real broker.
 *
 * 2000 commands (40 users on 4 partitions) go straight to the mailbox
 * topic with their ks.event_id headers; every 397th asks the handler to
 * return KS_RETRY once after its INSERT, every 101st breaks a CHECK
 * constraint and returns KS_SKIP. The engine dies by SIGKILL three times
 * (after a PostgreSQL commit with the Kafka transaction open; with the
 * PostgreSQL transaction open; at a moment picked by the clock) and is
 * restarted. Then: every command's row in `balances` exactly once (none
 * for the failed ones), its note and 255 raw bytes exact, one ledger row
 * per command with the right status, one result per command on the
 * results topic (read_committed), and the reconciliations logged.
 *
 * A second pipeline takes its connection from `outbox: { backend:
 * postgres }`; its handler tries to COMMIT through sql_exec: the task
 * stops, and that command's INSERT is rolled back with its ledger row.
 *
 * A third has libpq made unloadable (KS_LIBPQ naming a missing file): the
 * engine exits with an error that names the file and the package libpq5,
 * and the ledger gets no row.
 */
#include <CUnit/CUnit.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "itest.h"

#define N 2000
#define USERS 40
#define PARTS 4
#define NOTE "O'Brien said \"hi\"; -- \\ DROP TABLE balances; '' \\x41"

static char dir[256];
static char dsn[512];
static PGconn *db;

static const char *pg_dsn(void)
{
    const char *e = getenv("KS_PG_DSN"), *port = getenv("PG_PORT");
    if (e && *e)
        return e;
    snprintf(dsn, sizeof dsn,
             "host=127.0.0.1 port=%s dbname=kstreams user=kstreams password=kstreams",
             port && *port ? port : "55432");
    return dsn;
}

static long q_long(const char *sql)
{
    PGresult *r = PQexec(db, sql);
    long v = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) ? atol(PQgetvalue(r, 0, 0))
                                                                   : -1;
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        printf("\n  SQL failed: %s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
    return v;
}

static int run_sql(const char *sql)
{
    PGresult *r = PQexec(db, sql); /* several statements: the simple protocol */
    int good = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!good)
        printf("\n  SQL failed: %.60s...: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
    return good ? 0 : -1;
}

/* The ledger table from `kstreams outbox-schema` (both versions), and
 * the handler's table. */
static int fresh_schema(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s outbox-schema", it_kstreams());
    FILE *f = popen(cmd, "r");
    static char sql[64 * 1024];
    size_t n = f ? fread(sql, 1, sizeof sql - 1, f) : 0;
    if (f)
        pclose(f);
    sql[n] = '\0';
    if (!strstr(sql, "CREATE TABLE IF NOT EXISTS ks_mailbox_ledger"))
        return -1;
    return run_sql("DROP TABLE IF EXISTS ks_mailbox_ledger, balances CASCADE") ||
                   run_sql(sql) ||
                   run_sql("CREATE TABLE balances (id bigserial PRIMARY KEY, event_id text "
                           "NOT NULL, user_id text NOT NULL, amount bigint NOT NULL CHECK "
                           "(amount >= 0), note text, blob bytea)")
               ? -1
               : 0;
}

static int is_retry(int i) { return i % 397 == 5; }
static int is_bad(int i) { return i % 101 == 7; }

static void event_of(int i, char id[33]) { snprintf(id, 33, "%032x", (unsigned)(i + 1)); }

static rd_kafka_t *producer(void)
{
    char err[256];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    rd_kafka_conf_set(c, "bootstrap.servers", it_bootstrap(), err, sizeof err);
    rd_kafka_conf_set(c, "enable.idempotence", "true", err, sizeof err);
    return rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof err);
}

/* One command with its ks.event_id header; 0 or -1. */
static int produce_one(rd_kafka_t *rk, const char *topic, int part, const char *key,
                       const char *value, const char *id)
{
    rd_kafka_resp_err_t e;
    while ((e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(part),
                                  RD_KAFKA_V_KEY(key, strlen(key)),
                                  RD_KAFKA_V_VALUE((void *)value, strlen(value)),
                                  RD_KAFKA_V_HEADER("ks.event_id", id, 32),
                                  RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)) ==
           RD_KAFKA_RESP_ERR__QUEUE_FULL)
        rd_kafka_poll(rk, 10);
    rd_kafka_poll(rk, 0);
    return e ? -1 : 0;
}

static int finish(rd_kafka_t *rk, int rc)
{
    if (rd_kafka_flush(rk, 60000))
        rc = -1;
    rd_kafka_destroy(rk);
    return rc;
}

/* The commands, with their ks.event_id headers, round-robin over users. */
static int produce_commands(const char *topic)
{
    rd_kafka_t *rk = producer();
    if (!rk)
        return -1;
    int rc = 0;
    for (int i = 0; i < N && rc == 0; i++) {
        char key[32], value[128], id[33];
        snprintf(key, sizeof key, "user-%02d", i % USERS);
        snprintf(value, sizeof value, "{\"amount\":%d,\"retry\":%s,\"bad\":%s}", 1 + i % 7,
                 is_retry(i) ? "true" : "false", is_bad(i) ? "true" : "false");
        event_of(i, id);
        rc = produce_one(rk, topic, (i % USERS) % PARTS, key, value, id);
    }
    return finish(rk, rc);
}

static void write_yaml(const char *path, const char *app, const char *topic,
                       const char *results, const char *state)
{
    CU_ASSERT_EQUAL_FATAL(
        it_write_file(path,
                      "application: %s\n"
                      "kafka: { bootstrap: [%s], properties: { transaction.timeout.ms: 5000, "
                      "session.timeout.ms: 6000 } }\n"
                      "guarantee: exactly-once\n"
                      "state_dir: %s\n"
                      "commit_interval_ms: 1000\n"
                      "plugin_path: [\"%s/plugins/.libs\", \"%s/tests/plugins/.libs\"]\n"
                      "sources:\n"
                      "  commands: { topic: %s, key: string, value: json }\n"
                      "nodes:\n"
                      "  - name: mailbox\n"
                      "    type: mailbox\n"
                      "    from: commands\n"
                      "    stores: [unused]\n"
                      "    functions: { handler: pgbank.apply }\n"
                      "    config: { ledger_backend: postgres, ledger_dsn_env: KS_TEST_PG_DSN }\n"
                      "sinks:\n"
                      "  - { from: mailbox, topic: %s, key: string, value: json, create: true }\n",
                      app, it_bootstrap(), state, KS_TEST_BUILDDIR, KS_TEST_BUILDDIR, topic,
                      results),
        0);
}

static long ledger_rows(void) { return q_long("SELECT count(*) FROM ks_mailbox_ledger"); }

/* Wait until the process ends (by its crash point) or max_ms pass. */
static int wait_exit(pid_t pid, int max_ms)
{
    int st = it_engine_wait(pid, max_ms);
    if (st < 0)
        it_engine_kill(pid);
    return st;
}

static void test_kill_mid_transaction(void)
{
    it_tempdir(dir, sizeof dir);
    setenv("KS_TEST_PG_DSN", pg_dsn(), 1);
    db = PQconnectdb(pg_dsn());
    CU_ASSERT_EQUAL_FATAL(PQstatus(db), CONNECTION_OK);
    CU_ASSERT_EQUAL_FATAL(fresh_schema(), 0);
    char app[128], topic[128], results[160], yaml[512], log[512], state[512];
    it_unique(app, sizeof app, "mbpg");
    it_unique(topic, sizeof topic, "mbpg-commands");
    snprintf(results, sizeof results, "%s-results", app);
    snprintf(yaml, sizeof yaml, "%s/p.yaml", dir);
    snprintf(log, sizeof log, "%s/engine.log", dir);
    snprintf(state, sizeof state, "%s/state", dir);
    CU_ASSERT_EQUAL_FATAL(it_create_topic(topic, PARTS), 0);
    CU_ASSERT_EQUAL_FATAL(produce_commands(topic), 0);
    write_yaml(yaml, app, topic, results, state);

    /* 1: SIGKILL right after a PostgreSQL commit, its Kafka transaction open */
    pid_t pid = it_engine_start_env(yaml, "pg1", log, "KS_CRASH_AT=ledger-pg-committed:300");
    int st1 = wait_exit(pid, 60000);
    long after1 = ledger_rows();
    /* 2: SIGKILL with the PostgreSQL transaction open (row and INSERT sent) */
    pid = it_engine_start_env(yaml, "pg1", log, "KS_CRASH_AT=ledger-pg-before-commit:400");
    int st2 = wait_exit(pid, 60000);
    long after2 = ledger_rows();
    /* 3: SIGKILL at a moment of the clock's choosing, mid-stream */
    pid = it_engine_start(yaml, "pg1", log);
    for (int i = 0; i < 600 && ledger_rows() < after2 + 300; i++)
        it_sleep_ms(50);
    it_engine_kill(pid);
    long after3 = ledger_rows();
    printf("\n  kills: exit %d with %ld ledger rows, exit %d with %ld, SIGKILL with %ld", st1,
           after1, st2, after2, after3);
    CU_ASSERT_EQUAL(st1, 128 + 9);
    CU_ASSERT_EQUAL(st2, 128 + 9);
    CU_ASSERT(after1 >= 300 && after1 < N);
    CU_ASSERT(after3 > after2 && after3 < N);
    /* 4: to the end */
    pid = it_engine_start(yaml, "pg1", log);
    int64_t t0 = it_now_ms();
    while (it_now_ms() - t0 < 60000 && ledger_rows() < N)
        it_sleep_ms(200);
    it_msgs out = {0};
    it_consume(results, N, 3000, 60000, &out);
    CU_ASSERT_EQUAL(it_engine_stop(pid, 30000), 0);

    long bad = 0;
    for (int i = 0; i < N; i++)
        bad += is_bad(i);
    /* the effects: once per successful command, none for the failed */
    long rows = q_long("SELECT count(*) FROM balances");
    long distinct = q_long("SELECT count(DISTINCT event_id) FROM balances");
    long bad_rows = q_long("SELECT count(*) FROM balances b JOIN ks_mailbox_ledger l USING "
                           "(event_id) WHERE l.status = 'PUSHED_FAILURE'");
    printf("\n  balances: %ld rows, %ld events (want %ld), %ld of failed commands", rows,
           distinct, N - bad, bad_rows);
    CU_ASSERT_EQUAL(rows, N - bad);
    CU_ASSERT_EQUAL(distinct, N - bad);
    CU_ASSERT_EQUAL(bad_rows, 0);
    /* parameters arrive byte for byte: quotes, backslashes, 255 raw bytes */
    unsigned char blob[255];
    for (int i = 0; i < 255; i++)
        blob[i] = (unsigned char)(i + 1);
    const char *v[] = {NOTE, (const char *)blob};
    const int len[] = {-1, 255}, fmt[] = {0, 1};
    PGresult *r = PQexecParams(db,
                               "SELECT count(*) FROM balances WHERE note IS DISTINCT FROM $1 "
                               "OR blob IS DISTINCT FROM $2::bytea",
                               2, NULL, v, len, fmt, 0);
    long differ = PQresultStatus(r) == PGRES_TUPLES_OK ? atol(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    CU_ASSERT_EQUAL(differ, 0);
    /* the ledger: one row per command, the failed ones PUSHED_FAILURE */
    long lrows = ledger_rows();
    long levents = q_long("SELECT count(DISTINCT event_id) FROM ks_mailbox_ledger");
    long lfail = q_long("SELECT count(*) FROM ks_mailbox_ledger WHERE status = "
                        "'PUSHED_FAILURE'");
    printf("\n  ledger: %ld rows, %ld events, %ld PUSHED_FAILURE (want %d, %ld)", lrows,
           levents, lfail, N, bad);
    CU_ASSERT_EQUAL(lrows, N);
    CU_ASSERT_EQUAL(levents, N);
    CU_ASSERT_EQUAL(lfail, bad);
    /* each user's total: its commands' amounts, each once */
    long wrong_total = q_long(
        "SELECT count(*) FROM (SELECT user_id, sum(amount) s FROM balances GROUP BY user_id) b "
        "JOIN (SELECT 'user-' || lpad((i % 40)::text, 2, '0') u, sum(1 + i % 7) s FROM "
        "generate_series(0, 1999) i WHERE i % 101 <> 7 GROUP BY 1) w ON w.u = b.user_id "
        "WHERE w.s <> b.s");
    CU_ASSERT_EQUAL(wrong_total, 0);
    /* the results topic (read_committed): each event id once */
    static int seen[N];
    memset(seen, 0, sizeof seen);
    long dups = 0, foreign = 0;
    for (size_t i = 0; i < out.count; i++) {
        unsigned id = 0;
        if (!out.items[i].key || sscanf(out.items[i].key, "%x", &id) != 1 || id < 1 || id > N) {
            foreign++;
            continue;
        }
        dups += seen[id - 1]++ > 0;
    }
    int reconciled = it_log_count(log, "already processed");
    int retries = it_log_count(log, "a processor asked to retry");
    printf("\n  results: %zu for %d commands, %ld duplicates, %ld foreign; %d 'already "
           "processed' log lines (sampled 1 in 1000 per instance); %d batches retried",
           out.count, N, dups, foreign, reconciled, retries);
    /* the handler's KS_RETRY ran (and its INSERT was rolled back: the
     * counts above hold every event once) */
    CU_ASSERT(retries >= 1);
    CU_ASSERT_EQUAL(out.count, (size_t)N);
    CU_ASSERT_EQUAL(dups, 0);
    CU_ASSERT_EQUAL(foreign, 0);
    /* the first kill left PostgreSQL-committed commands to reconcile */
    CU_ASSERT(reconciled >= 1);
    it_msgs_free(&out);
    PQfinish(db);
}

/* --- 2. the outbox's connection; a handler's COMMIT refused ------------ */

static void test_commit_refused(void)
{
    if (!dir[0])
        it_tempdir(dir, sizeof dir);
    setenv("KS_TEST_PG_DSN", pg_dsn(), 1);
    db = PQconnectdb(pg_dsn());
    CU_ASSERT_EQUAL_FATAL(PQstatus(db), CONNECTION_OK);
    CU_ASSERT_EQUAL_FATAL(run_sql("SELECT 1 FROM ks_mailbox_ledger LIMIT 1") == 0 ||
                              fresh_schema() == 0,
                          1);
    char app[128], topic[128], yaml[512], log[512];
    it_unique(app, sizeof app, "mbpgc");
    it_unique(topic, sizeof topic, "mbpgc-commands");
    snprintf(yaml, sizeof yaml, "%s/c.yaml", dir);
    snprintf(log, sizeof log, "%s/commit.log", dir);
    CU_ASSERT_EQUAL_FATAL(it_create_topic(topic, 1), 0);
    rd_kafka_t *rk = producer();
    CU_ASSERT_PTR_NOT_NULL_FATAL(rk);
    int rc = produce_one(rk, topic, 0, "c-user", "{\"amount\":1}",
                         "c0000000000000000000000000000001");
    rc |= produce_one(rk, topic, 0, "c-user", "{\"amount\":2}",
                      "c0000000000000000000000000000002");
    rc |= produce_one(rk, topic, 0, "c-user", "{\"amount\":4,\"commit\":true}",
                      "c0000000000000000000000000000003");
    CU_ASSERT_EQUAL_FATAL(finish(rk, rc), 0);
    CU_ASSERT_EQUAL_FATAL(
        it_write_file(yaml,
                      "application: %s\n"
                      "kafka: { bootstrap: [%s] }\n"
                      "state_dir: %s/state-c\n"
                      "plugin_path: [\"%s/plugins/.libs\", \"%s/tests/plugins/.libs\"]\n"
                      "sources:\n"
                      "  commands: { topic: %s, key: string, value: json }\n"
                      "nodes:\n"
                      "  - name: mailbox\n"
                      "    type: mailbox\n"
                      "    from: commands\n"
                      "    stores: [unused]\n"
                      "    functions: { handler: pgbank.apply }\n"
                      "    config: { ledger_backend: postgres }\n"
                      "sinks:\n"
                      "  - { from: mailbox, topic: %s-results, key: string, value: json, "
                      "create: true }\n"
                      "outbox:\n"
                      "  backend: postgres\n"
                      "  dsn_env: KS_TEST_PG_DSN\n"
                      "  topic: %s-unused\n",
                      app, it_bootstrap(), dir, KS_TEST_BUILDDIR, KS_TEST_BUILDDIR, topic, app,
                      app),
        0);
    pid_t pid = it_engine_start(yaml, "c1", log);
    int st = it_engine_wait(pid, 40000);
    if (st < 0)
        it_engine_kill(pid);
    long rows = q_long("SELECT count(*) FROM balances WHERE user_id = 'c-user'");
    long ledger = q_long("SELECT count(*) FROM ks_mailbox_ledger WHERE event_id LIKE 'c%'");
    int refused = it_log_count(log, "transaction control is the ledger's");
    printf("\n  engine exit %d; %ld balances rows, %ld ledger rows (want 2, 2); %d refusals "
           "logged",
           st, rows, ledger, refused);
    CU_ASSERT(st > 0 && st != 128 + 9); /* stopped by itself, with an error */
    CU_ASSERT_EQUAL(rows, 2);
    CU_ASSERT_EQUAL(ledger, 2);
    CU_ASSERT(refused >= 1);
    CU_ASSERT(it_log_count(log, "ledger: connected to PostgreSQL") >= 1);
    PQfinish(db);
}

/* The engine loads libpq only for the ledger (no PostgreSQL outbox here,
 * so the configuration alone does not load it): a missing one is an
 * error at the mailbox's init, and the process exits. */
static void test_libpq_missing(void)
{
    if (!dir[0])
        it_tempdir(dir, sizeof dir);
    setenv("KS_TEST_PG_DSN", pg_dsn(), 1);
    db = PQconnectdb(pg_dsn());
    CU_ASSERT_EQUAL_FATAL(PQstatus(db), CONNECTION_OK);
    CU_ASSERT_EQUAL_FATAL(run_sql("SELECT 1 FROM ks_mailbox_ledger LIMIT 1") == 0 ||
                              fresh_schema() == 0,
                          1);
    char app[128], topic[128], results[160], yaml[512], log[512], state[512], sql[300];
    it_unique(app, sizeof app, "mbnolib");
    it_unique(topic, sizeof topic, "mbnolib-commands");
    snprintf(results, sizeof results, "%s-results", app);
    snprintf(yaml, sizeof yaml, "%s/nolib.yaml", dir);
    snprintf(log, sizeof log, "%s/nolib.log", dir);
    snprintf(state, sizeof state, "%s/state-nolib", dir);
    CU_ASSERT_EQUAL_FATAL(it_create_topic(topic, 1), 0);
    rd_kafka_t *rk = producer();
    CU_ASSERT_PTR_NOT_NULL_FATAL(rk);
    CU_ASSERT_EQUAL_FATAL(finish(rk, produce_one(rk, topic, 0, "u", "{\"amount\":1}",
                                                 "d0000000000000000000000000000001")),
                          0);
    write_yaml(yaml, app, topic, results, state);
    static char env[600];
    snprintf(env, sizeof env, "KS_LIBPQ=%s/missing/libpq.so.5", dir);
    pid_t pid = it_engine_start_env(yaml, "nolib", log, env);
    int st = wait_exit(pid, 60000);
    char want[600];
    snprintf(want, sizeof want, "PostgreSQL backend: cannot load %s/missing/libpq.so.5: ", dir);
    printf("\n  KS_LIBPQ missing: exit %d, %d error lines", st, it_log_count(log, want));
    CU_ASSERT_EQUAL(st, 1); /* a runtime failure: not a crash, not a hang */
    CU_ASSERT(it_log_count(log, want) >= 1);
    CU_ASSERT(it_log_count(log, "install the Debian package libpq5") >= 1);
    CU_ASSERT(it_log_count(log, "cannot use PostgreSQL for the ledger") >= 1);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM ks_mailbox_ledger WHERE topic = '%s'",
             topic);
    CU_ASSERT_EQUAL(q_long(sql), 0);
    PQfinish(db);
}

int main(void)
{
    static const it_case cases[] = {
        {"ledger in PostgreSQL, handler SQL in its transaction, kill -9 three times",
         test_kill_mid_transaction},
        {"the outbox's connection; a handler's COMMIT is refused and rolled back",
         test_commit_refused},
        {"libpq cannot be loaded: a clear error, a non-zero exit", test_libpq_missing},
        {NULL, NULL}};
    const char *only = getenv("KS_TEST_CASE");
    if (only) {
        it_case one[2] = {cases[atoi(only)], {NULL, NULL}};
        return it_main("mailbox_pg", one);
    }
    return it_main("mailbox_pg", cases);
}
