/*
 * test_outbox_pg.c - the PostgreSQL outbox on a real PostgreSQL
 * (scripts/postgres.sh; DSN in $KS_PG_DSN, default the script's on port
 * $PG_PORT or 55432) and a real broker, with real `kstreams run`
 * processes. The schema is the one `kstreams outbox-schema` prints.
 *
 *   1. the application's transaction: a domain row and its outbox row
 *      commit together and the event is published once; a rolled-back
 *      transaction's row never is; PREQUEUED rows wait for
 *      ks_outbox_release(); keys and payloads with quotes, a NUL byte and
 *      1 MiB bodies arrive byte for byte; the password never reaches the log
 *   2. the schema refuses illegal transitions (the trigger), and its
 *      transition table is the engine's, pair by pair
 *   3. kill -9 mid-dispatch (after the acks, after the produce, and a
 *      SIGKILL from outside), then a restart: 0 lost, 0 published twice
 *      (read_committed, counted by ks.event_id), the probe's decisions
 *      in the log add up to the rows left DISPATCHING
 *   4. two kstreams processes dispatching from one table: 0 duplicates,
 *      0 lost, both published some
 *   5. PostgreSQL restarted during dispatch (scripts/postgres.sh restart):
 *      kstreams reconnects, 0 lost, 0 published twice
 *   6. Kafka stopped while the application keeps inserting: the rows wait
 *      PENDING, then all are published once when Kafka is back
 *   7. sequential partition assignment in PostgreSQL: two processes, 60
 *      users, max_users_per_partition 10: each user's events in one
 *      partition, 10 users in each of 6, the topic grown from 1 to 6,
 *      ks_user_partitions equal to what was published; at the SQL level,
 *      a second caller waits for the first one's lock and numbers after it;
 *      then users whose names need quoting in a text[] literal (quotes,
 *      backslashes, braces, commas, "NULL", spaces, UTF-8, empty) are
 *      mapped under exactly their names
 *   8. libpq cannot be loaded (KS_LIBPQ naming a missing file): `kstreams
 *      run` exits 2 with an error naming the file and the package libpq5,
 *      and publishes nothing
 */
#include <CUnit/CUnit.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "itest.h"
#include "kafka/kafka.h"
#include "outbox/outbox_status.h"

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

/* Run sql (parameters as text, NULL-terminated list v may be NULL);
 * returns the result (caller clears) or NULL, printing the error. */
static PGresult *q(const char *sql, int n, const char *const *v)
{
    PGresult *r = PQexecParams(db, sql, n, NULL, v, NULL, NULL, 0);
    ExecStatusType s = PQresultStatus(r);
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
        printf("\n  SQL failed: %s: %s", sql, PQresultErrorMessage(r));
        PQclear(r);
        return NULL;
    }
    return r;
}

static long q_long(const char *sql)
{
    PGresult *r = q(sql, 0, NULL);
    long v = r && PQntuples(r) ? atol(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    return v;
}

static int ok(const char *sql)
{
    PGresult *r = q(sql, 0, NULL);
    PQclear(r);
    return r != NULL;
}

/* A fresh outbox table from `kstreams outbox-schema`. */
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
    if (!ok("DROP TABLE IF EXISTS ks_outbox, ks_outbox_schema, orders, ks_user_partitions, "
            "ks_user_partition_counts CASCADE"))
        return -1;
    PGresult *r = PQexec(db, sql); /* several statements: the simple protocol */
    int good = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!good)
        printf("\n  schema: %s", PQresultErrorMessage(r));
    PQclear(r);
    return good && ok("CREATE TABLE orders (id bigserial PRIMARY KEY, customer text, "
                      "amount int)")
               ? 0
               : -1;
}

typedef struct eng {
    char app[128], topic[128], yaml[512], log[512];
} eng;

/* extra: more kafka properties; ob_extra: more outbox keys (a line each) */
static void eng_init(eng *e, const char *tag, const char *topic, const char *extra,
                     const char *ob_extra)
{
    if (!e->app[0]) /* else the application of another instance */
        it_unique(e->app, sizeof e->app, "obpg");
    snprintf(e->topic, sizeof e->topic, "%s", topic);
    snprintf(e->yaml, sizeof e->yaml, "%s/%s.yaml", dir, tag);
    snprintf(e->log, sizeof e->log, "%s/%s.log", dir, tag);
    it_write_file(e->yaml,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s], properties: { message.max.bytes: 4000000 %s } }\n"
                  "state_dir: %s/state-%s\n"
                  "sources:\n"
                  "  in: { topic: %s-in, create: true, partitions: 1 }\n"
                  "sinks:\n"
                  "  - { from: in, topic: %s-out, create: true, partitions: 1 }\n"
                  "outbox:\n"
                  "  backend: postgres\n"
                  "  dsn_env: KS_TEST_PG_DSN\n"
                  "  topic: %s\n"
                  "  stale_after: 2s\n"
                  "  poll_interval: 500ms\n"
                  "  retry: { max_attempts: 1000 }\n%s",
                  e->app, it_bootstrap(), extra ? extra : "", dir, tag, e->app, e->app,
                  e->topic, ob_extra ? ob_extra : "");
}

