/*
 * test_outbox.c - the outbox against the real broker: the HTTP endpoint,
 * the dispatcher, sequential partition assignment and the stale-dispatch
 * probe, with real `kstreams run` processes, SIGKILL and a broker outage.
 *
 *   1. broker stopped: 5 000 events for 500 users are accepted (201);
 *      broker started: each event in the topic exactly once, each user in
 *      one partition with its events in order, 100 users per partition
 *      (the topic grew from 1 to 5 partitions), every row PUBLISHED
 *   2. bad HTTP inputs: each a 4xx with a reason, nothing written
 *   3. kill -9 during dispatch: the engine kills itself with a batch of
 *      500 rows DISPATCHING, its records acknowledged (the probe must find
 *      all 500) or only handed to the producer (the probe decides each),
 *      then a SIGKILL from the test right after a claim; after a restart
 *      the stale rows are resolved by the probe (its log lines are
 *      asserted), nothing lost, nothing published twice, order kept
 *   4. two engine instances of one application assigning the same users
 *      at once: no user in two partitions, no partition over capacity
 *   5. events from a processor (api->outbox_enqueue): a plugin bumps a
 *      per-user count and hands the outbox one event per record; with
 *      kill -9 at seeded moments, every record yields exactly one row and
 *      one published event, and each user's n runs 0, 1, 2... with no
 *      gap and no repeat (the event and the store write commit together)
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "itest.h"

#define USERS 500
#define PER_USER 10

static char dir[256];

static int post_event(int port, const char *user, int n)
{
    char body[256], resp[512];
    snprintf(body, sizeof body, "{\"user\":\"%s\",\"payload\":{\"u\":\"%s\",\"n\":%d}}", user,
             user, n);
    return it_http(port, "POST", "/outbox/commands/events", body, resp, sizeof resp);
}

/* --- the engine --------------------------------------------------------- */

static int kafka_port(void)
{
    const char *c = strrchr(it_bootstrap(), ':');
    return c ? atoi(c + 1) : 9092;
}

static int kafka_script(const char *verb)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "KAFKA_PORT=%d %s/../scripts/kafka.sh %s >/dev/null 2>&1",
             kafka_port(), KS_TEST_SRCDIR, verb);
    return system(cmd);
}

typedef struct eng {
    char app[128], topic[128], yaml[512], log[512], state[512];
    int port;
    int metrics_port; /* 0: no metrics endpoint */
} eng;

/* Names and files of an engine `tag` in the test's directory. */
static void eng_paths(eng *e, const char *app, const char *topic, int port, const char *tag)
{
    snprintf(e->app, sizeof e->app, "%s", app);
    snprintf(e->topic, sizeof e->topic, "%s", topic);
    e->port = port;
    e->metrics_port = 0;
    snprintf(e->yaml, sizeof e->yaml, "%s/%s.yaml", dir, tag);
    snprintf(e->log, sizeof e->log, "%s/%s.log", dir, tag);
    snprintf(e->state, sizeof e->state, "%s/state-%s", dir, tag);
}

/* Write e's pipeline file, its Kafka at `bootstrap`. */
static void eng_write(const eng *e, const char *bootstrap, int max_users,
                      const char *extra_kafka)
{
    it_write_file(e->yaml,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s], properties: { %s } }\n"
                  "state_dir: %s\n"
                  "sources:\n"
                  "  in: { topic: %s-in, create: true, partitions: 1 }\n"
                  "sinks:\n"
                  "  - { from: in, topic: %s-out, create: true, partitions: 1 }\n"
                  "outbox:\n"
                  "  name: commands\n"
                  "  topic: %s\n"
                  "  listen: 127.0.0.1:%d\n"
                  "  max_users_per_partition: %d\n"
                  "  stale_after: 2s\n"
                  "  max_event_bytes: 4KiB\n"
                  "  retry: { max_attempts: 1000 }\n",
                  e->app, bootstrap, extra_kafka ? extra_kafka : "", e->state, e->app,
                  e->app, e->topic, e->port, max_users);
    if (e->metrics_port) {
        FILE *f = fopen(e->yaml, "a");
        if (f) {
            fprintf(f, "metrics: 127.0.0.1:%d\n", e->metrics_port);
            fclose(f);
        }
    }
}

/* The outbox's sample of `family` (with `match` in its labels) on e's
 * /metrics; -1 when there is none. */
