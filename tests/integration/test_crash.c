/*
 * test_crash.c - the crash suite (issue 7): seeded chaos against a real
 * broker and real `kstreams run` processes, then an exact comparison of
 * everything with a reference computed from the input.
 *
 * Pipeline (exactly-once, 3 processes "a" "b" "c", 1 worker each, 6 tasks):
 *   in --> count (store counts, changelog)  --> out-count (key, int64 count)
 *      \-> stall (tests/plugins/crashy.c)    --> out-pass  (the input, unchanged)
 * (hook: add a windowed aggregate node + its reference in pipeline_yaml()
 * and check_outputs() when the windows work lands.)
 *
 * A feeder thread produces records "seq" 0..N-1 (value {"n":seq}, key
 * k-NN, a function of seq) at a steady rate while a plan drawn from the
 * seed runs faults: SIGKILL while processing, right around a commit,
 * during a restore (optionally with the state dir deleted), during a
 * rebalance; plus one special fault per iteration: a zombie (SIGSTOP past
 * the session timeout, its tasks move, SIGCONT), a broker restart
 * (scripts/kafka.sh restart), or a processor stalling longer than
 * transaction.timeout.ms (5 s in the pipeline YAML).
 *
 * Then: input finishes, every process runs, the outputs drain, all stop;
 * one process alone converges the state (takes all tasks, restores) and
 * stops. Checks:
 *   (a) out-pass (read_committed): every seq exactly once, value exact;
 *       out-count: per key exactly 1, 2, ..., n (reference) in order;
 *   (b) the LMDB stores of the converged process (read-only open): per
 *       key the reference count, nothing else;
 *   (c) the changelog (read_committed): per key exactly 1..n in order (no
 *       compaction on the active segment), its last value = the store.
 * Client check: aborted records are physically in the logs (read with
 * read_uncommitted, counted); read_committed returning one would show as
 * a duplicate, hiding a committed one as a gap.
 *
 * Modes:  default (short): 3 iterations, one per special fault.
 *         KS_CRASH_ITERATIONS=N / KS_CRASH_SECONDS=S: long run; a summary
 *         goes to $KS_CRASH_SUMMARY (default ./crash-summary-<seed>.txt).
 *         KS_CRASH_SEED=S: the first seed (iteration i uses S+i); the plan
 *         of an iteration is a function of its seed and the mode only.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "itest.h"
#include "kstreams/kstreams.h"
#include "store.h"

#define PARTS 6
#define KEYS 40
#define NINST 3
#define MAX_STEPS 16
#define TXN_TIMEOUT_MS 5000
#define STALL_MS 9000
#define SESSION_MS 6000

enum { K_PROC, K_COMMIT, K_RESTORE, K_REBAL, K_ZOMBIE, K_BROKER, K_STALL, K_NONE };
static const char *const kind_name[] = {"kill-processing", "kill-at-commit", "kill-in-restore",
                                        "kill-in-rebalance", "zombie", "broker-restart",
                                        "stall-past-txn-timeout", "none"};

typedef struct step {
    int kind;
    int victim, other;
    int d1, d2; /* delays, ms */
    int wipe;   /* restore: delete the victim's state dir first */
} step;

typedef struct plan {
    uint64_t seed;
    int long_mode;
    long records;
    int rate; /* records per second */
    int nsteps;
    step steps[MAX_STEPS];
} plan;

/* figures of one iteration */
typedef struct figures {
    int kills, processing_kills, restore_hits, rebalance_hits, commit_kills, zombies, broker_restarts, stalls;
    int self_exits; /* engines that exited without being asked: must stay 0 */
    long aborts, rebuilds, aborted_records, replayed;
} figures;

static char srcdir_scripts[600];
static const char *const inst_name[NINST] = {"a", "b", "c"};

static struct run {
    plan pl;
    char dir[256], app[128], in_topic[128], pass_topic[128], count_topic[128];
    char changelog[300];
    char yaml[NINST][512], log[NINST][512], state[NINST][512], conv_log[512];
    pid_t pid[NINST];
    int cur_step;
    char where[512]; /* what the run is doing: printed on failure */
    figures fig;
    /* feeder */
    pthread_t feeder;
    atomic_long fed, acked, delivery_errors;
    atomic_int stall_request;
    atomic_long stall_seq; /* seq of the marker record, -1: none */
    atomic_int feeder_done, stop_feed;
} R;

/* ---- small helpers ------------------------------------------------------ */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int rnd(uint64_t *s, int lo, int hi) /* [lo, hi] */
{
    return lo + (int)(splitmix(s) % (uint64_t)(hi - lo + 1));
}

static int key_of(long seq) { return (int)((seq * 7 + seq / 13) % KEYS); }