static int make_topic(const char *topic, int partitions)
{
    static const char *const cfg[] = {"max.message.bytes", "4000000", NULL};
    return it_create_topic_with(topic, partitions, 1, cfg);
}

/* Start with the DSN in the environment and, optionally, a crash point
 * (env is then "KS_CRASH_AT=..."). */
static pid_t eng_start(const eng *e, const char *instance, const char *crash_at)
{
    setenv("KS_TEST_PG_DSN", pg_dsn(), 1);
    return it_engine_start_env(e->yaml, instance, e->log, crash_at);
}

/* Wait until no row is PENDING/PREQUEUED/DISPATCHING (max_ms). */
static int wait_settled(int max_ms)
{
    int64_t until = it_now_ms() + max_ms;
    while (it_now_ms() < until) {
        if (q_long("SELECT count(*) FROM ks_outbox WHERE status IN ('PENDING', "
                   "'DISPATCHING')") == 0)
            return 1;
        it_sleep_ms(200);
    }
    return 0;
}

/* Read the topic and count records per ks.event_id: every row of
 * ks_outbox (PUBLISHED) must appear once, nothing else. */
static void check_exactly_once(const char *topic, long rows, it_msgs *keep)
{
    it_msgs m = {0};
    it_consume(topic, (size_t)rows, 3000, 120000, &m);
    long twice = 0, lost = 0, foreign = 0;
    PGresult *r = q("SELECT event_id, kafka_partition, kafka_offset FROM ks_outbox "
                    "WHERE status = 'PUBLISHED'",
                    0, NULL);
    int n = r ? PQntuples(r) : 0;
    char *seen = calloc(m.count + 1, 1);
    for (int i = 0; i < n; i++) {
        char want[128];
        snprintf(want, sizeof want, "ks.event_id=%s\n", PQgetvalue(r, i, 0));
        int hits = 0;
        for (size_t j = 0; j < m.count; j++)
            if (m.items[j].headers && strstr(m.items[j].headers, want)) {
                hits++;
                seen[j] = 1;
                /* the row says where its record is */
                CU_ASSERT_EQUAL(m.items[j].offset, atoll(PQgetvalue(r, i, 2)));
                CU_ASSERT_EQUAL(m.items[j].partition, atoi(PQgetvalue(r, i, 1)));
            }
        twice += hits > 1;
        lost += hits == 0;
    }
    for (size_t j = 0; j < m.count; j++)
        foreign += !seen[j];
    printf("\n  %s: %ld rows PUBLISHED of %ld, %zu records: %ld lost, %ld published twice, "
           "%ld without a row",
           topic, (long)n, rows, m.count, lost, twice, foreign);
    CU_ASSERT_EQUAL(n, rows);
    CU_ASSERT_EQUAL(lost, 0);
    CU_ASSERT_EQUAL(twice, 0);
    CU_ASSERT_EQUAL(foreign, 0);
    CU_ASSERT_EQUAL((long)m.count, rows);
    free(seen);
    PQclear(r);
    if (keep)
        *keep = m;
    else
        it_msgs_free(&m);
}

/* --- 1. the application's transaction ------------------------------------ */

static const it_msg *find_key(const it_msgs *m, const char *key, size_t klen)
{
    for (size_t j = 0; j < m->count; j++)
        if (m->items[j].key_len == klen && !memcmp(m->items[j].key, key, klen))
            return &m->items[j];
    return NULL;
}