static double outbox_metric(const eng *e, const char *family, const char *match)
{
    char *text = it_metrics_scrape(e->metrics_port), labels[128];
    snprintf(labels, sizeof labels, "outbox=\"commands\"%s", match ? match : "");
    int samples = 0;
    double v = text ? it_metrics_sum(text, family, labels, &samples) : 0;
    free(text);
    return samples == 1 ? v : -1;
}
static void eng_init(eng *e, const char *app, const char *topic, int port, int max_users,
                     const char *extra_kafka, const char *tag)
{
    eng_paths(e, app, topic, port, tag);
    eng_write(e, it_bootstrap(), max_users, extra_kafka);
}

/* Count of rows in `status` from `kstreams outbox-status FILE`; -1 on error. */
static long count_status(const eng *e, const char *status, long *total)
{
    char cmd[1024], line[256];
    snprintf(cmd, sizeof cmd, "%s outbox-status %s 2>/dev/null", it_kstreams(), e->yaml);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    long want = -1, sum = 0;
    while (fgets(line, sizeof line, f)) {
        char name[64];
        long n;
        if (sscanf(line, "%63s %ld", name, &n) != 2)
            continue;
        sum += n;
        if (strcmp(name, status) == 0)
            want = n;
    }
    pclose(f);
    if (total)
        *total = sum;
    return want;
}

static int wait_published(const eng *e, long n, int max_ms)
{
    int64_t end = it_now_ms() + max_ms;
    while (it_now_ms() < end) {
        if (count_status(e, "PUBLISHED", NULL) == n)
            return 1;
        it_sleep_ms(500);
    }
    return 0;
}

/* --- checking the topic --------------------------------------------------- */

typedef struct user_seen {
    int partition;
    int last_n;
    int count;
    unsigned char *seen; /* per n: how often */
} user_seen;

/* Read `topic`: every (user, n) exactly once, a user's n increasing in its
 * one partition (unless !ordered: several outboxes publish one user's
 * events, and their order is not promised). Returns the number of users
 * per partition in per_part. */
static void check_topic_ex(const char *topic, int users, int per_user, int *per_part,
                           int nparts, int ordered)
{
    long expect = (long)users * per_user;
    it_msgs out = {0};
    it_consume(topic, (size_t)expect, 3000, 90000, &out);
    user_seen *seen = calloc((size_t)users, sizeof *seen);
    for (int u = 0; u < users; u++)
        seen[u].partition = -1, seen[u].last_n = -1;
    long dups = 0, disorder = 0, split = 0, foreign = 0;
    /* it_consume returns each partition in offset order */
    for (size_t i = 0; i < out.count; i++) {
        const it_msg *m = &out.items[i];
        int u = -1, n = -1;
        if (!m->value || sscanf(m->value, "{\"u\":\"user-%d\",\"n\":%d}", &u, &n) != 2 ||
            u < 0 || u >= users) {
            foreign++;
            continue;
        }
        char key[32];
        snprintf(key, sizeof key, "user-%03d", u);
        if (!m->key || strcmp(m->key, key) != 0)
            foreign++;
        user_seen *s = &seen[u];
        if (s->partition < 0)
            s->partition = m->partition;
        else if (s->partition != m->partition)
            split++;
        if (!s->seen)
            s->seen = calloc((size_t)per_user, 1);
        if (n >= 0 && n < per_user && s->seen && s->seen[n]++)
            dups++;
        else if (n < s->last_n)
            disorder++;
        if (n > s->last_n)
            s->last_n = n;
        s->count++;
    }
    long lost = 0;
    for (int u = 0; u < users; u++) {
        for (int n = 0; n < per_user; n++)
            lost += !seen[u].seen || !seen[u].seen[n];
        if (seen[u].partition >= 0 && seen[u].partition < nparts)
            per_part[seen[u].partition]++;
    }
    printf("\n  %s: %zu records for %ld events: %ld lost, %ld duplicates, %ld out of "
           "order, %ld users in two partitions, %ld foreign\n",
           topic, out.count, expect, lost, dups, disorder, split, foreign);
    CU_ASSERT_EQUAL(out.count, (size_t)expect);
    CU_ASSERT_EQUAL(lost, 0);
    CU_ASSERT_EQUAL(dups, 0);
    if (ordered)
        CU_ASSERT_EQUAL(disorder, 0);
    CU_ASSERT_EQUAL(split, 0);
    CU_ASSERT_EQUAL(foreign, 0);
    for (int u = 0; u < users; u++)
        free(seen[u].seen);
    free(seen);
    it_msgs_free(&out);
}

static void check_topic(const char *topic, int users, int per_user, int *per_part,
                        int nparts)
{
    check_topic_ex(topic, users, per_user, per_part, nparts, 1);
}

/* --- 1. accepted while Kafka is down ------------------------------------ */