static void value_of(long seq, int marker, char *buf, size_t len)
{
    if (marker)
        snprintf(buf, len, "{\"n\":%ld,\"stall\":true}", seq);
    else
        snprintf(buf, len, "{\"n\":%ld}", seq);
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("  [seed %" PRIu64 "] ", R.pl.seed);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

/* A difference: prints the seed, the step and the difference; fails the test. */
static int diffs;
static void differ(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void differ(const char *fmt, ...)
{
    diffs++;
    if (diffs > 5)
        return;
    va_list ap;
    va_start(ap, fmt);
    printf("\n  DIFFERENCE (seed %" PRIu64 ", step %d/%d, %s; rerun with KS_CRASH_SEED=%" PRIu64
           "%s): ",
           R.pl.seed, R.cur_step, R.pl.nsteps, R.where, R.pl.seed,
           R.pl.long_mode ? " KS_CRASH_ITERATIONS=1" : "");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

/* Lines containing `needle` in `path` from byte `from`. */
static int log_count_from(const char *path, long from, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    fseek(f, from, SEEK_SET);
    char line[8192];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

/* Wait until a line with needle (or needle2) appears after `from`: 1, or 0
 * on timeout. */
static int wait_log(const char *path, long from, const char *needle, const char *needle2,
                    int timeout_ms)
{
    int64_t end = it_now_ms() + timeout_ms;
    do {
        if (log_count_from(path, from, needle) > 0 ||
            (needle2 && log_count_from(path, from, needle2) > 0))
            return 1;
        it_sleep_ms(5);
    } while (it_now_ms() < end);
    return 0;
}

/* Wait until `path` shows a commit of at least one record after `from`:
 * the engine is processing (not waiting in a rebalance). */
static int wait_processing(const char *path, long from, int timeout_ms)
{
    int64_t end = it_now_ms() + timeout_ms;
    do {
        FILE *f = fopen(path, "r");
        if (f) {
            fseek(f, from, SEEK_SET);
            char line[8192];
            int found = 0;
            while (!found && fgets(line, sizeof line, f)) {
                const char *c = strstr(line, "commit of ");
                found = c && atol(c + 10) > 0;
            }
            fclose(f);
            if (found)
                return 1;
        }
        it_sleep_ms(10);
    } while (it_now_ms() < end);
    return 0;
}

static long log_sum(const char *needle)
{
    long n = 0;
    for (int i = 0; i < NINST; i++)
        n += it_log_count(R.log[i], needle);
    return n + it_log_count(R.conv_log, needle);
}

/* ---- engine processes ---------------------------------------------------- */

/* it_engine_start, plus: the engine dies with this test (a crashed or
 * interrupted suite leaves no engine behind). */
static pid_t engine_start(const char *yaml, const char *instance, const char *log)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    execl(it_kstreams(), "kstreams", "run", yaml, "--instance", instance, (char *)NULL);
    _exit(127);
}

static void inst_start(int i)
{
    R.pid[i] = engine_start(R.yaml[i], inst_name[i], R.log[i]);
}

static void inst_kill(int i)
{
    if (R.pid[i] > 0) {
        it_engine_kill(R.pid[i]);
        R.fig.kills++;
    }
    R.pid[i] = 0;
}

/* An engine that exited by itself (it should only exit when told). */
static void reap_unexpected(void)
{
    for (int i = 0; i < NINST; i++) {
        int status;
        if (R.pid[i] > 0 && waitpid(R.pid[i], &status, WNOHANG) == R.pid[i]) {
            R.fig.self_exits++;
            say("engine %s exited by itself (status %d) during %s: see %s", inst_name[i],
                WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), R.where,
                R.log[i]);
            R.pid[i] = 0;
            inst_start(i);
        }
    }
}

static void all_running(void)
{
    reap_unexpected();
    for (int i = 0; i < NINST; i++)
        if (R.pid[i] <= 0)
            inst_start(i);
}

/* ---- the feeder ------------------------------------------------------------ */

static void feeder_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    (void)opaque;
    if (m->err) {
        atomic_fetch_add(&R.delivery_errors, 1);
        fprintf(stderr, "crash feeder: delivery failed: %s\n", rd_kafka_err2str(m->err));
    } else
        atomic_fetch_add(&R.acked, 1);
}

static void *feeder_main(void *arg)
{
    (void)arg;
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *props[] = {"bootstrap.servers", it_bootstrap(), "enable.idempotence", "true",
                           "linger.ms", "5", "partitioner", "murmur2_random",
                           "message.timeout.ms", "600000", "socket.nagle.disable", "true",
                           NULL};
    for (int i = 0; props[i]; i += 2)
        rd_kafka_conf_set(conf, props[i], props[i + 1], err, sizeof err);
    rd_kafka_conf_set_dr_msg_cb(conf, feeder_dr);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "crash feeder: %s\n", err);
        atomic_fetch_add(&R.delivery_errors, 1);
        atomic_store(&R.feeder_done, 1);
        return NULL;
    }
    int64_t start = it_now_ms();
    for (long seq = 0; seq < R.pl.records && !atomic_load(&R.stop_feed); seq++) {
        /* steady rate: seq is due at start + seq / rate */
        int64_t due = start + seq * 1000 / R.pl.rate;
        while (it_now_ms() < due) {
            rd_kafka_poll(rk, 0);
            it_sleep_ms(5);
        }
        int marker = atomic_exchange(&R.stall_request, 0);
        if (marker)
            atomic_store(&R.stall_seq, seq);
        char key[32], value[64];
        snprintf(key, sizeof key, "k-%02d", key_of(seq));
        value_of(seq, marker, value, sizeof value);
        for (;;) {
            rd_kafka_resp_err_t e = rd_kafka_producev(
                rk, RD_KAFKA_V_TOPIC(R.in_topic), RD_KAFKA_V_KEY(key, strlen(key)),
                RD_KAFKA_V_VALUE(value, strlen(value)),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
            if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                rd_kafka_poll(rk, 10);
                continue;
            }
            if (e) {
                fprintf(stderr, "crash feeder: produce: %s\n", rd_kafka_err2str(e));
                atomic_fetch_add(&R.delivery_errors, 1);
            }
            break;
        }
        atomic_store(&R.fed, seq + 1);
    }
    while (rd_kafka_flush(rk, 1000) == RD_KAFKA_RESP_ERR__TIMED_OUT)
        ;
    rd_kafka_destroy(rk);
    atomic_store(&R.feeder_done, 1);
    return NULL;
}