static void test_transaction(void)
{
    CU_ASSERT_FATAL(fresh_schema() == 0);
    char topic[128];
    it_unique(topic, sizeof topic, "pg-orders");
    CU_ASSERT_FATAL(make_topic(topic, 3) == 0);
    eng e = {0};
    eng_init(&e, "tx", topic, NULL, NULL);
    pid_t pid = eng_start(&e, "tx", NULL);
    /* 300 orders, each an order row and its event in one transaction; every
     * fourth transaction rolls back */
    int committed = 0;
    for (int i = 0; i < 300; i++) {
        char cust[32], amount[16], payload[128];
        snprintf(cust, sizeof cust, "customer-%d", i % 40);
        snprintf(amount, sizeof amount, "%d", i);
        snprintf(payload, sizeof payload, "{\"order\":%d,\"rolled_back\":%s}", i,
                 i % 4 == 3 ? "true" : "false");
        const char *v[] = {cust, amount, payload};
        CU_ASSERT(ok("BEGIN"));
        PQclear(q("INSERT INTO orders (customer, amount) VALUES ($1, $2::int)", 2, v));
        PQclear(q("INSERT INTO ks_outbox (aggregate, payload, headers) VALUES ($1, "
                  "convert_to($3, 'UTF8'), jsonb_build_object('type', 'OrderPlaced', "
                  "'amount', $2::text))",
                  3, v));
        CU_ASSERT(ok(i % 4 == 3 ? "ROLLBACK" : "COMMIT"));
        committed += i % 4 != 3;
    }
    /* hostile bytes, bound as binary parameters: quotes in key and payload,
     * a NUL inside the payload, 1 MiB bodies */
    static char big[1 << 20];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (char)('a' + i % 26);
    big[17] = '\'', big[18] = '"', big[19] = '\\';
    const char quoted[] = "it's \"quoted\"; DROP TABLE ks_outbox; --\\";
    const char nul[] = {'a', '\0', 'b', '\'', '\0'};
    struct {
        const char *key;
        const char *val;
        int len;
    } odd[] = {{"k'1\"", quoted, (int)strlen(quoted)},
               {"k-nul", nul, (int)sizeof nul},
               {"k-big-1", big, (int)sizeof big},
               {"k-big-2", big, (int)sizeof big}};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        const char *v[] = {odd[i].key, odd[i].val};
        int lens[] = {(int)strlen(odd[i].key), odd[i].len}, fmts[] = {1, 1};
        PGresult *r = PQexecParams(db,
                                   "INSERT INTO ks_outbox (aggregate, key, payload) VALUES "
                                   "('odd', $1::bytea, $2::bytea)",
                                   2, NULL, v, lens, fmts, 0);
        CU_ASSERT_EQUAL(PQresultStatus(r), PGRES_COMMAND_OK);
        PQclear(r);
        committed++;
    }
    /* held rows wait for their release */
    CU_ASSERT(ok("INSERT INTO ks_outbox (aggregate, payload, status) SELECT 'held', "
                 "convert_to('held ' || g, 'UTF8'), 'PREQUEUED' FROM generate_series(1, 5) g"));
    committed += 5;
    CU_ASSERT(wait_settled(60000));
    it_sleep_ms(1500);
    CU_ASSERT_EQUAL(q_long("SELECT count(*) FROM ks_outbox WHERE status = 'PREQUEUED'"), 5);
    CU_ASSERT_EQUAL(q_long("SELECT ks_outbox_release(array_agg(id)) FROM ks_outbox WHERE "
                           "status = 'PREQUEUED'"),
                    5);
    CU_ASSERT(wait_settled(60000));
    CU_ASSERT_EQUAL(q_long("SELECT count(*) FROM orders"), committed - 9);
    it_msgs m = {0};
    check_exactly_once(topic, committed, &m);
    long rolled = 0;
    for (size_t j = 0; j < m.count; j++)
        rolled += m.items[j].value && strstr(m.items[j].value, "\"rolled_back\":true") != NULL;
    CU_ASSERT_EQUAL(rolled, 0);
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        const it_msg *x = find_key(&m, odd[i].key, strlen(odd[i].key));
        CU_ASSERT_FATAL(x != NULL);
        CU_ASSERT_EQUAL(x->value_len, (size_t)odd[i].len);
        CU_ASSERT(x->value_len == (size_t)odd[i].len &&
                  memcmp(x->value, odd[i].val, (size_t)odd[i].len) == 0);
    }
    /* the application's headers travel beside ks.event_id and ks.user */
    const it_msg *c0 = find_key(&m, "customer-0", 10);
    CU_ASSERT(c0 && c0->headers && strstr(c0->headers, "type=OrderPlaced\n") &&
              strstr(c0->headers, "ks.user=customer-0\n"));
    it_msgs_free(&m);
    CU_ASSERT_EQUAL(it_engine_stop(pid, 30000), 0);
    CU_ASSERT_EQUAL(it_log_count(e.log, "password"), 0);
    CU_ASSERT(it_log_count(e.log, "connected to PostgreSQL") >= 1);
}

/* --- 2. the schema refuses illegal transitions --------------------------- */