static eng e1;

static void test_accept_while_down(void)
{
    it_tempdir(dir, sizeof dir);
    char app[128], topic[128];
    it_unique(app, sizeof app, "outbox");
    it_unique(topic, sizeof topic, "mailbox");
    int port = it_port_base(40);
    eng_paths(&e1, app, topic, port, "a");
    e1.metrics_port = port + 39; /* the outbox's metrics, served while Kafka is down */
    eng_write(&e1, it_bootstrap(), 100, NULL);
    CU_ASSERT_EQUAL_FATAL(kafka_script("stop-keep"), 0);
    pid_t pid = it_engine_start(e1.yaml, "a", e1.log);
    CU_ASSERT_EQUAL(it_http_wait(port, "/outbox/events/x", 10000), 0);
    int64_t t0 = it_now_ms();
    int ok = 0;
    /* round-robin over users: user u's k-th event carries n = k */
    for (int k = 0; k < PER_USER; k++)
        for (int u = 0; u < USERS; u++) {
            char user[32];
            snprintf(user, sizeof user, "user-%03d", u);
            ok += post_event(port, user, k) == 201;
        }
    printf("\n  broker down: %d of %d events accepted in %lld ms\n", ok, USERS * PER_USER,
           (long long)(it_now_ms() - t0));
    CU_ASSERT_EQUAL(ok, USERS * PER_USER);
    CU_ASSERT_EQUAL(count_status(&e1, "PENDING", NULL), USERS * PER_USER);
    /* the dispatcher noticed (its first metadata call times out after 5 s) */
    for (int i = 0; i < 100 && it_log_count(e1.log, "Kafka unreachable") < 1; i++)
        it_sleep_ms(100);
    CU_ASSERT(it_log_count(e1.log, "Kafka unreachable") >= 1);
    /* metrics: the backlog while Kafka is down (published between the
     * dispatcher's reconnection attempts, each up to a 5 s metadata wait) */
    double backlog = -1;
    for (int i = 0; i < 60 && backlog != USERS * PER_USER; i++) {
        it_sleep_ms(250);
        backlog = outbox_metric(&e1, "kstreams_outbox_backlog", NULL);
    }
    double entered = outbox_metric(&e1, "kstreams_outbox_entered_total", ",status=\"PENDING\"");
    printf("  metrics while down: backlog %.0f, entered PENDING %.0f\n", backlog, entered);
    CU_ASSERT_EQUAL(backlog, USERS * PER_USER);
    CU_ASSERT_EQUAL(entered, USERS * PER_USER);
    CU_ASSERT_EQUAL_FATAL(kafka_script("start"), 0);
    t0 = it_now_ms();
    CU_ASSERT(wait_published(&e1, USERS * PER_USER, 120000));
    printf("  broker up: all published %lld ms later\n", (long long)(it_now_ms() - t0));
    it_sleep_ms(1200);
    double published =
        outbox_metric(&e1, "kstreams_outbox_entered_total", ",status=\"PUBLISHED\"");
    backlog = outbox_metric(&e1, "kstreams_outbox_backlog", NULL);
    printf("  metrics after: backlog %.0f, entered PUBLISHED %.0f\n", backlog, published);
    CU_ASSERT_EQUAL(backlog, 0);
    CU_ASSERT_EQUAL(published, USERS * PER_USER);
    CU_ASSERT_EQUAL(it_engine_stop(pid, 30000), 0);
    int per_part[8] = {0};
    check_topic(topic, USERS, PER_USER, per_part, 8);
    /* sequential assignment: 100 users fill partition 0, then 1, ... */
    for (int p = 0; p < 5; p++)
        CU_ASSERT_EQUAL(per_part[p], 100);
    CU_ASSERT_EQUAL(per_part[5], 0);
    CU_ASSERT(it_log_count(e1.log, "grown from") >= 1);
    long total;
    CU_ASSERT_EQUAL(count_status(&e1, "PUBLISHED", &total), USERS * PER_USER);
    CU_ASSERT_EQUAL(total, USERS * PER_USER);
}

/* --- 2. bad inputs ---------------------------------------------------- */