/* ---- reading topics -------------------------------------------------------- */

/* Our own record copies (itest's it_msg grows fields for other tests). */
typedef struct msg {
    char *key; /* NUL-terminated copies (NULL for a null key) */
    size_t key_len;
    char *value;
    size_t value_len;
    int32_t partition;
    int64_t offset;
} msg;

typedef struct msgs {
    msg *items;
    size_t count, cap;
} msgs;

static void msgs_free(msgs *m)
{
    for (size_t i = 0; i < m->count; i++) {
        free(m->items[i].key);
        free(m->items[i].value);
    }
    free(m->items);
    memset(m, 0, sizeof *m);
}

/* Read every partition of `topic` to its end (the last stable offset for
 * read_committed). 0, or -1 when the end was not reached in time. */
static int read_topic(const char *topic, const char *isolation, msgs *out)
{
    char group[256], err[512];
    it_unique(group, sizeof group, "crash-reader");
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *props[] = {"bootstrap.servers", it_bootstrap(), "group.id", group,
                           "isolation.level", isolation, "enable.auto.commit", "false",
                           "enable.partition.eof", "true", "socket.nagle.disable", "true",
                           NULL};
    for (int i = 0; props[i]; i += 2)
        rd_kafka_conf_set(conf, props[i], props[i + 1], err, sizeof err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk)
        return -1;
    int parts = -1;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    for (int tries = 0; tries < 100 && parts < 0; tries++) {
        const struct rd_kafka_metadata *md = NULL;
        if (!rd_kafka_metadata(rk, 0, rkt, &md, 5000)) {
            if (md->topic_cnt == 1 && !md->topics[0].err && md->topics[0].partition_cnt > 0)
                parts = md->topics[0].partition_cnt;
            rd_kafka_metadata_destroy(md);
        }
        if (parts < 0)
            it_sleep_ms(200);
    }
    rd_kafka_topic_destroy(rkt);
    if (parts < 0) {
        rd_kafka_destroy(rk);
        return -1;
    }
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(parts);
    for (int p = 0; p < parts; p++)
        rd_kafka_topic_partition_list_add(l, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    int eof[64] = {0}, at_end = 0, rc = -1;
    int64_t deadline = it_now_ms() + 120000;
    while (it_now_ms() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
        if (!m)
            continue;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            if (m->partition >= 0 && m->partition < 64 && !eof[m->partition]) {
                eof[m->partition] = 1;
                at_end++;
            }
        } else if (!m->err) {
            if (m->partition >= 0 && m->partition < 64 && eof[m->partition]) {
                eof[m->partition] = 0;
                at_end--;
            }
            if (out->count == out->cap) {
                out->cap = out->cap ? out->cap * 2 : 4096;
                out->items = realloc(out->items, out->cap * sizeof *out->items);
            }
            msg *x = &out->items[out->count++];
            x->key = m->key ? strndup(m->key, m->key_len) : NULL;
            x->key_len = m->key_len;
            x->value = malloc(m->len + 1);
            memcpy(x->value, m->payload ? m->payload : "", m->len);
            x->value[m->len] = '\0';
            x->value_len = m->len;
            x->partition = m->partition;
            x->offset = m->offset;
        }
        rd_kafka_message_destroy(m);
        if (at_end == parts) {
            rc = 0;
            break;
        }
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return rc;
}

/* Records of out-pass so far (read_committed). */
static long pass_count(void)
{
    msgs m = {0};
    long n = read_topic(R.pass_topic, "read_committed", &m) == 0 ? (long)m.count : -1;
    msgs_free(&m);
    return n;
}

/* ---- the pipeline ------------------------------------------------------------ */

static void pipeline_yaml(int i)
{
    it_write_file(
        R.yaml[i],
        "application: %s\n"
        "kafka:\n"
        "  bootstrap: [%s]\n"
        "  properties: { transaction.timeout.ms: %d, session.timeout.ms: %d }\n"
        "guarantee: exactly-once\n"
        "commit_interval_ms: 100\n"
        "workers: 1\n"
        "state_dir: %s\n"
        "plugins: [%s/plugins/.libs/count.so, %s/tests/plugins/.libs/crashy.so]\n"
        "sources:\n"
        "  in: { topic: %s, key: string, value: json }\n"
        "nodes:\n"
        "  - { name: per_key, type: count.count, from: in, store: counts }\n"
        "  - { name: seq, type: crashy.stall, from: in, config: { stall_ms: %d } }\n"
        /* hook: a windowed aggregate node goes here (issue 7) */
        "sinks:\n"
        "  - { from: per_key, topic: %s, key: string, value: int64, create: true, "
        "partitions: %d }\n"
        "  - { from: seq, topic: %s, key: string, value: json, create: true, "
        "partitions: %d }\n",
        R.app, it_bootstrap(), TXN_TIMEOUT_MS, SESSION_MS, R.state[i], KS_TEST_BUILDDIR, KS_TEST_BUILDDIR,
        R.in_topic, STALL_MS, R.count_topic, PARTS, R.pass_topic, PARTS);
}

/* ---- the plan ------------------------------------------------------------------ */

static void make_plan(plan *pl, uint64_t seed, int long_mode)
{
    memset(pl, 0, sizeof *pl);
    uint64_t s = seed;
    pl->seed = seed;
    pl->long_mode = long_mode;
    pl->rate = 250;
    pl->records = 1000000; /* the feeder runs until the plan ends */
    int normal = long_mode ? rnd(&s, 6, 10) : rnd(&s, 3, 4);
    int special = long_mode ? rnd(&s, K_ZOMBIE, K_NONE) : K_ZOMBIE + (int)(seed % 3);
    int special_at = special == K_NONE ? -1 : rnd(&s, 0, normal);
    for (int i = 0; i < normal + (special_at >= 0); i++) {
        step *st = &pl->steps[pl->nsteps++];
        st->kind = i == special_at ? special : rnd(&s, K_PROC, K_REBAL);
        st->victim = rnd(&s, 0, NINST - 1);
        st->other = (st->victim + rnd(&s, 1, NINST - 1)) % NINST;
        st->d1 = rnd(&s, 200, 2000);
        st->d2 = rnd(&s, 0, 800);
        st->wipe = rnd(&s, 0, 1);
        if (st->kind == K_COMMIT)
            st->d1 = rnd(&s, 85, 160); /* after a commit line: the next commit */
        if (st->kind == K_REBAL || st->kind == K_RESTORE)
            st->d1 = rnd(&s, 0, 300);
    }
}

static void print_plan(const plan *pl)
{
    printf("  [seed %" PRIu64 "] plan: input at %d/s until the last step; steps:", pl->seed,
           pl->rate);
    for (int i = 0; i < pl->nsteps; i++) {
        const step *st = &pl->steps[i];
        printf(" %d:%s(%s", i + 1, kind_name[st->kind], inst_name[st->victim]);
        if (st->kind == K_REBAL)
            printf(",%s", inst_name[st->other]);
        if (st->kind == K_RESTORE && st->wipe)
            printf(",wipe");
        printf(")");
    }
    printf("\n");
}

/* ---- faults ------------------------------------------------------------------- */

static int broker_port(void)
{
    const char *colon = strrchr(it_bootstrap(), ':');
    return colon ? atoi(colon + 1) : 9092;
}

static void run_step(const step *st)
{
    int v = st->victim;
    switch (st->kind) {
    case K_PROC:
        if (wait_processing(R.log[v], file_size(R.log[v]), 30000))
            R.fig.processing_kills++;
        it_sleep_ms(st->d1 / 4);
        inst_kill(v);
        it_sleep_ms(st->d2);
        inst_start(v);
        break;
    case K_COMMIT: {
        long from = file_size(R.log[v]);
        if (wait_processing(R.log[v], from, 30000)) {
            from = file_size(R.log[v]);
            if (wait_log(R.log[v], from, "commit of", NULL, 5000))
                R.fig.commit_kills++;
        }
        it_sleep_ms(st->d1);
        inst_kill(v);
        it_sleep_ms(st->d2);
        inst_start(v);
        break;
    }
    case K_RESTORE: {
        inst_kill(v);
        if (st->wipe) {
            char cmd[700];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", R.state[v]);
            CU_ASSERT(system(cmd) == 0);
        }
        long from = file_size(R.log[v]);
        inst_start(v);
        if (wait_log(R.log[v], from, "restor", "up to date", 20000)) {
            it_sleep_ms(st->d1 / 30); /* 0..10 ms: inside the restore */
            R.fig.restore_hits++;
        }
        inst_kill(v);
        it_sleep_ms(st->d2);
        inst_start(v);
        break;
    }
    case K_REBAL: {
        int o = st->other;
        long from = file_size(R.log[o]);
        inst_kill(v);
        inst_start(v); /* a new member joins: everybody rebalances */
        if (wait_log(R.log[o], from, "revoked", "assigned", 15000))
            R.fig.rebalance_hits++;
        it_sleep_ms(st->d1);
        int x = st->d2 % 2 ? o : v;
        inst_kill(x);
        it_sleep_ms(st->d2);
        inst_start(x);
        break;
    }
    case K_ZOMBIE: {
        long from[NINST];
        for (int i = 0; i < NINST; i++)
            from[i] = file_size(R.log[i]);
        kill(R.pid[v], SIGSTOP);
        int64_t stopped = it_now_ms();
        int taken = 0;
        while (it_now_ms() - stopped < 40000 && !taken) {
            it_sleep_ms(250);
            for (int i = 0; i < NINST; i++)
                if (i != v && log_count_from(R.log[i], from[i], "assigned") > 0 &&
                    it_now_ms() - stopped > SESSION_MS + 1000)
                    taken = 1;
        }
        it_sleep_ms(1000);
        long zfrom = file_size(R.log[v]);
        kill(R.pid[v], SIGCONT);
        R.fig.zombies++;
        it_sleep_ms(4000);
        say("zombie %s: stopped %.1f s, tasks taken over: %s; after SIGCONT: %d aborts, "
            "%d producer rebuilds, %d 'lost'",
            inst_name[v], (double)(it_now_ms() - stopped - 4000) / 1000.0, taken ? "yes" : "NO",
            log_count_from(R.log[v], zfrom, "aborting batch"),
            log_count_from(R.log[v], zfrom, "rebuilding"),
            log_count_from(R.log[v], zfrom, "lost"));
        CU_ASSERT(taken);
        break;
    }
    case K_BROKER: {
        char cmd[900];
        snprintf(cmd, sizeof cmd, "KAFKA_PORT=%d '%s' restart >/dev/null 2>&1", broker_port(),
                 srcdir_scripts);
        int64_t t0 = it_now_ms();
        int rc = system(cmd);
        say("broker restart: exit %d in %.1f s", rc, (double)(it_now_ms() - t0) / 1000.0);
        CU_ASSERT_EQUAL(rc, 0);
        R.fig.broker_restarts++;
        break;
    }
    case K_STALL: {
        long from[NINST];
        for (int i = 0; i < NINST; i++)
            from[i] = file_size(R.log[i]);
        atomic_store(&R.stall_request, 1);
        int who = -1;
        int64_t t0 = it_now_ms();
        while (who < 0 && it_now_ms() - t0 < 20000) {
            it_sleep_ms(100);
            for (int i = 0; i < NINST; i++)
                if (log_count_from(R.log[i], from[i], "stall: sleeping") > 0)
                    who = i;
        }
        CU_ASSERT(who >= 0);
        if (who < 0)
            break;
        wait_log(R.log[who], from[who], "stall: done", NULL, STALL_MS + 10000);
        it_sleep_ms(3000);
        int aborted = log_count_from(R.log[who], from[who], "aborting batch");
        int rebuilt = log_count_from(R.log[who], from[who], "rebuilding");
        int fatal = log_count_from(R.log[who], from[who], "fatal");
        say("stall on %s (marker seq %ld): %d aborts, %d producer rebuilds, %d fatal lines",
            inst_name[who], atomic_load(&R.stall_seq), aborted, rebuilt, fatal);
        /* the stalled batch outlived its transaction: it must not commit */
        if (aborted + rebuilt == 0)
            differ("the batch stalled past transaction.timeout.ms was neither aborted nor "
                   "its producer rebuilt (see %s)",
                   R.log[who]);
        R.fig.stalls++;
        break;
    }
    }
}

/* ---- checks ---------------------------------------------------------------------- */

static long ref_count[KEYS];

static void reference(void)
{
    memset(ref_count, 0, sizeof ref_count);
    for (long seq = 0; seq < R.pl.records; seq++)
        ref_count[key_of(seq)]++;
}

static int parse_key(const char *k)
{
    int n = -1;
    if (!k || sscanf(k, "k-%d", &n) != 1 || n < 0 || n >= KEYS)
        return -1;
    return n;
}

/* Per key, values must be exactly 1..ref in order. `what` names the topic. */
static void check_sequences(const char *what, const msgs *m, long last[KEYS])
{
    long bad = 0;
    for (int k = 0; k < KEYS; k++)
        last[k] = 0;
    for (size_t i = 0; i < m->count; i++) {
        const msg *x = &m->items[i];
        int k = parse_key(x->key);
        if (k < 0 || x->value_len != 8) {
            if (!bad++)
                differ("%s: foreign record at partition %d offset %lld (key %s, %zu bytes)",
                       what, (int)x->partition, (long long)x->offset, x->key ? x->key : "null",
                       x->value_len);
            continue;
        }
        long c = (long)ks_int64_decode(x->value);
        if (c != last[k] + 1 && !bad++)
            differ("%s: key k-%02d: value %ld follows %ld (%s) at partition %d offset %lld",
                   what, k, c, last[k], c <= last[k] ? "repeat: an aborted or duplicate record"
                                                     : "gap: a committed record is missing",
                   (int)x->partition, (long long)x->offset);
        last[k] = c;
    }
    for (int k = 0; k < KEYS; k++)
        if (last[k] != ref_count[k] && !bad++)
            differ("%s: key k-%02d ends at %ld, the reference says %ld", what, k, last[k],
                   ref_count[k]);
    say("check %s: %zu records, %ld differences", what, m->count, bad);
    CU_ASSERT_EQUAL(bad, 0);
}

static void check_pass(void)
{
    snprintf(R.where, sizeof R.where, "final check (a) %s", R.pass_topic);
    msgs m = {0};
    CU_ASSERT_EQUAL(read_topic(R.pass_topic, "read_committed", &m), 0);
    unsigned char *seen = calloc((size_t)R.pl.records, 1);
    long bad = 0, dup = 0, missing = 0;
    long marker = atomic_load(&R.stall_seq);
    for (size_t i = 0; i < m.count; i++) {
        const msg *x = &m.items[i];
        long seq = -1;
        if (!x->value || sscanf(x->value, "{\"n\":%ld", &seq) != 1 || seq < 0 ||
            seq >= R.pl.records) {
            if (!bad++)
                differ("out-pass: foreign record at partition %d offset %lld: %s",
                       (int)x->partition, (long long)x->offset, x->value ? x->value : "null");
            continue;
        }
        char want[64], key[32];
        value_of(seq, seq == marker, want, sizeof want);
        snprintf(key, sizeof key, "k-%02d", key_of(seq));
        if ((strcmp(x->value, want) != 0 || !x->key || strcmp(x->key, key) != 0) && !bad++)
            differ("out-pass: seq %ld at partition %d offset %lld is %s=%s, expected %s=%s",
                   seq, (int)x->partition, (long long)x->offset, x->key ? x->key : "null",
                   x->value, key, want);
        if (seen[seq]++ && !dup++)
            differ("out-pass: seq %ld appears twice (second at partition %d offset %lld): "
                   "an aborted or duplicated record",
                   seq, (int)x->partition, (long long)x->offset);
    }
    for (long s = 0; s < R.pl.records; s++)
        if (!seen[s] && !missing++)
            differ("out-pass: seq %ld is missing (first of the missing)", s);
    free(seen);
    say("check out-pass: %zu records for %ld inputs: %ld missing, %ld twice, %ld wrong", m.count,
        R.pl.records, missing, dup, bad);
    CU_ASSERT_EQUAL(bad + dup + missing, 0);
    CU_ASSERT_EQUAL((long)m.count, R.pl.records);
    msgs_free(&m);
    /* the client filter: aborted records are in the log; read_committed
     * must have dropped every one of them (a duplicate above otherwise) */
    msgs u = {0};
    if (read_topic(R.pass_topic, "read_uncommitted", &u) == 0) {
        R.fig.aborted_records = (long)u.count - R.pl.records;
        say("out-pass holds %zu records read_uncommitted: %ld aborted ones filtered", u.count,
            R.fig.aborted_records);
        CU_ASSERT((long)u.count >= R.pl.records);
    }
    msgs_free(&u);
}

typedef struct store_scan {
    long count[KEYS];
    long entries, foreign;
} store_scan;

static int scan_cb(void *arg, ks_bytes key, ks_bytes value)
{
    store_scan *sc = arg;
    char k[64];
    snprintf(k, sizeof k, "%.*s", (int)(key.len < 60 ? key.len : 60), (const char *)key.data);
    int n = parse_key(k);
    sc->entries++;
    if (n < 0 || value.len != 8 || sc->count[n]) {
        sc->foreign++;
        return 0;
    }
    sc->count[n] = (long)ks_int64_decode(value.data);
    return 0;
}

/* (b) and (c) on the converged state dir of instance 0. */
static void check_state(void)
{
    snprintf(R.where, sizeof R.where, "final check (b) stores");
    store_scan sc;
    memset(&sc, 0, sizeof sc);
    int opened = 0;
    for (int p = 0; p < PARTS; p++) {
        char dir[900], err[512];
        snprintf(dir, sizeof dir, "%s/%s/task-%d", R.state[0], R.app, p);
        ks_store_env *env;
        if (ks_store_env_open_readonly(dir, &env, err, sizeof err) != 0) {
            differ("store of task %d: %s", p, err);
            continue;
        }
        ks_store_db *db;
        if (ks_store_db_open(env, "counts", &db) == 0) {
            ks_bytes none = {NULL, 0};
            CU_ASSERT_EQUAL(ks_store_range(db, none, none, scan_cb, &sc), 0);
            opened++;
        } else
            differ("task %d has no store 'counts'", p);
        ks_store_read_end(env);
        ks_store_env_close(env);
    }
    long bad = sc.foreign;
    if (sc.foreign)
        differ("stores: %ld foreign or duplicated entries", sc.foreign);
    for (int k = 0; k < KEYS; k++)
        if (sc.count[k] != ref_count[k] && !bad++)
            differ("stores: key k-%02d holds %ld, the reference says %ld", k, sc.count[k],
                   ref_count[k]);
    say("check stores: %d task stores, %ld entries, %ld differences", opened, sc.entries, bad);
    CU_ASSERT_EQUAL(opened, PARTS);
    CU_ASSERT_EQUAL(bad, 0);

    snprintf(R.where, sizeof R.where, "final check (c) %s", R.changelog);
    msgs m = {0};
    CU_ASSERT_EQUAL(read_topic(R.changelog, "read_committed", &m), 0);
    long last[KEYS];
    check_sequences("changelog", &m, last);
    long differ_store = 0;
    for (int k = 0; k < KEYS; k++)
        if (last[k] != sc.count[k] && !differ_store++)
            differ("changelog: key k-%02d latest %ld, the store holds %ld", k, last[k],
                   sc.count[k]);
    CU_ASSERT_EQUAL(differ_store, 0);
    msgs_free(&m);
}

/* ---- one iteration ------------------------------------------------------------------ */

static int iteration(uint64_t seed, int long_mode, FILE *summary)
{
    memset(&R.fig, 0, sizeof R.fig);
    diffs = 0;
    make_plan(&R.pl, seed, long_mode);
    print_plan(&R.pl);
    it_tempdir(R.dir, sizeof R.dir);
    it_unique(R.app, sizeof R.app, "crash");
    it_unique(R.in_topic, sizeof R.in_topic, "crash-in");
    it_unique(R.pass_topic, sizeof R.pass_topic, "crash-pass");
    it_unique(R.count_topic, sizeof R.count_topic, "crash-count");
    snprintf(R.changelog, sizeof R.changelog, "%s-counts-changelog", R.app);
    for (int i = 0; i < NINST; i++) {
        snprintf(R.yaml[i], sizeof R.yaml[i], "%s/%s.yaml", R.dir, inst_name[i]);
        snprintf(R.log[i], sizeof R.log[i], "%s/%s.log", R.dir, inst_name[i]);
        snprintf(R.state[i], sizeof R.state[i], "%s/state-%s", R.dir, inst_name[i]);
        pipeline_yaml(i);
        R.pid[i] = 0;
    }
    snprintf(R.conv_log, sizeof R.conv_log, "%s/converge.log", R.dir);
    snprintf(R.where, sizeof R.where, "setup");
    CU_ASSERT_FATAL(it_create_topic(R.in_topic, PARTS) == 0);
    int64_t t0 = it_now_ms();

    atomic_store(&R.fed, 0);
    atomic_store(&R.acked, 0);
    atomic_store(&R.delivery_errors, 0);
    atomic_store(&R.stall_request, 0);
    atomic_store(&R.stall_seq, -1);
    atomic_store(&R.feeder_done, 0);
    atomic_store(&R.stop_feed, 0);
    for (int i = 0; i < NINST; i++)
        inst_start(i);
    /* let the group form before input starts */
    wait_log(R.log[0], 0, "assigned", NULL, 30000);
    pthread_create(&R.feeder, NULL, feeder_main, NULL);
    it_sleep_ms(1500);

    for (R.cur_step = 1; R.cur_step <= R.pl.nsteps; R.cur_step++) {
        const step *st = &R.pl.steps[R.cur_step - 1];
        snprintf(R.where, sizeof R.where, "%s(%s) at input %ld", kind_name[st->kind],
                 inst_name[st->victim], atomic_load(&R.fed));
        all_running();
        run_step(st);
    }
    R.cur_step = R.pl.nsteps;
    snprintf(R.where, sizeof R.where, "drain");
    atomic_store(&R.stop_feed, 1);
    pthread_join(R.feeder, NULL);
    R.pl.records = atomic_load(&R.fed); /* the input is what was fed */
    reference();
    all_running();
    CU_ASSERT_EQUAL(atomic_load(&R.delivery_errors), 0);
    CU_ASSERT_EQUAL(atomic_load(&R.acked), R.pl.records);
    long have = 0;
    int64_t drain_from = it_now_ms();
    while ((have = pass_count()) < R.pl.records && it_now_ms() - drain_from < 180000) {
        reap_unexpected();
        it_sleep_ms(1000);
    }
    say("drained: %ld of %ld outputs after %.1f s", have, R.pl.records,
        (double)(it_now_ms() - drain_from) / 1000.0);
    it_sleep_ms(1000);
    reap_unexpected();
    for (int i = 0; i < NINST; i++) {
        int rc = it_engine_stop(R.pid[i], 60000);
        if (rc != 0)
            say("engine %s: clean stop gave %d (see %s)", inst_name[i], rc, R.log[i]);
        CU_ASSERT_EQUAL(rc, 0);
        R.pid[i] = 0;
    }
    /* converge: one process alone takes every task and restores */
    snprintf(R.where, sizeof R.where, "converge");
    pid_t c = engine_start(R.yaml[0], inst_name[0], R.conv_log);
    int64_t conv_from = it_now_ms();
    while (it_log_count(R.conv_log, "assigned 6 partitions") == 0 &&
           it_now_ms() - conv_from < 90000)
        it_sleep_ms(200);
    it_sleep_ms(1500);
    int crc = it_engine_stop(c, 60000);
    CU_ASSERT_EQUAL(crc, 0);
    CU_ASSERT(it_log_count(R.conv_log, "assigned 6 partitions") > 0);

    check_pass();
    snprintf(R.where, sizeof R.where, "final check (a) %s", R.count_topic);
    msgs m = {0};
    CU_ASSERT_EQUAL(read_topic(R.count_topic, "read_committed", &m), 0);
    long last[KEYS];
    check_sequences("out-count", &m, last);
    msgs_free(&m);
    check_state();

    R.fig.aborts = log_sum("aborting batch");
    R.fig.rebuilds = log_sum("rebuilding");
    R.fig.replayed = 0;
    for (int i = 0; i < NINST; i++)
        R.fig.replayed += it_log_sum_before(R.log[i], ": ", " records replayed");
    CU_ASSERT_EQUAL(R.fig.self_exits, 0);
    int ok = diffs == 0 && R.fig.self_exits == 0;
    const char *ver = getenv("KAFKA_VERSION") ? getenv("KAFKA_VERSION") : "?";
    char line[1024];
    snprintf(line, sizeof line,
             "seed=%" PRIu64 " kafka=%s records=%ld steps=%d kills=%d processing_kills=%d commit_kills=%d "
             "restore_kills=%d rebalance_kills=%d zombies=%d broker_restarts=%d stalls=%d "
             "aborts=%ld producer_rebuilds=%ld aborted_records=%ld replayed=%ld "
             "self_exits=%d seconds=%.0f result=%s",
             seed, ver, R.pl.records, R.pl.nsteps, R.fig.kills, R.fig.processing_kills, R.fig.commit_kills,
             R.fig.restore_hits, R.fig.rebalance_hits, R.fig.zombies, R.fig.broker_restarts,
             R.fig.stalls, R.fig.aborts, R.fig.rebuilds, R.fig.aborted_records, R.fig.replayed,
             R.fig.self_exits, (double)(it_now_ms() - t0) / 1000.0, ok ? "ok" : "DIFFERENCE");
    printf("  %s\n", line);
    if (summary) {
        fprintf(summary, "%s\n", line);
        fflush(summary);
    }
    if (ok && !getenv("KS_CRASH_KEEP")) { /* keep the evidence of a failure */
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", R.dir);
        if (system(cmd) != 0)
            say("cannot remove %s", R.dir);
    } else
        say("logs and state kept in %s", R.dir);
    return ok;
}

/* ---- modes ---------------------------------------------------------------------------- */

static uint64_t base_seed(void)
{
    const char *s = getenv("KS_CRASH_SEED");
    if (s && *s)
        return strtoull(s, NULL, 10);
    return ((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16)) % 1000000000ull;
}

static uint64_t seed0;

/* Short mode: three iterations; seed % 3 picks the special fault, so three
 * consecutive seeds cover zombie, broker restart and stall. */
static void short_iteration(int i)
{
    uint64_t seed = seed0 + (uint64_t)i;
    printf("\n");
    CU_ASSERT(iteration(seed, 0, NULL));
}
static void test_short_1(void) { short_iteration(0); }
static void test_short_2(void) { short_iteration(1); }
static void test_short_3(void) { short_iteration(2); }

static void test_long(void)
{
    long iters = getenv("KS_CRASH_ITERATIONS") ? atol(getenv("KS_CRASH_ITERATIONS")) : 0;
    long secs = getenv("KS_CRASH_SECONDS") ? atol(getenv("KS_CRASH_SECONDS")) : 0;
    char path[600];
    if (getenv("KS_CRASH_SUMMARY"))
        snprintf(path, sizeof path, "%s", getenv("KS_CRASH_SUMMARY"));
    else
        snprintf(path, sizeof path, "crash-summary-%" PRIu64 ".txt", seed0);
    FILE *f = fopen(path, "a");
    CU_ASSERT_FATAL(f != NULL);
    printf("\n  long run: %ld iterations / %ld s, summary in %s\n", iters, secs, path);
    int64_t start = it_now_ms();
    long n = 0, good = 0, kills = 0, aborts = 0, rebuilds = 0, restores = 0, zombies = 0,
         brokers = 0, stalls = 0, aborted = 0;
    for (;;) {
        if (iters && n >= iters)
            break;
        if (!iters && secs && it_now_ms() - start >= secs * 1000)
            break;
        good += iteration(seed0 + (uint64_t)n, 1, f);
        kills += R.fig.kills;
        aborts += R.fig.aborts;
        rebuilds += R.fig.rebuilds;
        restores += R.fig.restore_hits;
        zombies += R.fig.zombies;
        brokers += R.fig.broker_restarts;
        stalls += R.fig.stalls;
        aborted += R.fig.aborted_records;
        n++;
    }
    fprintf(f,
            "TOTAL first_seed=%" PRIu64 " kafka=%s iterations=%ld ok=%ld failed=%ld kills=%ld "
            "restore_kills=%ld zombies=%ld broker_restarts=%ld stalls=%ld aborts=%ld "
            "producer_rebuilds=%ld aborted_records=%ld minutes=%.1f\n",
            seed0, getenv("KAFKA_VERSION") ? getenv("KAFKA_VERSION") : "?", n, good, n - good,
            kills, restores, zombies, brokers, stalls, aborts, rebuilds, aborted,
            (double)(it_now_ms() - start) / 60000.0);
    fclose(f);
    printf("  long run: %ld iterations, %ld ok, %ld kills; summary in %s\n", n, good, kills,
           path);
    CU_ASSERT_EQUAL(good, n);
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    setenv("KS_LOG_LEVEL", "DEBUG", 1); /* commit lines: kills at commit time */
    snprintf(srcdir_scripts, sizeof srcdir_scripts, "%s/../scripts/kafka.sh", KS_TEST_SRCDIR);
    seed0 = base_seed();
    printf("crash suite: seed %" PRIu64 " (KS_CRASH_SEED=%" PRIu64 " reproduces the plans), "
           "broker %s, Kafka %s\n",
           seed0, seed0, it_bootstrap(), getenv("KAFKA_VERSION") ? getenv("KAFKA_VERSION") : "?");
    int long_mode = getenv("KS_CRASH_ITERATIONS") || getenv("KS_CRASH_SECONDS");
    static const it_case short_cases[] = {
        {"crash: seeded kills + special fault (seed+0)", test_short_1},
        {"crash: seeded kills + special fault (seed+1)", test_short_2},
        {"crash: seeded kills + special fault (seed+2)", test_short_3},
        {NULL, NULL}};
    static const it_case long_cases[] = {{"crash: long run", test_long}, {NULL, NULL}};
    return it_main("crash", long_mode ? long_cases : short_cases);
}