static void test_illegal_transition(void)
{
    CU_ASSERT_FATAL(fresh_schema() == 0);
    static const char *const names[KS_OUTBOX_STATUS_COUNT] = {
        "PREQUEUED", "PENDING", "DISPATCHING", "PUBLISHED",
        "UNDER_PROCESSING", "SUCCESS", "PUSHED_FAILURE", "FAILURE"};
    int differ = 0;
    for (int f = 0; f < KS_OUTBOX_STATUS_COUNT; f++)
        for (int t = 0; t < KS_OUTBOX_STATUS_COUNT; t++) {
            const char *v[] = {names[f], names[t]};
            PGresult *r = q("SELECT ks_outbox_transition_allowed($1, $2)", 2, v);
            int sql = r && !strcmp(PQgetvalue(r, 0, 0), "t");
            PQclear(r);
            if (sql != ks_outbox_transition_allowed((ks_outbox_status)f, (ks_outbox_status)t)) {
                printf("\n  %s -> %s: SQL says %d", names[f], names[t], sql);
                differ++;
            }
        }
    CU_ASSERT_EQUAL(differ, 0);
    CU_ASSERT(ok("INSERT INTO ks_outbox (aggregate, payload) VALUES ('u', 'x')"));
    /* PENDING -> PUBLISHED skips the claim: refused with check_violation */
    PGresult *r = PQexec(db, "UPDATE ks_outbox SET status = 'PUBLISHED'");
    CU_ASSERT_EQUAL(PQresultStatus(r), PGRES_FATAL_ERROR);
    CU_ASSERT_STRING_EQUAL(PQresultErrorField(r, PG_DIAG_SQLSTATE), "23514");
    printf("\n  refused: %s", PQresultErrorMessage(r));
    PQclear(r);
    /* legal moves, then a terminal row moved back */
    CU_ASSERT(ok("UPDATE ks_outbox SET status = 'DISPATCHING'"));
    CU_ASSERT(ok("UPDATE ks_outbox SET status = 'FAILURE'"));
    r = PQexec(db, "UPDATE ks_outbox SET status = 'PENDING'");
    CU_ASSERT_EQUAL(PQresultStatus(r), PGRES_FATAL_ERROR);
    PQclear(r);
    r = PQexec(db, "UPDATE ks_outbox SET status = 'NONSENSE'");
    CU_ASSERT_EQUAL(PQresultStatus(r), PGRES_FATAL_ERROR);
    PQclear(r);
    /* a row cannot be born published */
    r = PQexec(db, "INSERT INTO ks_outbox (aggregate, payload, status) VALUES ('u', 'x', "
                   "'PUBLISHED')");
    CU_ASSERT_EQUAL(PQresultStatus(r), PGRES_FATAL_ERROR);
    PQclear(r);
    CU_ASSERT_EQUAL(q_long("SELECT count(*) FROM ks_outbox WHERE status = 'FAILURE'"), 1);
}

/* --- 3. kill -9 mid-dispatch --------------------------------------------- */

static void insert_events(int n, int aggregates, const char *tag)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "INSERT INTO ks_outbox (aggregate, payload) SELECT 'user-' || (g %% %d), "
             "convert_to('%s ' || g, 'UTF8') FROM generate_series(1, %d) g",
             aggregates, tag, n);
    CU_ASSERT(ok(sql));
}

/* 1 when no row claimed before v[0] (a timestamp) is still DISPATCHING
 * and some row claimed after it is. */
static int dispatching_since(const char *const *v)
{
    PGresult *r = q("SELECT count(*) FILTER (WHERE claimed_at <= $1::timestamptz), "
                    "count(*) FILTER (WHERE claimed_at > $1::timestamptz) FROM ks_outbox "
                    "WHERE status = 'DISPATCHING'",
                    1, v);
    int yes = r && PQntuples(r) && atol(PQgetvalue(r, 0, 0)) == 0 &&
              atol(PQgetvalue(r, 0, 1)) > 0;
    PQclear(r);
    return yes;
}