static void test_bad_inputs(void)
{
    pid_t pid = it_engine_start(e1.yaml, "a", e1.log);
    CU_ASSERT_EQUAL(it_http_wait(e1.port, "/outbox/events/x", 10000), 0);
    long before, after;
    count_status(&e1, "PUBLISHED", &before);
    char big[6000], resp[1024];
    snprintf(big, sizeof big, "{\"user\":\"u\",\"payload\":\"%0*d\"}", 5000, 0);
    static const struct {
        const char *method, *path, *body;
        int code;
        const char *reason;
    } cases[] = {
        {"POST", "/outbox/commands/events", "{\"user\":", 400, "malformed JSON"},
        {"POST", "/outbox/commands/events", "[1,2]", 400, "expected a JSON object"},
        {"POST", "/outbox/commands/events", "{\"payload\":{}}", 400, "\\\"user\\\""},
        {"POST", "/outbox/commands/events", "{\"user\":\"\",\"payload\":{}}", 400,
         "\\\"user\\\""},
        {"POST", "/outbox/commands/events", "{\"user\":7,\"payload\":{}}", 400, "\\\"user\\\""},
        {"POST", "/outbox/commands/events", "{\"user\":\"u\"}", 400, "missing \\\"payload\\\""},
        {"POST", "/outbox/commands/events", "{\"user\":\"u\",\"payload\":1,\"x\":1}", 400,
         "unknown field"},
        {"POST", "/outbox/orders/events", "{\"user\":\"u\",\"payload\":{}}", 404,
         "unknown outbox 'orders'"},
        {"POST", "/outbox/commands/events", NULL, 413, "max_event_bytes"},
        {"GET", "/outbox/commands/events", NULL, 405, "use POST"},
        {"GET", "/outbox/events/0123456789abcdef0123456789abcdef", NULL, 404, "no such event"},
        {"POST", "/elsewhere", "{}", 404, "unknown path"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *body = cases[i].code == 413 ? big : cases[i].body;
        int code = it_http(e1.port, cases[i].method, cases[i].path, body, resp, sizeof resp);
        if (code != cases[i].code || !strstr(resp, cases[i].reason))
            printf("\n  case %zu: %d %s\n", i, code, resp);
        CU_ASSERT_EQUAL(code, cases[i].code);
        CU_ASSERT_PTR_NOT_NULL(strstr(resp, cases[i].reason));
    }
    CU_ASSERT_EQUAL(it_engine_stop(pid, 30000), 0);
    count_status(&e1, "PUBLISHED", &after);
    CU_ASSERT_EQUAL(after, before); /* nothing written */
}

/* --- 3. kill -9 during dispatch ----------------------------------------- */

/* Post the 500 events (100 users x 5) of the kill test. */
static void post_kill_events(const eng *e)
{
    for (int k = 0; k < 5; k++)
        for (int u = 0; u < 100; u++) {
            char user[32];
            snprintf(user, sizeof user, "user-%03d", u);
            CU_ASSERT_EQUAL(post_event(e->port, user, k), 201);
        }
}

/* The first engine dies at a crash point of its first batch (fault.h).
 * The events are accepted first by the same outbox with Kafka out of
 * reach, so that the batch holds many rows and no post meets the crash. */
static void run_to_crash_point(const eng *e, const char *crash_at)
{
    eng down = *e;
    snprintf(down.yaml, sizeof down.yaml, "%.500s.down", e->yaml);
    char nowhere[64];
    snprintf(nowhere, sizeof nowhere, "127.0.0.1:%d", it_free_port());
    eng_write(&down, nowhere, 20, "linger.ms: 1000");
    pid_t pid = it_engine_start(down.yaml, "k", e->log);
    CU_ASSERT_EQUAL(it_http_wait(e->port, "/outbox/events/x", 10000), 0);
    post_kill_events(e);
    it_engine_stop(pid, 30000); /* exits 1: Kafka was never reachable */
    pid = it_engine_start_env(e->yaml, "k", e->log, crash_at);
    int st = it_engine_wait(pid, 60000);
    printf("\n  %s -> exit %d", crash_at, st);
    CU_ASSERT_EQUAL(st, 137);
}

/* SIGKILL this long after rows are seen DISPATCHING. */
static void run_to_kill(const eng *e, int kill_after_ms)
{
    pid_t pid = it_engine_start(e->yaml, "k", e->log);
    CU_ASSERT_EQUAL(it_http_wait(e->port, "/outbox/events/x", 10000), 0);
    post_kill_events(e);
    for (int i = 0; i < 500 && count_status(e, "DISPATCHING", NULL) <= 0; i++)
        it_sleep_ms(10);
    it_sleep_ms(kill_after_ms);
    it_engine_kill(pid);
    printf("\n  SIGKILL %d ms after rows were DISPATCHING", kill_after_ms);
}

static void test_kill9_probe(void)
{
    static const struct {
        const char *crash_at; /* the engine kills itself there, or NULL: */
        int kill_after_ms;    /* the test kills it this long after a claim */
        int all_found;        /* every DISPATCHING record is in Kafka */
    } kills[] = {
        {"KS_CRASH_AT=outbox-dispatch-acked:1", 0, 1},
        {"KS_CRASH_AT=outbox-dispatch-produced:1", 0, 0},
        {NULL, 0, 0}, /* lands with rows DISPATCHING on most runs, not all */
    };
    if (!dir[0])
        it_tempdir(dir, sizeof dir);
    if (!e1.port)
        e1.port = it_port_base(40);
    for (size_t s = 0; s < sizeof kills / sizeof kills[0]; s++) {
        eng e;
        char app[128], topic[128], tag[16];
        it_unique(app, sizeof app, "obkill");
        it_unique(topic, sizeof topic, "mailbox-kill");
        snprintf(tag, sizeof tag, "kill%zu", s);
        /* linger keeps each batch in flight for a while: a kill lands
         * with rows DISPATCHING */
        eng_init(&e, app, topic, e1.port + 1 + (int)s, 20, "linger.ms: 1000", tag);
        if (kills[s].crash_at)
            run_to_crash_point(&e, kills[s].crash_at);
        else
            run_to_kill(&e, kills[s].kill_after_ms);
        long dispatching = count_status(&e, "DISPATCHING", NULL);
        pid_t pid = it_engine_start(e.yaml, "k", e.log);
        CU_ASSERT(wait_published(&e, 500, 90000));
        CU_ASSERT_EQUAL(it_engine_stop(pid, 30000), 0);
        /* decisions: probe lines per partition, or one line per row that
         * was killed before it had a partition */
        int lines = it_log_count(e.log, "stale dispatch probe") +
                    it_log_count(e.log, "had no partition yet -> PENDING");
        /* what the probe decided, from its log lines */
        long hit = it_log_sum_before(e.log, ": ", " found -> PUBLISHED");
        long miss = it_log_sum_before(e.log, "PUBLISHED, ", " absent -> PENDING") +
                    it_log_sum_before(e.log, "published, ", " absent -> PENDING") +
                    /* killed while assigning: nothing was produced */
                    it_log_count(e.log, "had no partition yet -> PENDING");
        printf(": %ld rows DISPATCHING; %d probe lines: %ld found -> PUBLISHED, %ld absent "
               "-> PENDING",
               dispatching, lines, hit, miss);
        if (kills[s].crash_at)
            CU_ASSERT(dispatching > 0); /* a crash point is always mid-batch */
        if (dispatching > 0) {
            /* the probe ran and decided every row left DISPATCHING */
            CU_ASSERT(lines >= 1);
            CU_ASSERT_EQUAL(hit + miss, dispatching);
        }
        if (kills[s].all_found)
            CU_ASSERT_EQUAL(hit, dispatching);
        int per_part[8] = {0};
        check_topic(topic, 100, 5, per_part, 8);
    }
}

/* --- 4. two instances assign at once ------------------------------------- */

static void test_two_instances(void)
{
    eng a, b;
    char app[128], topic[128];
    it_unique(app, sizeof app, "obtwo");
    it_unique(topic, sizeof topic, "mailbox-two");
    eng_init(&a, app, topic, e1.port + 10, 30, NULL, "two-a");
    eng_init(&b, app, topic, e1.port + 11, 30, NULL, "two-b");
    pid_t pa = it_engine_start(a.yaml, "two-a", a.log);
    pid_t pb = it_engine_start(b.yaml, "two-b", b.log);
    CU_ASSERT_EQUAL(it_http_wait(a.port, "/outbox/events/x", 10000), 0);
    CU_ASSERT_EQUAL(it_http_wait(b.port, "/outbox/events/x", 10000), 0);
    /* the same 150 users through both instances, interleaved; event n of a
     * user goes to instance n % 2, so both assign every user */
    for (int k = 0; k < 4; k++)
        for (int u = 0; u < 150; u++) {
            char user[32];
            snprintf(user, sizeof user, "user-%03d", u);
            CU_ASSERT_EQUAL(post_event(k % 2 ? b.port : a.port, user, k), 201);
        }
    CU_ASSERT(wait_published(&a, 300, 90000));
    CU_ASSERT(wait_published(&b, 300, 90000));
    CU_ASSERT_EQUAL(it_engine_stop(pa, 30000), 0);
    CU_ASSERT_EQUAL(it_engine_stop(pb, 30000), 0);
    /* order across instances is not promised (two outboxes), so only the
     * assignment is checked here */
    it_msgs out = {0};
    it_consume(topic, 600, 3000, 60000, &out);
    int part[150], split = 0, per_part[16] = {0};
    for (int u = 0; u < 150; u++)
        part[u] = -1;
    for (size_t i = 0; i < out.count; i++) {
        int u;
        if (!out.items[i].key || sscanf(out.items[i].key, "user-%d", &u) != 1 || u < 0 ||
            u >= 150)
            continue;
        if (part[u] < 0) {
            part[u] = out.items[i].partition;
            if (part[u] < 16)
                per_part[part[u]]++;
        } else if (part[u] != out.items[i].partition)
            split++;
    }
    printf("\n  two instances: %zu records, %d users in two partitions, users per "
           "partition %d %d %d %d %d %d\n",
           out.count, split, per_part[0], per_part[1], per_part[2], per_part[3],
           per_part[4], per_part[5]);
    CU_ASSERT_EQUAL(out.count, 600);
    CU_ASSERT_EQUAL(split, 0);
    for (int p = 0; p < 5; p++)
        CU_ASSERT_EQUAL(per_part[p], 30);
    it_msgs_free(&out);
}

/* --- 5. events from a processor ------------------------------------------ */

#define PE_USERS 100
#define PE_PER_USER 20
#define PE_CHUNKS 4

static void pe_make(int i, char *key, size_t klen, char *value, size_t vlen,
                    int32_t *partition, void *arg)
{
    (void)arg;
    (void)partition;
    snprintf(key, klen, "user-%03d", i % PE_USERS);
    snprintf(value, vlen, "order-%d", i);
}

/* An engine running tests/plugins/notify.c (one outbox event per input
 * record) on `<app>-in` (3 partitions), its outbox publishing to `topic`. */
static void proc_eng_init(eng *e, const char *app, const char *topic, int port,
                          const char *tag)
{
    eng_paths(e, app, topic, port, tag);
    it_write_file(e->yaml,
                  "application: %s\n"
                  /* a killed member leaves the groups after 6 s, not 45 */
                  "kafka: { bootstrap: [%s], properties: { session.timeout.ms: 6000 } }\n"
                  "state_dir: %s\n"
                  "guarantee: exactly-once\n"
                  "commit_interval_ms: 200\n"
                  "plugins: [%s/plugins/.libs/notify.so]\n"
                  "sources:\n"
                  "  in: { topic: %s-in, create: true, partitions: 3 }\n"
                  "nodes:\n"
                  "  - { name: notify, type: notify.notify, from: in, stores: [counts] }\n"
                  "sinks:\n"
                  "  - { from: notify, topic: %s-out, create: true }\n"
                  "outbox:\n"
                  "  name: commands\n"
                  "  topic: %s\n"
                  "  listen: 127.0.0.1:%d\n"
                  "  max_users_per_partition: 40\n"
                  "  stale_after: 2s\n",
                  app, it_bootstrap(), e->state, KS_TEST_BUILDDIR "/tests", app, app, topic,
                  port);
}

static void test_processor_events(void)
{
    if (!dir[0])
        it_tempdir(dir, sizeof dir);
    if (!e1.port)
        e1.port = it_port_base(40);
    eng e;
    char app[128], topic[128];
    it_unique(app, sizeof app, "obproc");
    it_unique(topic, sizeof topic, "mailbox-proc");
    proc_eng_init(&e, app, topic, e1.port + 20, "proc");
    char in[160];
    snprintf(in, sizeof in, "%s-in", app);
    CU_ASSERT_EQUAL_FATAL(it_create_topic(in, 3), 0);
    unsigned seed = getenv("KS_SEED") ? (unsigned)atoi(getenv("KS_SEED")) : (unsigned)getpid();
    printf("\n  seed %u (KS_SEED reruns it)\n", seed);
    srand(seed);
    const int total = PE_USERS * PE_PER_USER;
    const int chunk = total / PE_CHUNKS;
    /* chunks 0-2 end in a crash at a named point of the commit sequence
     * (KS_CRASH_AT, engine/base/fault.h), chunk 3 in a SIGKILL at a seeded
     * moment */
    static const char *const crash_at[PE_CHUNKS] = {
        "KS_CRASH_AT=after-kafka-commit:1",        /* Kafka committed, LMDB not */
        "KS_CRASH_AT=outbox-requests-held:1",      /* rows held, offsets not committed */
        "KS_CRASH_AT=outbox-requests-committed:1", /* committed, rows not released */
        NULL};
    pid_t pid = 0;
    for (int c = 0; c < PE_CHUNKS; c++) {
        long before = 0, now_rows = 0;
        count_status(&e, "PENDING", &before);
        pid = it_engine_start_env(e.yaml, "proc", e.log, crash_at[c]);
        CU_ASSERT_EQUAL(it_produce(in, chunk, pe_make, NULL), 0);
        if (crash_at[c]) {
            int st = it_engine_wait(pid, 90000);
            printf("  chunk %d: %s -> exit %d\n", c, crash_at[c], st);
            CU_ASSERT_EQUAL(st, 128 + 9);
            if (st < 0)
                it_engine_kill(pid);
            continue;
        }
        for (int i = 0; i < 600 && now_rows <= before; i++) {
            it_sleep_ms(100);
            count_status(&e, "PENDING", &now_rows);
        }
        int after = rand() % 600;
        it_sleep_ms(after);
        count_status(&e, "PENDING", &now_rows);
        printf("  chunk %d: kill -9 %d ms after the first new rows (%ld rows, %d records "
               "sent)\n",
               c, after, now_rows, (c + 1) * chunk);
        CU_ASSERT(now_rows > before);
        it_engine_kill(pid);
    }
    pid = it_engine_start(e.yaml, "proc", e.log);
    int done = wait_published(&e, total, 120000);
    long rows = 0;
    long published = count_status(&e, "PUBLISHED", &rows);
    CU_ASSERT_EQUAL(it_engine_stop(pid, 30000), 0);
    printf("  %ld rows, %ld PUBLISHED\n", rows, published);
    CU_ASSERT(done);
    CU_ASSERT_EQUAL(rows, total);
    CU_ASSERT_EQUAL(published, total);
    /* the pe_make values run i = u, u+100, ...: every user's n 0..19 */
    int per_part[8] = {0};
    check_topic(topic, PE_USERS, PE_PER_USER, per_part, 8);
    /* 40 users per partition: 40, 40, 20 */
    CU_ASSERT_EQUAL(per_part[0], 40);
    CU_ASSERT_EQUAL(per_part[1], 40);
    CU_ASSERT_EQUAL(per_part[2], 20);
    /* the crash points were each reached and recovered from */
    CU_ASSERT(it_log_count(e.log, "forgotten (their requests were not committed") >= 1);
}

/* --- 6. a takeover after a crash between hold and commit ---------------- */

/* Assignments of some partition of the requests topic in `log` so far. */
static int requests_assignments(const char *log)
{
    return it_log_count(log, "reading 1 partition of") +
           it_log_count(log, "reading 2 partitions of") +
           it_log_count(log, "reading 3 partitions of");
}

/* Wait until `log` shows more than `seen` such assignments. */
static int wait_requests_owner(const char *log, int seen, int max_ms)
{
    for (int64_t end = it_now_ms() + max_ms; it_now_ms() < end; it_sleep_ms(200))
        if (requests_assignments(log) > seen)
            return 1;
    return 0;
}

/* Engine A holds requests and dies before committing their offsets; B
 * takes the partitions over and reads the same requests into its own
 * outbox. When A comes back, its held rows lie below B's commit: A must
 * forget them (B has the events), not publish them a second time. With
 * `via_c`, B hands over to a third engine C before A returns, so the last
 * commit A finds is C's, who began reading above A's rows: only the holder
 * chain in the commit metadata still shows that B read them. */
static void takeover_run(int via_c)
{
    if (!dir[0])
        it_tempdir(dir, sizeof dir);
    if (!e1.port)
        e1.port = it_port_base(40);
    eng a, b, c;
    char app[128], topic[128], in[160];
    it_unique(app, sizeof app, "obtake");
    it_unique(topic, sizeof topic, "mailbox-take");
    int port = e1.port + (via_c ? 33 : 30);
    proc_eng_init(&a, app, topic, port, via_c ? "take3-a" : "take-a");
    proc_eng_init(&b, app, topic, port + 1, via_c ? "take3-b" : "take-b");
    proc_eng_init(&c, app, topic, port + 2, "take3-c");
    snprintf(in, sizeof in, "%s-in", app);
    CU_ASSERT_EQUAL_FATAL(it_create_topic(in, 3), 0);
    pid_t pb = it_engine_start(b.yaml, "take-b", b.log), pc = -1;
    CU_ASSERT_FATAL(wait_requests_owner(b.log, 0, 60000));
    pid_t pa = it_engine_start_env(a.yaml, "take-a", a.log, "KS_CRASH_AT=outbox-requests-held:1");
    CU_ASSERT_FATAL(wait_requests_owner(a.log, 0, 60000));
    const int total = PE_USERS * PE_PER_USER, half = total / 2, quarter = total / 4;
    CU_ASSERT_EQUAL(it_produce(in, half, pe_make, NULL), 0);
    int st = it_engine_wait(pa, 90000);
    printf("\n  A: KS_CRASH_AT=outbox-requests-held:1 -> exit %d\n", st);
    CU_ASSERT_EQUAL(st, 128 + 9);
    if (st < 0)
        it_engine_kill(pa);
    /* B owns everything after A's session times out, and publishes all */
    CU_ASSERT(wait_published(&b, half, 120000));
    int produced = half;
    if (via_c) {
        /* B hands over to C, whose commits start above A's held rows */
        CU_ASSERT_EQUAL(it_engine_stop(pb, 30000), 0);
        pc = it_engine_start(c.yaml, "take-c", c.log);
        CU_ASSERT(wait_requests_owner(c.log, 0, 60000));
        CU_ASSERT_EQUAL(it_produce(in, quarter, pe_make, NULL), 0);
        CU_ASSERT(wait_published(&c, quarter, 120000));
        produced += quarter;
    }
    int before = requests_assignments(a.log);
    pa = it_engine_start(a.yaml, "take-a", a.log);
    /* the rest once A reads requests again: both outboxes publish */
    CU_ASSERT(wait_requests_owner(a.log, before, 60000));
    CU_ASSERT_EQUAL(it_produce(in, total - produced, pe_make, NULL), 0);
    long rows_a = 0, rows_b = 0, rows_c = 0, pub_a = 0, pub_b = 0, pub_c = 0;
    for (int64_t end = it_now_ms() + 120000; it_now_ms() < end; it_sleep_ms(500)) {
        pub_a = count_status(&a, "PUBLISHED", &rows_a);
        pub_b = count_status(&b, "PUBLISHED", &rows_b);
        if (via_c)
            pub_c = count_status(&c, "PUBLISHED", &rows_c);
        if (pub_a + pub_b + pub_c >= total)
            break;
    }
    CU_ASSERT_EQUAL(it_engine_stop(pa, 30000), 0);
    CU_ASSERT_EQUAL(it_engine_stop(via_c ? pc : pb, 30000), 0);
    int forgot = it_log_count(a.log, "forgotten (their requests were not committed");
    printf("  rows: A %ld (%ld PUBLISHED), B %ld (%ld PUBLISHED)", rows_a, pub_a, rows_b,
           pub_b);
    if (via_c)
        printf(", C %ld (%ld PUBLISHED)", rows_c, pub_c);
    printf("; A forgot at start: %s\n", forgot ? "yes" : "no");
    /* A held rows at its crash and settled them by the later commits */
    CU_ASSERT(forgot >= 1);
    CU_ASSERT_EQUAL(rows_a + rows_b + rows_c, total);
    CU_ASSERT_EQUAL(pub_a + pub_b + pub_c, total);
    int per_part[8] = {0};
    /* two outboxes publish a user's events: exactly once, order not promised */
    check_topic_ex(topic, PE_USERS, PE_PER_USER, per_part, 8, 0);
}

static void test_requests_takeover(void) { takeover_run(0); }
static void test_requests_two_takeovers(void) { takeover_run(1); }

int main(void)
{
    static const it_case cases[] = {
        {"5000 events accepted while Kafka is down, then published once", test_accept_while_down},
        {"bad HTTP inputs are 4xx and write nothing", test_bad_inputs},
        {"kill -9 during dispatch: stale rows resolved by the probe", test_kill9_probe},
        {"two instances never assign a user two partitions", test_two_instances},
        {"events from a processor: exactly once through kill -9", test_processor_events},
        {"events from a processor: a takeover after a crash publishes nothing twice",
         test_requests_takeover},
        {"events from a processor: two takeovers before the crashed instance returns",
         test_requests_two_takeovers},
        {NULL, NULL}};
    /* KS_TEST_CASE: run only these cases, by index, separated by spaces or
     * commas ("1", "1,4"); an index out of range is an error */
    const char *only = getenv("KS_TEST_CASE");
    if (only && *only) {
        enum { NCASES = sizeof cases / sizeof cases[0] - 1 };
        it_case some[NCASES + 1];
        size_t n = 0;
        for (const char *p = only; *p;) {
            char *end;
            long i = strtol(p, &end, 10);
            if (end == p || i < 0 || i >= NCASES || n == NCASES) {
                fprintf(stderr, "KS_TEST_CASE=%s: indexes 0..%d\n", only, NCASES - 1);
                return 2;
            }
            some[n++] = cases[i];
            p = end + strspn(end, " ,");
        }
        some[n] = (it_case){NULL, NULL};
        return it_main("outbox", some);
    }
    return it_main("outbox", cases);
}