static void test_kill9(void)
{
    CU_ASSERT_FATAL(fresh_schema() == 0);
    char topic[128];
    it_unique(topic, sizeof topic, "pg-kill");
    CU_ASSERT_FATAL(make_topic(topic, 4) == 0);
    eng e = {0};
    /* linger keeps a batch in flight: the outside SIGKILL lands mid-batch */
    eng_init(&e, "kill", topic, ", linger.ms: 1000", NULL);
    static const char *const crash[] = {"KS_CRASH_AT=outbox-dispatch-acked:1",
                                        "KS_CRASH_AT=outbox-dispatch-produced:1", NULL};
    long rows = 0, left_dispatching = 0;
    for (int s = 0; s < 3; s++) {
        insert_events(600, 50, s == 0 ? "acked" : s == 1 ? "produced" : "sigkill");
        rows += 600;
        /* the claims of this run are those after t0 (PostgreSQL's clock) */
        PGresult *t0r = q("SELECT now()::text", 0, NULL);
        char t0[64] = "";
        if (t0r && PQntuples(t0r))
            snprintf(t0, sizeof t0, "%s", PQgetvalue(t0r, 0, 0));
        PQclear(t0r);
        const char *t0v[] = {t0};
        pid_t pid = eng_start(&e, "k", crash[s]);
        if (crash[s]) {
            int st = it_engine_wait(pid, 90000);
            printf("\n  %s -> exit %d", crash[s], st);
            CU_ASSERT_EQUAL(st, 137);
            if (st < 0)
                it_engine_kill(pid);
        } else {
            /* kill mid-batch of this run: once the previous run's leftovers
             * are decided (else the count below would hold them twice) and
             * this run has claimed rows of its own */
            for (int i = 0; i < 3000 && !dispatching_since(t0v); i++)
                it_sleep_ms(10);
            it_sleep_ms(300);
            it_engine_kill(pid);
        }
        /* the next run must find these stale: older than stale_after; and
         * PostgreSQL finishes a statement the killed process had sent, so
         * count only after a while */
        it_sleep_ms(2500);
        long d = q_long("SELECT count(*) FROM ks_outbox WHERE status = 'DISPATCHING'");
        printf("; %ld rows left DISPATCHING", d);
        if (crash[s])
            CU_ASSERT(d > 0);
        left_dispatching += d;
    }
    pid_t pid = eng_start(&e, "k", NULL);
    CU_ASSERT(wait_settled(120000));
    CU_ASSERT_EQUAL(it_engine_stop(pid, 30000), 0);
    long hit = it_log_sum_before(e.log, ": ", " found -> PUBLISHED");
    long miss = it_log_sum_before(e.log, "PUBLISHED, ", " absent -> PENDING");
    printf("\n  probe: %ld found -> PUBLISHED, %ld absent -> PENDING (of %ld left "
           "DISPATCHING by the kills)",
           hit, miss, left_dispatching);
    /* a crashed run's leftovers are decided by the next run, crashed or not */
    CU_ASSERT_EQUAL(hit + miss + it_log_count(e.log, "claimed but never produced"),
                    left_dispatching);
    CU_ASSERT(hit > 0); /* the acked batch's records were all there */
    check_exactly_once(topic, rows, NULL);
}

/* --- 4. two processes, one table ----------------------------------------- */

static void test_two_processes(void)
{
    CU_ASSERT_FATAL(fresh_schema() == 0);
    char topic[128];
    it_unique(topic, sizeof topic, "pg-two");
    CU_ASSERT_FATAL(make_topic(topic, 4) == 0);
    eng a = {0}, b = {0};
    eng_init(&a, "two-a", topic, NULL, NULL);
    snprintf(b.app, sizeof b.app, "%s", a.app); /* one application, two instances */
    eng_init(&b, "two-b", topic, NULL, NULL);
    pid_t pa = eng_start(&a, "two-a", NULL), pb = eng_start(&b, "two-b", NULL);
    it_sleep_ms(3000);
    for (int k = 0; k < 20; k++) {
        insert_events(200, 100, "two");
        it_sleep_ms(50);
    }
    CU_ASSERT(wait_settled(120000));
    CU_ASSERT_EQUAL(it_engine_stop(pa, 30000), 0);
    CU_ASSERT_EQUAL(it_engine_stop(pb, 30000), 0);
    long na = it_log_sum_before(a.log, "stopped after publishing ", " events");
    long nb = it_log_sum_before(b.log, "stopped after publishing ", " events");
    printf("\n  process a published %ld, process b %ld", na, nb);
    CU_ASSERT_EQUAL(na + nb, 4000);
    CU_ASSERT(na > 0 && nb > 0);
    check_exactly_once(topic, 4000, NULL);
}

/* --- 5. PostgreSQL restarted during dispatch ------------------------------ */

static int script(const char *name, const char *env, const char *verb)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s/../scripts/%s %s >/dev/null 2>&1", env, KS_TEST_SRCDIR,
             name, verb);
    return system(cmd);
}

static void test_pg_restart(void)
{
    if (getenv("KS_PG_DSN")) {
        printf("\n  skipped: KS_PG_DSN names a PostgreSQL this test does not restart");
        return;
    }
    CU_ASSERT_FATAL(fresh_schema() == 0);
    char topic[128], env[64];
    it_unique(topic, sizeof topic, "pg-restart");
    CU_ASSERT_FATAL(make_topic(topic, 4) == 0);
    eng e = {0};
    eng_init(&e, "restart", topic, ", linger.ms: 200", NULL);
    insert_events(3000, 100, "restart");
    pid_t pid = eng_start(&e, "r", NULL);
    for (int i = 0; i < 3000 && q_long("SELECT count(*) FROM ks_outbox WHERE status = "
                                       "'PUBLISHED'") <= 0;
         i++)
        it_sleep_ms(10);
    const char *port = getenv("PG_PORT");
    snprintf(env, sizeof env, "PG_PORT=%s", port && *port ? port : "55432");
    CU_ASSERT_EQUAL(script("postgres.sh", env, "restart"), 0);
    PQreset(db);
    CU_ASSERT_FATAL(PQstatus(db) == CONNECTION_OK);
    PQclear(PQexec(db, "SET client_min_messages = warning"));
    insert_events(1000, 100, "after");
    CU_ASSERT(wait_settled(120000));
    CU_ASSERT_EQUAL(it_engine_stop(pid, 30000), 0);
    printf("\n  reconnects: %d", it_log_count(e.log, "reconnected to PostgreSQL"));
    CU_ASSERT(it_log_count(e.log, "reconnected to PostgreSQL") >= 1);
    check_exactly_once(topic, 4000, NULL);
}

/* --- 6. Kafka stopped while the application inserts ----------------------- */

static void test_kafka_down(void)
{
    CU_ASSERT_FATAL(fresh_schema() == 0);
    char topic[128], env[64];
    it_unique(topic, sizeof topic, "pg-kdown");
    CU_ASSERT_FATAL(make_topic(topic, 4) == 0);
    eng e = {0};
    eng_init(&e, "kdown", topic, NULL, NULL);
    pid_t pid = eng_start(&e, "d", NULL);
    insert_events(500, 50, "before");
    CU_ASSERT(wait_settled(60000));
    const char *c = strrchr(it_bootstrap(), ':');
    snprintf(env, sizeof env, "KAFKA_PORT=%s", c ? c + 1 : "9092");
    CU_ASSERT_EQUAL_FATAL(script("kafka.sh", env, "stop-keep"), 0);
    for (int k = 0; k < 10; k++) {
        insert_events(100, 50, "during");
        it_sleep_ms(300);
    }
    it_sleep_ms(3000);
    long waiting = q_long("SELECT count(*) FROM ks_outbox WHERE status IN ('PENDING', "
                          "'DISPATCHING')");
    printf("\n  Kafka down: %ld of 1000 rows waiting", waiting);
    CU_ASSERT(waiting >= 900); /* a batch may have been claimed as Kafka went */
    CU_ASSERT_EQUAL_FATAL(script("kafka.sh", env, "start"), 0);
    CU_ASSERT(wait_settled(120000));
    CU_ASSERT_EQUAL(it_engine_stop(pid, 30000), 0);
    CU_ASSERT(it_log_count(e.log, "Kafka unreachable") >= 1);
    CU_ASSERT_EQUAL(q_long("SELECT count(*) FROM ks_outbox WHERE status <> 'PUBLISHED'"), 0);
    check_exactly_once(topic, 1500, NULL);
}

/* --- 7. sequential partition assignment in PostgreSQL -------------------- */

/* The user of a record: its ks.user header. */
static int user_of(const it_msg *m)
{
    const char *h = m->headers ? strstr(m->headers, "ks.user=user-") : NULL;
    return h ? atoi(h + strlen("ks.user=user-")) : -1;
}

/* ks_assign_partitions() while another transaction holds the topic's lock:
 * the second caller waits, then keeps the first one's users where they are
 * and numbers its new ones after them. */
static void assign_waits_for_lock(void)
{
    PGconn *db2 = PQconnectdb(pg_dsn());
    CU_ASSERT_FATAL(PQstatus(db2) == CONNECTION_OK);
    CU_ASSERT(ok("BEGIN"));
    PGresult *r = q("SELECT count(*) FROM ks_assign_partitions('lock-t', ARRAY(SELECT 'u' || g "
                    "FROM generate_series(0, 14) g), 10)",
                    0, NULL);
    CU_ASSERT(r && atoi(PQgetvalue(r, 0, 0)) == 15);
    PQclear(r);
    /* u10..u14 are the first caller's (not yet committed), u15..u29 new */
    CU_ASSERT(PQsendQuery(db2, "SELECT string_agg(user_id || ':' || kafka_partition, ',' ORDER "
                               "BY length(user_id), user_id) FROM ks_assign_partitions('lock-t', "
                               "ARRAY(SELECT 'u' || g FROM generate_series(29, 10, -1) g), 10)"));
    it_sleep_ms(500);
    CU_ASSERT(PQconsumeInput(db2));
    CU_ASSERT(PQisBusy(db2)); /* waiting for the lock */
    CU_ASSERT(ok("COMMIT"));
    r = PQgetResult(db2);
    const char *got = r && PQresultStatus(r) == PGRES_TUPLES_OK ? PQgetvalue(r, 0, 0) : "";
    printf("\n  second caller after the lock: %.60s...", got);
    /* the new users in the second caller's array order: u29 first */
    CU_ASSERT_STRING_EQUAL(got, "u10:1,u11:1,u12:1,u13:1,u14:1,u15:2,u16:2,u17:2,u18:2,u19:2,"
                                "u20:2,u21:2,u22:2,u23:2,u24:2,u25:1,u26:1,u27:1,u28:1,u29:1");
    PQclear(r);
    while ((r = PQgetResult(db2)))
        PQclear(r);
    PQfinish(db2);
}

/* Users whose names need quoting in a text[] literal (the engine sends the
 * new users of a batch as one): each gets its row in ks_user_partitions
 * under exactly its name, and its events are published. */
static void assign_hostile_users(const eng *a, const char *topic)
{
    static const char *const users[] = {"q\"uote", "back\\slash", "{brace,comma}", "NULL",
                                        " spaced ", "\xc3\xbc" "nic\xc3\xb8" "de", "",
                                        "a,b\\\"c"};
    enum { N = sizeof users / sizeof users[0] };
    pid_t pid = eng_start(a, "seq-a", NULL);
    it_sleep_ms(2000);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < N; i++) {
            const char *v[] = {users[i], "hostile"};
            PQclear(q("INSERT INTO ks_outbox (aggregate, payload) VALUES ($1, "
                      "convert_to($2, 'UTF8'))",
                      2, v));
        }
    CU_ASSERT(wait_settled(60000));
    CU_ASSERT_EQUAL(it_engine_stop(pid, 30000), 0);
    int found = 0;
    for (int i = 0; i < N; i++) {
        const char *v[] = {topic, users[i]};
        PGresult *r = q("SELECT count(*) FROM ks_user_partitions WHERE topic = $1 AND "
                        "user_id = $2",
                        2, v);
        found += r && PQntuples(r) && atoi(PQgetvalue(r, 0, 0)) == 1;
        PQclear(r);
    }
    long published = q_long("SELECT count(*) FROM ks_outbox WHERE status = 'PUBLISHED' AND "
                            "payload = convert_to('hostile', 'UTF8')");
    printf("\n  users that need quoting: %d of %d mapped under their exact name, %ld of %d "
           "events published",
           found, N, published, 2 * N);
    CU_ASSERT_EQUAL(found, N);
    CU_ASSERT_EQUAL(published, 2 * N);
}

static void test_sequential_assignment(void)
{
    enum { USERS = 60, PER_USER = 5, MAX_USERS = 10, PARTS = USERS / MAX_USERS };
    CU_ASSERT_FATAL(fresh_schema() == 0);
    assign_waits_for_lock();
    char topic[128];
    it_unique(topic, sizeof topic, "pg-seq");
    CU_ASSERT_FATAL(make_topic(topic, 1) == 0);
    eng a = {0}, b = {0};
    eng_init(&a, "seq-a", topic, NULL, "  max_users_per_partition: 10\n");
    snprintf(b.app, sizeof b.app, "%s", a.app);
    eng_init(&b, "seq-b", topic, NULL, "  max_users_per_partition: 10\n");
    pid_t pa = eng_start(&a, "seq-a", NULL), pb = eng_start(&b, "seq-b", NULL);
    it_sleep_ms(3000);
    /* round after round over all users: both processes meet new users at once */
    for (int k = 0; k < PER_USER; k++) {
        insert_events(USERS, USERS, "seq");
        it_sleep_ms(100);
    }
    CU_ASSERT(wait_settled(120000));
    CU_ASSERT_EQUAL(it_engine_stop(pa, 30000), 0);
    CU_ASSERT_EQUAL(it_engine_stop(pb, 30000), 0);
    long na = it_log_sum_before(a.log, "stopped after publishing ", " events");
    long nb = it_log_sum_before(b.log, "stopped after publishing ", " events");
    printf("\n  process a published %ld, process b %ld; grown: %d + %d log lines", na, nb,
           it_log_count(a.log, "grown from"), it_log_count(b.log, "grown from"));
    CU_ASSERT_EQUAL(na + nb, USERS * PER_USER);
    it_msgs m = {0};
    check_exactly_once(topic, USERS * PER_USER, &m);
    int part[USERS], users_in[PARTS + 1] = {0}, split = 0, unknown = 0;
    for (int u = 0; u < USERS; u++)
        part[u] = -1;
    for (size_t j = 0; j < m.count; j++) {
        int u = user_of(&m.items[j]);
        if (u < 0 || u >= USERS) {
            unknown++;
            continue;
        }
        if (part[u] < 0)
            part[u] = m.items[j].partition;
        split += part[u] != m.items[j].partition;
    }
    for (int u = 0; u < USERS; u++)
        users_in[part[u] >= 0 && part[u] < PARTS ? part[u] : PARTS]++;
    printf("\n  users per partition:");
    for (int p = 0; p < PARTS; p++)
        printf(" %d", users_in[p]);
    printf("; elsewhere %d, users split over partitions %d", users_in[PARTS], split);
    CU_ASSERT_EQUAL(unknown, 0);
    CU_ASSERT_EQUAL(split, 0);
    for (int p = 0; p < PARTS; p++)
        CU_ASSERT_EQUAL(users_in[p], MAX_USERS);
    CU_ASSERT_EQUAL(users_in[PARTS], 0);
    it_msgs_free(&m);
    /* the map in PostgreSQL is what was published */
    const char *v[] = {topic};
    PGresult *r = q("SELECT user_id, kafka_partition FROM ks_user_partitions WHERE topic = $1",
                    1, v);
    int rows = r ? PQntuples(r) : 0, differ = 0;
    for (int i = 0; i < rows; i++) {
        int u = atoi(PQgetvalue(r, i, 0) + strlen("user-"));
        differ += u < 0 || u >= USERS || part[u] != atoi(PQgetvalue(r, i, 1));
    }
    PQclear(r);
    printf("\n  ks_user_partitions: %d rows, %d differ from the topic", rows, differ);
    CU_ASSERT_EQUAL(rows, USERS);
    CU_ASSERT_EQUAL(differ, 0);
    /* the topic was grown from 1 to exactly 6 partitions */
    char err[512];
    rd_kafka_t *admin = it_admin_client();
    int n = admin ? ks_kafka_partition_count(admin, topic, 10000, err, sizeof err) : -1;
    if (admin)
        rd_kafka_destroy(admin);
    printf("\n  %s: %d partitions", topic, n);
    CU_ASSERT_EQUAL(n, PARTS);
    CU_ASSERT(it_log_count(a.log, "grown from") + it_log_count(b.log, "grown from") >= 1);
    assign_hostile_users(&a, topic);
}

/* --- 8. libpq cannot be loaded ------------------------------------------- */

static void test_libpq_missing(void)
{
    CU_ASSERT_FATAL(fresh_schema() == 0);
    char topic[128];
    it_unique(topic, sizeof topic, "pg-nolib");
    CU_ASSERT_FATAL(make_topic(topic, 1) == 0);
    CU_ASSERT(ok("INSERT INTO ks_outbox (aggregate, payload) VALUES ('nolib', "
                 "convert_to('waits', 'UTF8'))"));
    eng e = {0};
    eng_init(&e, "nolib", topic, NULL, NULL);
    static char env[600]; /* putenv keeps the pointer */
    snprintf(env, sizeof env, "KS_LIBPQ=%s/missing/libpq.so.5", dir);
    setenv("KS_TEST_PG_DSN", pg_dsn(), 1);
    pid_t pid = it_engine_start_env(e.yaml, "nolib", e.log, env);
    int st = it_engine_wait(pid, 30000);
    if (st < 0)
        it_engine_kill(pid);
    char want[600];
    snprintf(want, sizeof want, "PostgreSQL backend: cannot load %s/missing/libpq.so.5: ", dir);
    printf("\n  KS_LIBPQ missing: exit %d, %d error lines", st, it_log_count(e.log, want));
    CU_ASSERT_EQUAL(st, 2); /* an invalid pipeline, not a crash or a hang */
    CU_ASSERT(it_log_count(e.log, want) >= 1);
    CU_ASSERT(it_log_count(e.log, "install the Debian package libpq5") >= 1);
    CU_ASSERT_EQUAL(q_long("SELECT count(*) FROM ks_outbox WHERE status = 'PENDING'"), 1);
}

int main(void)
{
    it_tempdir(dir, sizeof dir);
    db = PQconnectdb(pg_dsn());
    if (PQstatus(db) != CONNECTION_OK) {
        fprintf(stderr, "PostgreSQL unreachable (start it with scripts/postgres.sh start): %s",
                PQerrorMessage(db));
        PQfinish(db);
        printf("outbox_pg: 0 passed, 1 failed\n");
        return 1;
    }
    PQclear(PQexec(db, "SET client_min_messages = warning"));
    static const it_case cases[] = {{"the application's transaction", test_transaction},
                                    {"illegal transitions refused", test_illegal_transition},
                                    {"kill -9 mid-dispatch", test_kill9},
                                    {"two processes, one table", test_two_processes},
                                    {"PostgreSQL restarted during dispatch", test_pg_restart},
                                    {"Kafka stopped while inserting", test_kafka_down},
                                    {"sequential assignment in PostgreSQL",
                                     test_sequential_assignment},
                                    {"libpq cannot be loaded", test_libpq_missing},
                                    {NULL, NULL}};
    int rc = it_main("outbox_pg", cases);
    PQfinish(db);
    return rc;
}
