/*
 * test_crash.c - the crash suite (issue 7): seeded chaos against a real
 * broker and real `kstreams run` processes, then an exact comparison of
 * everything with a reference computed from the input.
 *
 * Pipeline (exactly-once, 3 processes "a" "b" "c", 1 worker each, 6 tasks):
 *   in --> count (store counts, its record cache on: cache_bytes 1MiB)
 *                                            --> out-count (key, int64 count)
 *      \-> stall (tests/plugins/crashy.c)    --> out-pass  (the input, unchanged)
 *      \-> win: aggregate, tumbling 2 s, emit update (store windows) --> out-win
 *      \-> winf: aggregate, hopping 4 s / 2 s, emit final (store hops) --> out-winf
 * Every store has a changelog. The windowed aggregates fold the input's
 * "n" into {"c":count,"last":n,"sum":sum of n} (crashy.seq_zero/seq_add),
 * with event time from the input's "ts" (base + seq * 4 ms).
 *
 * A feeder thread produces records "seq" 0..N-1 (value {"n":seq,"ts":T},
 * key k-NN, a function of seq) at a steady rate while a plan drawn from
 * the seed runs faults: SIGKILL while processing, right around a commit,
 * during a restore (optionally with the state dir deleted), during a
 * rebalance; plus one special fault per iteration: a zombie (SIGSTOP past
 * the session timeout, its tasks move, SIGCONT), a broker restart
 * (scripts/kafka.sh restart), or a processor stalling longer than
 * transaction.timeout.ms (5 s in the pipeline YAML).
 *
 * Then: input finishes, every process runs, the outputs drain, all stop;
 * one process alone converges the state (takes all tasks, restores) and
 * stops. The reference comes from the input (read back for the partition
 * of each key: windows close per task). Checks:
 *   (a) out-pass (read_committed): every seq exactly once, value exact;
 *       out-count: per key rising counts ending at n (the reference):
 *       the record cache folds a key's updates within a commit, so values
 *       may be skipped, never repeated;
 *       out-win: per window exactly its updates 1..n in order, each with
 *       the exact aggregate; out-winf: exactly one result per closed
 *       window (its final aggregate), none for a window still open;
 *   (b) the LMDB stores of the converged process (read-only open): counts
 *       per key the reference count, nothing else; windows and hops
 *       exactly the stream-time record and the windows still open (closed
 *       ones are deleted), byte for byte;
 *   (c) the changelogs (read_committed): counts per key rising to n, as
 *       out-count (no compaction on the active segment); windows and hops per
 *       window its values 1..n in order then a tombstone iff closed, per
 *       task the stream-time record once per input in order; and the
 *       latest value of every key equals the store.
 * Client check: aborted records are physically in the logs (read with
 * read_uncommitted, counted); read_committed returning one would show as
 * a duplicate, hiding a committed one as a gap.
 *
 * A repartitioned topology (issue 17), YAML only: ops.select_key by a
 * field of the value, then a count, so that every commit holds the produce
 * to the repartition topic, both sub-topologies' offsets and the
 * changelog; one process is killed at each point of the commit sequence
 * (KS_CRASH_AT), during a restore and at random, in a seeded order; per
 * new key the output (read_committed) must be exactly 1..n and the stores
 * and the changelog equal the reference (see rp_iteration below).
 *
 * Two more cases in the short mode: a store map too small (clean stop
 * naming the store and directory, nothing of the failed batch visible,
 * the same after a restart, exact after a restart with a bigger
 * map_size), and the state directory's file system full (root only: a
 * 256 KiB tmpfs; skipped with a reason otherwise).
 *
 * Modes:  default (short): 3 iterations, one per special fault, one of the
 *         repartitioned topology (seed+3, about 30 s), and the two
 *         full-store cases (KS_CRASH_ONLY_MAP_FULL=1: those alone;
 *         KS_CRASH_ONLY_REPART=1: the repartitioned one alone).
 *         KS_CRASH_ITERATIONS=N / KS_CRASH_SECONDS=S: long run, each
 *         iteration the main topology then the repartitioned one with the
 *         same seed (KS_CRASH_ONLY_REPART=1: the repartitioned one only);
 *         a summary goes to $KS_CRASH_SUMMARY (default
 *         ./crash-summary-<seed>.txt).
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
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "itest.h"
#include "kstreams/kstreams.h"
#include "state/store.h"

#define PARTS 6
#define KEYS 40
#define NINST 3
#define MAX_STEPS 16
#define TXN_TIMEOUT_MS 5000
#define STALL_MS 9000
#define SESSION_MS 6000
/* event time of input seq: R.base + seq * TS_STEP ms (about real time at
 * the feeder's 250 records/s); the windowed nodes read it from "ts" */
#define TS_STEP 4

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

static const char *const inst_name[NINST] = {"a", "b", "c"};

static struct run {
    plan pl;
    char dir[256], app[128], in_topic[128], pass_topic[128], count_topic[128];
    char changelog[300];
    int64_t base; /* event time of seq 0: a whole minute of the wall clock */
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

/* The windowed aggregates (plugin "aggregate" with crashy.seq_zero and
 * crashy.seq_add: the value is {"c":count,"last":last seq,"sum":sum of
 * seqs}), with their references. */
typedef struct wwin {
    long *seqs; /* the window's input seqs, in order */
    int n, cap;
    /* progress of the checks */
    int out_seen, out_bad, cl_seen, cl_bad, cl_deleted, idx_state;
} wwin;

typedef struct wnode {
    const char *name, *store, *yaml_window;
    int64_t size, advance;
    int final; /* emit: final (else update) */
    char topic[128], changelog[300];
    long slots; /* window slot i starts at R.base + (i - 1) * advance */
    wwin *w;    /* [slot * KEYS + key] */
} wnode;

static wnode wn[] = {
    {"win", "windows", "{ kind: tumbling, size: 2s, time_field: ts }", 2000, 2000, 0,
     "", "", 0, NULL},
    {"winf", "hops",
     "{ kind: hopping, size: 4s, advance: 2s, emit: final, time_field: ts }", 4000, 2000,
     1, "", "", 0, NULL},
};
#define WNODES ((int)(sizeof wn / sizeof wn[0]))

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

static int64_t ts_of(long seq) { return R.base + (int64_t)seq * TS_STEP; }

static void value_of(long seq, int marker, char *buf, size_t len)
{
    if (marker)
        snprintf(buf, len, "{\"n\":%ld,\"ts\":%lld,\"stall\":true}", seq,
                 (long long)ts_of(seq));
    else
        snprintf(buf, len, "{\"n\":%ld,\"ts\":%lld}", seq, (long long)ts_of(seq));
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
 * interrupted suite leaves no engine behind); `env` ("NAME=VALUE", or
 * NULL) is one more environment variable of the engine. */
static pid_t engine_start_env(const char *yaml, const char *instance, const char *log,
                              const char *env)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (env)
        putenv((char *)env);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    execl(it_kstreams(), "kstreams", "run", yaml, "--instance", instance, (char *)NULL);
    _exit(127);
}

static pid_t engine_start(const char *yaml, const char *instance, const char *log)
{
    return engine_start_env(yaml, instance, log, NULL);
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
    char *key; /* NUL-terminated copies (NULL for a null key); binary safe */
    size_t key_len;
    char *value; /* "" for a null value (a tombstone): see null_value */
    size_t value_len;
    int null_value;
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
            /* a changelog's state-version record (501-byte key) is the
             * engine's, not a store entry: the checks below are about data */
            if (m->key && m->key_len == 501 && memcmp(m->key, "kstreams.state_version", 22) == 0) {
                rd_kafka_message_destroy(m);
                continue;
            }
            if (out->count == out->cap) {
                out->cap = out->cap ? out->cap * 2 : 4096;
                out->items = realloc(out->items, out->cap * sizeof *out->items);
            }
            msg *x = &out->items[out->count++];
            x->key = NULL;
            if (m->key) {
                x->key = malloc(m->key_len + 1);
                memcpy(x->key, m->key, m->key_len);
                x->key[m->key_len] = '\0';
            }
            x->key_len = m->key_len;
            x->null_value = m->payload == NULL;
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
    char wnodes[2048] = "", wsinks[1024] = "";
    size_t a = 0, b = 0;
    for (int n = 0; n < WNODES; n++) {
        a += (size_t)snprintf(wnodes + a, sizeof wnodes - a,
                              "  - { name: %s, type: aggregate.aggregate, from: in, store: %s,\n"
                              "      window: %s,\n"
                              "      functions: { init: crashy.seq_zero, add: crashy.seq_add } }\n",
                              wn[n].name, wn[n].store, wn[n].yaml_window);
        b += (size_t)snprintf(wsinks + b, sizeof wsinks - b,
                              "  - { from: %s, topic: %s, key: string, value: json, create: true, "
                              "partitions: %d }\n",
                              wn[n].name, wn[n].topic, PARTS);
    }
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
        "plugins: [%s/plugins/.libs/count.so, %s/plugins/.libs/aggregate.so,\n"
        "          %s/tests/plugins/.libs/crashy.so]\n"
        "sources:\n"
        "  in: { topic: %s, key: string, value: json }\n"
        "nodes:\n"
        "  - { name: per_key, type: count.count, from: in, store: counts, cache_bytes: 1MiB }\n"
        "  - { name: seq, type: crashy.stall, from: in, config: { stall_ms: %d } }\n"
        "%s"
        "sinks:\n"
        "  - { from: per_key, topic: %s, key: string, value: int64, create: true, "
        "partitions: %d }\n"
        "  - { from: seq, topic: %s, key: string, value: json, create: true, "
        "partitions: %d }\n"
        "%s",
        R.app, it_bootstrap(), TXN_TIMEOUT_MS, SESSION_MS, R.state[i], KS_TEST_BUILDDIR,
        KS_TEST_BUILDDIR, KS_TEST_BUILDDIR, R.in_topic, STALL_MS, wnodes, R.count_topic, PARTS,
        R.pass_topic, PARTS, wsinks);
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
        int64_t t0 = it_now_ms();
        int rc = it_broker_ctl("restart");
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

/* Per key, values must rise and end at ref: the count's record cache folds
 * a key's updates within a commit (values skipped), but a value not above
 * the key's last one is an aborted or duplicated record, one above ref an
 * update no input caused, and an end below ref a lost one. `what` names
 * the topic. */
static void check_sequences(const char *what, const msgs *m, long last[KEYS])
{
    long bad = 0, folded = 0;
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
        if ((c <= last[k] || c > ref_count[k]) && !bad++)
            differ("%s: key k-%02d: value %ld follows %ld (%s) at partition %d offset %lld",
                   what, k, c, last[k], c <= last[k] ? "repeat: an aborted or duplicate record"
                                                     : "above the reference",
                   (int)x->partition, (long long)x->offset);
        if (c > last[k]) {
            folded += c - last[k] - 1;
            last[k] = c;
        }
    }
    for (int k = 0; k < KEYS; k++)
        if (last[k] != ref_count[k] && !bad++)
            differ("%s: key k-%02d ends at %ld, the reference says %ld (a committed update "
                   "is missing)",
                   what, k, last[k], ref_count[k]);
    say("check %s: %zu records (%ld updates folded by the record cache), %ld differences",
        what, m->count, folded, bad);
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

/* ---- the windowed aggregates: reference and checks ------------------------------ */

static int key_part[KEYS];        /* partition of each key's input records */
static long part_count[PARTS];    /* input records per partition */
static long *part_seqs[PARTS];    /* their seqs, in offset order */
static int64_t part_st[PARTS];    /* stream time: event time of the last one */

static void wref_free(void)
{
    for (int n = 0; n < WNODES; n++) {
        for (long i = 0; wn[n].w && i < wn[n].slots * KEYS; i++)
            free(wn[n].w[i].seqs);
        free(wn[n].w);
        wn[n].w = NULL;
        wn[n].slots = 0;
    }
    for (int p = 0; p < PARTS; p++) {
        free(part_seqs[p]);
        part_seqs[p] = NULL;
        part_count[p] = 0;
    }
}

static int64_t slot_start(const wnode *n, long slot) { return R.base + (slot - 1) * n->advance; }

static wwin *wget(wnode *n, long slot, int k)
{
    return slot >= 0 && slot < n->slots && k >= 0 && k < KEYS ? &n->w[slot * KEYS + k] : NULL;
}

/* A window is closed (final mode: emitted) and deleted from the store once
 * its task's stream time reached its end (grace 0, default retention). */
static int expired(const wnode *n, long slot, int k)
{
    int p = key_part[k];
    return p >= 0 && slot_start(n, slot) + n->size <= part_st[p];
}

/* The aggregate after the first i records of w. */
static void agg_text(const wwin *w, int i, char *buf, size_t len)
{
    long long sum = 0;
    for (int j = 0; j < i; j++)
        sum += w->seqs[j];
    snprintf(buf, len, "{\"c\":%d,\"last\":%ld,\"sum\":%lld}", i, i ? w->seqs[i - 1] : -1L,
             sum);
}

/* Read the input back: which partition each key went to, and the seqs of
 * each partition in offset order. Returns the differences found. */
static long input_layout(void)
{
    snprintf(R.where, sizeof R.where, "final check: the input %s", R.in_topic);
    msgs m = {0};
    long bad = 0;
    CU_ASSERT_EQUAL(read_topic(R.in_topic, "read_committed", &m), 0);
    for (int k = 0; k < KEYS; k++)
        key_part[k] = -1;
    for (int p = 0; p < PARTS; p++)
        part_seqs[p] = calloc((size_t)R.pl.records + 1, sizeof(long));
    for (size_t i = 0; i < m.count; i++) {
        const msg *x = &m.items[i];
        long seq = -1;
        int k = parse_key(x->key), p = x->partition;
        if (sscanf(x->value, "{\"n\":%ld", &seq) != 1 || seq < 0 || seq >= R.pl.records ||
            k != key_of(seq) || p < 0 || p >= PARTS || (key_part[k] >= 0 && key_part[k] != p) ||
            (part_count[p] && part_seqs[p][part_count[p] - 1] >= seq)) {
            if (!bad++)
                differ("input: unexpected record at partition %d offset %lld: %s = %s", p,
                       (long long)x->offset, x->key ? x->key : "null", x->value);
            continue;
        }
        key_part[k] = p;
        part_seqs[p][part_count[p]++] = seq;
    }
    for (int p = 0; p < PARTS; p++)
        part_st[p] = part_count[p] ? ts_of(part_seqs[p][part_count[p] - 1]) : INT64_MIN;
    if ((long)m.count != R.pl.records && !bad++)
        differ("input: %zu records read back, %ld fed", m.count, R.pl.records);
    msgs_free(&m);
    CU_ASSERT_EQUAL(bad, 0);
    return bad;
}

/* Each input seq goes into the windows of each windowed node. */
static void wref_build(void)
{
    int64_t last = ts_of(R.pl.records > 0 ? R.pl.records - 1 : 0);
    for (int n = 0; n < WNODES; n++) {
        wnode *w = &wn[n];
        w->slots = (last - R.base) / w->advance + 2;
        w->w = calloc((size_t)(w->slots * KEYS), sizeof *w->w);
        for (long seq = 0; seq < R.pl.records; seq++) {
            int64_t ts = ts_of(seq);
            for (int64_t s = ts - ts % w->advance; s > ts - w->size; s -= w->advance) {
                wwin *x = wget(w, (s - R.base) / w->advance + 1, key_of(seq));
                if (x->n == x->cap) {
                    x->cap = x->cap ? 2 * x->cap : 16;
                    x->seqs = realloc(x->seqs, (size_t)x->cap * sizeof(long));
                }
                x->seqs[x->n++] = seq;
            }
        }
    }
}

/* The window of an output key {"key":"k-NN","start":S,"end":E}, or NULL. */
static wwin *window_of_json(wnode *n, const char *json, int *k, long *slot)
{
    long long s, e;
    if (!json || sscanf(json, "{\"key\":\"k-%d\",\"start\":%lld,\"end\":%lld}", k, &s, &e) != 3 ||
        e != s + n->size || (s - R.base) % n->advance != 0)
        return NULL;
    *slot = (long)((s - R.base) / n->advance + 1);
    wwin *w = wget(n, *slot, *k);
    return w && w->n ? w : NULL;
}

/* (a) for a windowed node: update mode, per window exactly its updates
 * 1..n in order; final mode, exactly one result per closed window, with
 * its final value, and none for an open one. */
static void check_window_outputs(wnode *n)
{
    snprintf(R.where, sizeof R.where, "final check (a) %s", n->topic);
    msgs m = {0};
    CU_ASSERT_EQUAL(read_topic(n->topic, "read_committed", &m), 0);
    long bad = 0, windows = 0, closed = 0;
    char want[128];
    for (size_t i = 0; i < m.count; i++) {
        const msg *x = &m.items[i];
        int k = -1;
        long slot = -1;
        wwin *w = window_of_json(n, x->key, &k, &slot);
        if (!w) {
            if (!bad++)
                differ("%s: foreign record at partition %d offset %lld: %s = %s", n->name,
                       (int)x->partition, (long long)x->offset, x->key ? x->key : "null",
                       x->value);
            continue;
        }
        long long s = slot_start(n, slot);
        if (n->final) {
            agg_text(w, w->n, want, sizeof want);
            if (!expired(n, slot, k) && !bad++)
                differ("%s: window k-%02d [%lld, +%lld) is still open but was emitted (%s)",
                       n->name, k, s, (long long)n->size, x->value);
            else if (w->out_seen && !bad++)
                differ("%s: window k-%02d [%lld, +%lld) emitted twice (second at partition %d "
                       "offset %lld): an aborted or duplicated record",
                       n->name, k, s, (long long)n->size, (int)x->partition,
                       (long long)x->offset);
            else if (strcmp(x->value, want) != 0 && !bad++)
                differ("%s: window k-%02d [%lld, +%lld) emitted %s, expected %s", n->name, k, s,
                       (long long)n->size, x->value, want);
            w->out_seen++;
            continue;
        }
        int c = 0;
        if (w->out_seen < w->n)
            agg_text(w, w->out_seen + 1, want, sizeof want);
        if (w->out_seen < w->n && strcmp(x->value, want) == 0) {
            w->out_seen++;
            continue;
        }
        if (!w->out_bad++ && !bad++)
            differ("%s: window k-%02d [%lld, +%lld): update %d of %d is %s, expected %s (%s) "
                   "at partition %d offset %lld",
                   n->name, k, s, (long long)n->size, w->out_seen + 1, w->n, x->value,
                   w->out_seen < w->n ? want : "nothing more",
                   sscanf(x->value, "{\"c\":%d", &c) == 1 && c <= w->out_seen
                       ? "repeat: an aborted or duplicate record"
                       : "gap: a committed record is missing",
                   (int)x->partition, (long long)x->offset);
        w->out_seen = c > 0 ? c : w->out_seen + 1; /* resynchronise */
    }
    for (long slot = 0; slot < n->slots; slot++)
        for (int k = 0; k < KEYS; k++) {
            wwin *w = wget(n, slot, k);
            if (!w->n)
                continue;
            windows++;
            int exp = expired(n, slot, k);
            closed += exp;
            int want_seen = n->final ? exp : w->n;
            if (w->out_seen != want_seen && !bad++)
                differ("%s: window k-%02d [%lld, +%lld) has %d outputs, the reference says %d",
                       n->name, k, (long long)slot_start(n, slot), (long long)n->size,
                       w->out_seen, want_seen);
        }
    say("check %s: %zu records for %ld windows (%ld closed), %ld differences", n->name, m.count,
        windows, closed, bad);
    CU_ASSERT(windows > 0);
    CU_ASSERT_EQUAL(bad, 0);
    msgs_free(&m);
}

/* Store contents as sorted (key, value) pairs. */
typedef struct kv {
    unsigned char *k, *v;
    size_t kl, vl;
} kv;
typedef struct kvs {
    kv *items;
    size_t n, cap;
} kvs;

static void kvs_add(kvs *a, const void *k, size_t kl, const void *v, size_t vl)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 64;
        a->items = realloc(a->items, a->cap * sizeof *a->items);
    }
    kv *e = &a->items[a->n++];
    e->k = malloc(kl + 1);
    e->v = malloc(vl + 1);
    memcpy(e->k, k, kl);
    if (vl)
        memcpy(e->v, v, vl);
    e->kl = kl;
    e->vl = vl;
}

static void kvs_free(kvs *a)
{
    for (size_t i = 0; i < a->n; i++) {
        free(a->items[i].k);
        free(a->items[i].v);
    }
    free(a->items);
    memset(a, 0, sizeof *a);
}

/* LMDB's default order: memcmp, a prefix first. */
static int key_cmp(const unsigned char *a, size_t al, const unsigned char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

static int kv_cmp(const void *a, const void *b)
{
    const kv *x = a, *y = b;
    return key_cmp(x->k, x->kl, y->k, y->kl);
}

static int kvs_scan_cb(void *arg, ks_bytes key, ks_bytes value)
{
    kvs_add(arg, key.data, key.len, value.data, value.len);
    return 0;
}

/* Sortable time (window.c's layout, written from docs/windows.md). */
static void tput(unsigned char *o, int64_t t)
{
    uint64_t u = (uint64_t)t ^ 0x8000000000000000ull;
    for (int i = 7; i >= 0; i--, u >>= 8)
        o[i] = (unsigned char)(u & 0xff);
}

static int64_t tget(const unsigned char *in)
{
    uint64_t u = 0;
    for (int i = 0; i < 8; i++)
        u = (u << 8) | in[i];
    return (int64_t)(u ^ 0x8000000000000000ull);
}

/* 0x30 "k-NN" 00 00 T(start): 15 bytes. */
#define WKEY_LEN 15
static void wkey(unsigned char *o, int k, int64_t start)
{
    char name[16];
    snprintf(name, sizeof name, "k-%02d", k);
    o[0] = 0x30;
    memcpy(o + 1, name, 4);
    o[5] = o[6] = 0;
    tput(o + 7, start);
}

static wwin *window_of_wkey(wnode *n, const unsigned char *o, size_t len, int *k, long *slot)
{
    char name[8];
    if (len != WKEY_LEN || o[0] != 0x30 || o[5] || o[6])
        return NULL;
    memcpy(name, o + 1, 4);
    name[4] = '\0';
    *k = parse_key(name);
    int64_t s = tget(o + 7);
    if (*k < 0 || (s - R.base) % n->advance != 0)
        return NULL;
    *slot = (long)((s - R.base) / n->advance + 1);
    wwin *w = wget(n, *slot, *k);
    return w && w->n ? w : NULL;
}

/* What the store of node n must hold in task p: the meta record (stream
 * time, records seen), and each window not yet expired with its index
 * entry (due at the window's end). */
static void expected_store(wnode *n, int p, kvs *out)
{
    if (part_count[p]) {
        unsigned char meta[16], key = 0x10;
        tput(meta, part_st[p]);
        ks_int64_encode(part_count[p], meta + 8);
        kvs_add(out, &key, 1, meta, sizeof meta);
    }
    for (long slot = 0; slot < n->slots; slot++)
        for (int k = 0; k < KEYS; k++) {
            wwin *w = wget(n, slot, k);
            if (!w->n || key_part[k] != p || expired(n, slot, k))
                continue;
            unsigned char wk[WKEY_LEN], ik[9 + WKEY_LEN];
            char agg[128];
            unsigned char val[130];
            wkey(wk, k, slot_start(n, slot));
            agg_text(w, w->n, agg, sizeof agg);
            val[0] = 0; /* flags: not emitted */
            memcpy(val + 1, agg, strlen(agg));
            kvs_add(out, wk, sizeof wk, val, strlen(agg) + 1);
            ik[0] = 0x20;
            tput(ik + 1, slot_start(n, slot) + n->size);
            memcpy(ik + 9, wk, sizeof wk);
            kvs_add(out, ik, sizeof ik, "", 0);
        }
    qsort(out->items, out->n, sizeof *out->items, kv_cmp);
}

static void hex(const unsigned char *b, size_t n, char *buf, size_t len)
{
    size_t at = 0;
    for (size_t i = 0; i < n && at + 3 < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%02x", b[i]);
    buf[at] = '\0';
}

/* Compare two sorted pair lists; the first difference is reported. */
static long kvs_diff(const char *what, int p, const kvs *have, const kvs *want)
{
    size_t i = 0, j = 0;
    long bad = 0;
    char hk[128], hv[300];
    while (i < have->n || j < want->n) {
        int c = i == have->n ? 1
                : j == want->n ? -1
                               : key_cmp(have->items[i].k, have->items[i].kl, want->items[j].k,
                                         want->items[j].kl);
        if (c == 0) {
            if ((have->items[i].vl != want->items[j].vl ||
                 memcmp(have->items[i].v, want->items[j].v, want->items[j].vl) != 0) &&
                !bad++) {
                hex(want->items[j].k, want->items[j].kl, hk, sizeof hk);
                hex(have->items[i].v, have->items[i].vl, hv, sizeof hv);
                differ("%s of task %d: key %s holds %s, expected %.*s", what, p, hk, hv,
                       (int)want->items[j].vl, (const char *)want->items[j].v);
            }
            i++, j++;
        } else if (c < 0) {
            if (!bad++) {
                hex(have->items[i].k, have->items[i].kl, hk, sizeof hk);
                differ("%s of task %d: key %s should not be there", what, p, hk);
            }
            i++;
        } else {
            if (!bad++) {
                hex(want->items[j].k, want->items[j].kl, hk, sizeof hk);
                differ("%s of task %d: key %s is missing", what, p, hk);
            }
            j++;
        }
    }
    return bad;
}

static int cl_cmp(const void *a, const void *b)
{
    const msg *x = a, *y = b;
    if (x->partition != y->partition)
        return x->partition < y->partition ? -1 : 1;
    int c = key_cmp((const unsigned char *)x->key, x->key_len, (const unsigned char *)y->key,
                    y->key_len);
    return c ? c : (x->offset > y->offset) - (x->offset < y->offset);
}

/* (c) for a windowed node's changelog (read_committed): per task the meta
 * record's values in order (stream time and count of every input, no
 * repeat, no gap); per window its values 1..n in order, then a tombstone
 * iff it expired; per index entry a put, then a tombstone iff it expired;
 * and the latest value of every key equals the store (`stores`). */
static void check_window_changelog(wnode *n, const kvs stores[PARTS])
{
    snprintf(R.where, sizeof R.where, "final check (c) %s", n->changelog);
    msgs m = {0};
    CU_ASSERT_EQUAL(read_topic(n->changelog, "read_committed", &m), 0);
    long bad = 0, meta_at[PARTS] = {0};
    char want[160];
    for (size_t i = 0; i < m.count; i++) {
        const msg *x = &m.items[i];
        const unsigned char *key = (const unsigned char *)x->key;
        int p = x->partition, k = -1;
        long slot = -1;
        wwin *w = NULL;
        if (p < 0 || p >= PARTS || !key || x->key_len == 0) {
            if (!bad++)
                differ("%s: foreign record at partition %d offset %lld", n->changelog, p,
                       (long long)x->offset);
            continue;
        }
        if (key[0] == 0x10 && x->key_len == 1) { /* meta */
            long j = meta_at[p]++;
            unsigned char exp[16];
            if (j < part_count[p]) {
                tput(exp, ts_of(part_seqs[p][j]));
                ks_int64_encode(j + 1, exp + 8);
            }
            if ((j >= part_count[p] || x->null_value || x->value_len != 16 ||
                 memcmp(x->value, exp, 16) != 0) &&
                !bad++)
                differ("%s: task %d: meta record %ld (offset %lld) is not (event time of seq "
                       "%ld, %ld): %s",
                       n->changelog, p, j + 1, (long long)x->offset,
                       j < part_count[p] ? part_seqs[p][j] : -1L, j + 1,
                       x->value_len == 16 && (long)ks_int64_decode(x->value + 8) <= j
                           ? "repeat: an aborted or duplicate record"
                           : "gap or foreign value");
            if (x->value_len == 16)
                meta_at[p] = (long)ks_int64_decode(x->value + 8); /* resynchronise */
        } else if (key[0] == 0x30 && (w = window_of_wkey(n, key, x->key_len, &k, &slot))) {
            int exp = expired(n, slot, k);
            if (key_part[k] != p) {
                if (!bad++)
                    differ("%s: window of k-%02d in task %d, its input is in %d", n->changelog,
                           k, p, key_part[k]);
            } else if (x->null_value) {
                if ((!exp || w->cl_deleted || w->cl_seen != w->n) && !w->cl_bad++ && !bad++)
                    differ("%s: window k-%02d [%lld, +%lld): tombstone at offset %lld after %d "
                           "of %d values (%s)",
                           n->changelog, k, (long long)slot_start(n, slot), (long long)n->size,
                           (long long)x->offset, w->cl_seen, w->n,
                           exp ? (w->cl_deleted ? "deleted twice" : "too early")
                               : "the window has not expired");
                w->cl_deleted++;
            } else {
                int c = 0;
                if (w->cl_seen < w->n) {
                    want[0] = '\0';
                    agg_text(w, w->cl_seen + 1, want + 1, sizeof want - 1);
                }
                if (w->cl_seen < w->n && !w->cl_deleted && x->value_len == strlen(want + 1) + 1 &&
                    memcmp(x->value, want, x->value_len) == 0) {
                    w->cl_seen++;
                    continue;
                }
                if (!w->cl_bad++ && !bad++)
                    differ("%s: window k-%02d [%lld, +%lld): value %d of %d at offset %lld is "
                           "%s, expected %s",
                           n->changelog, k, (long long)slot_start(n, slot), (long long)n->size,
                           w->cl_seen + 1, w->n, (long long)x->offset,
                           x->value_len ? x->value + 1 : "(empty)",
                           w->cl_seen < w->n ? want + 1 : "nothing more");
                w->cl_seen = x->value_len > 1 && sscanf(x->value + 1, "{\"c\":%d", &c) == 1
                                 ? c
                                 : w->cl_seen + 1;
            }
        } else if (key[0] == 0x20 && x->key_len == 9 + WKEY_LEN &&
                   (w = window_of_wkey(n, key + 9, WKEY_LEN, &k, &slot)) &&
                   tget(key + 1) == slot_start(n, slot) + n->size) {
            int exp = expired(n, slot, k);
            int ok = x->null_value ? w->idx_state == 1 && exp
                                   : w->idx_state == 0 && x->value_len == 0;
            if (!ok && !bad++)
                differ("%s: index entry of window k-%02d [%lld, +%lld): %s at offset %lld out "
                       "of order (state %d, %s)",
                       n->changelog, k, (long long)slot_start(n, slot), (long long)n->size,
                       x->null_value ? "tombstone" : "put", (long long)x->offset, w->idx_state,
                       exp ? "expired" : "open");
            w->idx_state = x->null_value ? 2 : 1;
        } else if (!bad++) {
            char hk[128];
            hex(key, x->key_len, hk, sizeof hk);
            differ("%s: foreign key %s at partition %d offset %lld", n->changelog, hk, p,
                   (long long)x->offset);
        }
    }
    for (int p = 0; p < PARTS; p++)
        if (meta_at[p] != part_count[p] && !bad++)
            differ("%s: task %d: %ld meta records, %ld inputs", n->changelog, p, meta_at[p],
                   part_count[p]);
    for (long slot = 0; slot < n->slots; slot++)
        for (int k = 0; k < KEYS; k++) {
            wwin *w = wget(n, slot, k);
            if (!w->n)
                continue;
            int exp = expired(n, slot, k);
            if ((w->cl_seen != w->n || w->cl_deleted != exp || w->idx_state != (exp ? 2 : 1)) &&
                !bad++)
                differ("%s: window k-%02d [%lld, +%lld): %d of %d values, %d tombstones, index "
                       "state %d; expired: %d",
                       n->changelog, k, (long long)slot_start(n, slot), (long long)n->size,
                       w->cl_seen, w->n, w->cl_deleted, w->idx_state, exp);
        }
    /* the latest value of each key, per task, against the store */
    qsort(m.items, m.count, sizeof *m.items, cl_cmp);
    kvs latest[PARTS];
    memset(latest, 0, sizeof latest);
    for (size_t i = 0; i < m.count; i++) {
        const msg *x = &m.items[i];
        int last = !(i + 1 < m.count && x->partition == m.items[i + 1].partition &&
                     key_cmp((const unsigned char *)x->key, x->key_len,
                             (const unsigned char *)m.items[i + 1].key,
                             m.items[i + 1].key_len) == 0);
        if (last && !x->null_value && x->partition >= 0 && x->partition < PARTS && x->key)
            kvs_add(&latest[x->partition], x->key, x->key_len, x->value, x->value_len);
    }
    long differ_store = 0;
    for (int p = 0; p < PARTS; p++) {
        char what[400];
        snprintf(what, sizeof what, "%s (latest values) vs store '%s'", n->changelog, n->store);
        differ_store += kvs_diff(what, p, &stores[p], &latest[p]);
        kvs_free(&latest[p]);
    }
    say("check %s: %zu records, %ld differences; latest values vs store: %ld differences",
        n->changelog, m.count, bad, differ_store);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(differ_store, 0);
    msgs_free(&m);
}

/* (b) and (c) on the converged state dir of instance 0. */
static void check_state(void)
{
    snprintf(R.where, sizeof R.where, "final check (b) stores");
    kvs wstores[WNODES][PARTS];
    memset(wstores, 0, sizeof wstores);
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
        ks_bytes none = {NULL, 0};
        if (ks_store_db_open(env, "counts", &db) == 0) {
            CU_ASSERT_EQUAL(ks_store_range(db, none, none, scan_cb, &sc), 0);
            opened++;
        } else
            differ("task %d has no store 'counts'", p);
        for (int n = 0; n < WNODES; n++) {
            if (ks_store_db_open(env, wn[n].store, &db) == 0)
                CU_ASSERT_EQUAL(ks_store_range(db, none, none, kvs_scan_cb, &wstores[n][p]), 0)
            else
                differ("task %d has no store '%s'", p, wn[n].store);
        }
        ks_store_read_end(env);
        ks_store_env_close(env);
    }
    /* the windowed stores: exactly the meta record and the open windows */
    long wbad = 0;
    for (int n = 0; n < WNODES; n++)
        for (int p = 0; p < PARTS; p++) {
            kvs want = {0};
            char what[300];
            expected_store(&wn[n], p, &want);
            snprintf(what, sizeof what, "store '%s'", wn[n].store);
            long b = kvs_diff(what, p, &wstores[n][p], &want);
            wbad += b;
            if (p == 0 || b)
                say("check store '%s': task %d holds %zu entries, the reference %zu", wn[n].store,
                    p, wstores[n][p].n, want.n);
            kvs_free(&want);
        }
    CU_ASSERT_EQUAL(wbad, 0);
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
    for (int n = 0; n < WNODES; n++) {
        check_window_changelog(&wn[n], wstores[n]);
        for (int p = 0; p < PARTS; p++)
            kvs_free(&wstores[n][p]);
    }
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
    for (int n = 0; n < WNODES; n++) {
        it_unique(wn[n].topic, sizeof wn[n].topic, n ? "crash-winf" : "crash-win");
        snprintf(wn[n].changelog, sizeof wn[n].changelog, "%s-%s-changelog", R.app, wn[n].store);
    }
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    R.base = (int64_t)wall.tv_sec / 60 * 60000; /* whole minutes: windows align */
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
    input_layout();
    wref_build();
    for (int n = 0; n < WNODES; n++)
        check_window_outputs(&wn[n]);
    check_state();
    wref_free();

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

static int rp_iteration(uint64_t seed, FILE *summary);

/* Long mode: each iteration is the main topology's, then the re-keyed
 * count's (same seed); KS_CRASH_ONLY_REPART=1: the re-keyed count's alone. */
static void test_long(void)
{
    int only_rp = getenv("KS_CRASH_ONLY_REPART") != NULL;
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
         brokers = 0, stalls = 0, aborted = 0, rp_good = 0, rp_kills = 0;
    for (;;) {
        if (iters && n >= iters)
            break;
        if (!iters && secs && it_now_ms() - start >= secs * 1000)
            break;
        if (!only_rp) {
            good += iteration(seed0 + (uint64_t)n, 1, f);
            kills += R.fig.kills;
            aborts += R.fig.aborts;
            rebuilds += R.fig.rebuilds;
            restores += R.fig.restore_hits;
            zombies += R.fig.zombies;
            brokers += R.fig.broker_restarts;
            stalls += R.fig.stalls;
            aborted += R.fig.aborted_records;
        }
        rp_good += rp_iteration(seed0 + (uint64_t)n, f);
        rp_kills += R.fig.kills;
        n++;
    }
    if (only_rp)
        fprintf(f,
                "TOTAL topology=repartition first_seed=%" PRIu64 " kafka=%s iterations=%ld "
                "ok=%ld failed=%ld kills=%ld minutes=%.1f\n",
                seed0, getenv("KAFKA_VERSION") ? getenv("KAFKA_VERSION") : "?", n, rp_good,
                n - rp_good, rp_kills, (double)(it_now_ms() - start) / 60000.0);
    else
        fprintf(f,
                "TOTAL first_seed=%" PRIu64 " kafka=%s iterations=%ld ok=%ld failed=%ld "
                "kills=%ld restore_kills=%ld zombies=%ld broker_restarts=%ld stalls=%ld "
                "aborts=%ld producer_rebuilds=%ld aborted_records=%ld repartition_ok=%ld "
                "repartition_failed=%ld repartition_kills=%ld minutes=%.1f\n",
                seed0, getenv("KAFKA_VERSION") ? getenv("KAFKA_VERSION") : "?", n, good,
                n - good, kills, restores, zombies, brokers, stalls, aborts, rebuilds, aborted,
                rp_good, n - rp_good, rp_kills, (double)(it_now_ms() - start) / 60000.0);
    fclose(f);
    printf("  long run: %ld iterations, %ld ok (main topology), %ld ok (repartition), %ld "
           "kills; summary in %s\n",
           n, only_rp ? n : good, rp_good, kills + rp_kills, path);
    if (!only_rp)
        CU_ASSERT_EQUAL(good, n);
    CU_ASSERT_EQUAL(rp_good, n);
}

/* ---- a re-key in front of a count (issue 17) ------------------------------------------ */

/*
 * YAML only, as examples/page-views/pipeline-per-url.yaml: ops.select_key
 * takes the value's /g as the new key, a count behind it (store regroup);
 * the engine inserts <app>-per_g-repartition between them. A commit then
 * holds the records produced to the repartition topic, the output, the
 * changelog of regroup and the offsets of both sub-topologies (the input's
 * and the repartition topic's) in one transaction, and LMDB commits after.
 *
 * One process (2 workers, all 6 tasks), input k-NN = {"n":seq,"g":"g-MM"}
 * produced in chunks while it runs, is killed once at each point of the
 * commit sequence (KS_CRASH_AT: before the flush, i.e. with the batch's
 * repartition records produced but not flushed; before the offsets; before
 * the Kafka commit; after it, before the LMDB commit; after the LMDB
 * commit), during a restore of an emptied state directory, and by a plain
 * SIGKILL at a random moment; the order and the visit (which commit, which
 * restored record) come from the seed. Each restart recovers from the
 * previous kill. A last clean run drains and stops. Then, against the
 * reference of the input:
 *   the output (read_committed): per new key exactly 1, 2, ..., n in order;
 *   the repartition topic (read_committed): no seq twice, each under its
 *     new key (what the purge left of it);
 *   the stores (LMDB, read-only): per new key n, nothing else;
 *   the changelog (read_committed): per new key 1..n, the latest = the store.
 */
#define RP_GROUPS 24
#define RP_POINTS 7
static const char *const rp_point[RP_POINTS] = {
    "before-flush",       "before-send-offsets", "before-kafka-commit", "after-kafka-commit",
    "after-store-commit", "during-restore",      "sigkill"};
#define RP_RESTORE 5 /* rp_point[] indexes */
#define RP_SIGKILL 6

static struct rp {
    char yaml[512], log[512], state[512], out_topic[128], changelog[300], topic[300];
    long produced;
    long ref[RP_GROUPS];
    /* the repartition topic's check */
    unsigned char *seen; /* [seq]: committed records of it seen */
    size_t seen_cap;
    int64_t checked[PARTS]; /* offsets below were read */
    long topic_records, topic_bad, aborted;
} RP;

/* every new key, each in about as many records (seq * 5 + seq / 7 alone
 * reaches 14 of the 24) */
static int rp_group_of(long seq) { return (int)((seq * 5 + seq / 7 + seq / 11) % RP_GROUPS); }

static void rp_make(int i, char *key, size_t klen, char *value, size_t vlen, int32_t *partition,
                    void *arg)
{
    (void)partition;
    long seq = *(long *)arg + i;
    snprintf(key, klen, "k-%02d", key_of(seq));
    snprintf(value, vlen, "{\"n\":%ld,\"g\":\"g-%02d\"}", seq, rp_group_of(seq));
}

static void rp_produce(int n)
{
    long base = RP.produced;
    CU_ASSERT_FATAL(it_produce(R.in_topic, n, rp_make, &base) == 0);
    for (int i = 0; i < n; i++)
        RP.ref[rp_group_of(base + i)]++;
    RP.produced += n;
}

static int rp_parse(const char *k, size_t len)
{
    int n = -1;
    if (!k || len != 4 || sscanf(k, "g-%d", &n) != 1 || n < 0 || n >= RP_GROUPS)
        return -1;
    return n;
}

/* Per new key exactly 1..ref in order; last[] gets the last values. */
static long rp_sequences(const char *what, const msgs *m, long last[RP_GROUPS])
{
    long bad = 0;
    for (int g = 0; g < RP_GROUPS; g++)
        last[g] = 0;
    for (size_t i = 0; i < m->count; i++) {
        const msg *x = &m->items[i];
        int g = rp_parse(x->key, x->key_len);
        if (g < 0 || x->value_len != 8) {
            if (!bad++)
                differ("%s: foreign record at partition %d offset %lld (key %s, %zu bytes)",
                       what, (int)x->partition, (long long)x->offset, x->key ? x->key : "null",
                       x->value_len);
            continue;
        }
        long c = (long)ks_int64_decode(x->value);
        if (c != last[g] + 1 && !bad++)
            differ("%s: key g-%02d: value %ld follows %ld (%s) at partition %d offset %lld",
                   what, g, c, last[g], c <= last[g] ? "repeat: an aborted or duplicate record"
                                                     : "gap: a committed record is missing",
                   (int)x->partition, (long long)x->offset);
        last[g] = c;
    }
    for (int g = 0; g < RP_GROUPS; g++)
        if (last[g] != RP.ref[g] && !bad++)
            differ("%s: key g-%02d ends at %ld, the reference says %ld", what, g, last[g],
                   RP.ref[g]);
    say("check %s: %zu records, %ld differences", what, m->count, bad);
    CU_ASSERT_EQUAL(bad, 0);
    return bad;
}

static int rp_scan_cb(void *arg, ks_bytes key, ks_bytes value)
{
    store_scan *sc = arg;
    int g = rp_parse((const char *)key.data, key.len);
    sc->entries++;
    if (g < 0 || value.len != 8 || sc->count[g]) {
        sc->foreign++;
        return 0;
    }
    sc->count[g] = (long)ks_int64_decode(value.data);
    return 0;
}

static void rp_yaml(void)
{
    it_write_file(RP.yaml,
                  "application: %s\n"
                  "kafka:\n"
                  "  bootstrap: [%s]\n"
                  "  properties: { session.timeout.ms: 2000, heartbeat.interval.ms: 500 }\n"
                  "guarantee: exactly-once\n"
                  "commit_interval_ms: 100\n"
                  "workers: 2\n"
                  "state_dir: %s\n"
                  "plugins: [%s/plugins/.libs/count.so, %s/plugins/.libs/ops.so]\n"
                  "sources:\n"
                  "  in: { topic: %s, key: string, value: json }\n"
                  "nodes:\n"
                  "  - { name: by_g, type: ops.select_key, from: in, config: { path: /g } }\n"
                  /* every update visible: the check of this topology is
                   * exact per update (the main topology checks the cache) */
                  "  - { name: per_g, type: count.count, from: by_g, store: regroup,"
                  " cache_bytes: 0 }\n"
                  "sinks:\n"
                  "  - { from: per_g, topic: %s, key: string, value: int64, create: true, "
                  "partitions: %d }\n",
                  R.app, it_bootstrap(), RP.state, KS_TEST_BUILDDIR, KS_TEST_BUILDDIR,
                  R.in_topic, RP.out_topic, PARTS);
}

/* Records of the output so far (read_committed). */
static long rp_out_count(void)
{
    msgs m = {0};
    long n = read_topic(RP.out_topic, "read_committed", &m) == 0 ? (long)m.count : -1;
    msgs_free(&m);
    return n;
}

/* Records of the changelog of regroup (read_committed). */
static long rp_changelog_count(void)
{
    msgs m = {0};
    long n = read_topic(RP.changelog, "read_committed", &m) == 0 ? (long)m.count : 0;
    msgs_free(&m);
    return n;
}

/* One kill: start the engine (to die at `point`'s visit-th visit, or by
 * SIGKILL after delay_ms of processing), feed it until it is dead. 1 when
 * it died where it should. */
static int rp_kill_round(const char *point, int visit, int delay_ms, uint64_t *s)
{
    long from = file_size(RP.log);
    char env[128];
    int plain = strcmp(point, "sigkill") == 0;
    if (strcmp(point, "during-restore") == 0) {
        /* the restore must reach the visit: the changelog must hold that
         * many records (the state-version records come on top); if not
         * yet (the kill before came early: the count had committed
         * little), a run without a crash point fills it first, then a
         * SIGKILL */
        long have = rp_changelog_count();
        if (have < visit) {
            pid_t pid = engine_start(RP.yaml, "a", RP.log);
            for (int64_t end = it_now_ms() + 30000; have < visit && it_now_ms() < end;) {
                rp_produce(rnd(s, 20, 120));
                it_sleep_ms(200);
                have = rp_changelog_count();
            }
            it_engine_kill(pid);
            R.fig.kills++;
            say("repartition: the changelog held too few records for during-restore:%d: ran "
                "until it held %ld, SIGKILL",
                visit, have);
            if (have < visit)
                visit = have > 0 ? (int)have : 1;
        }
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", RP.state);
        CU_ASSERT(system(cmd) == 0);
    }
    snprintf(env, sizeof env, "KS_CRASH_AT=%s:%d", point, visit);
    pid_t pid = engine_start_env(RP.yaml, "a", RP.log, plain ? NULL : env);
    int st = -1;
    if (plain) {
        wait_processing(RP.log, from, 30000);
        for (int64_t end = it_now_ms() + delay_ms; it_now_ms() < end;) {
            rp_produce(rnd(s, 20, 120));
            it_sleep_ms(50);
        }
        it_engine_kill(pid);
        st = 128 + SIGKILL;
    } else {
        for (int64_t end = it_now_ms() + 30000; st < 0 && it_now_ms() < end;) {
            st = it_engine_wait(pid, 100);
            if (st < 0)
                rp_produce(rnd(s, 20, 120));
        }
        if (st < 0)
            it_engine_kill(pid);
    }
    int hit = plain || log_count_from(RP.log, from, "KS_CRASH_AT: killing the process at") > 0;
    say("repartition: %s:%d: exit %d, %s; %ld inputs so far", point, plain ? delay_ms : visit,
        st, hit ? "killed there" : "NOT killed there", RP.produced);
    if (st != 128 + SIGKILL || !hit)
        differ("the engine did not die at %s:%d (exit %d, see %s)", point, visit, st, RP.log);
    return st == 128 + SIGKILL && hit;
}

/* (b) and (c): the stores of every task, then the changelog. */
static void rp_check_state(void)
{
    snprintf(R.where, sizeof R.where, "repartition: the stores");
    store_scan sc;
    memset(&sc, 0, sizeof sc);
    int opened = 0;
    for (int p = 0; p < PARTS; p++) {
        char dir[900], err[512];
        snprintf(dir, sizeof dir, "%s/%s/task-%d", RP.state, R.app, p);
        ks_store_env *env;
        if (ks_store_env_open_readonly(dir, &env, err, sizeof err) != 0) {
            differ("store of task %d: %s", p, err);
            continue;
        }
        ks_store_db *db;
        ks_bytes none = {NULL, 0};
        if (ks_store_db_open(env, "regroup", &db) == 0) {
            CU_ASSERT_EQUAL(ks_store_range(db, none, none, rp_scan_cb, &sc), 0);
            opened++;
        }
        ks_store_read_end(env);
        ks_store_env_close(env);
    }
    long bad = sc.foreign;
    if (sc.foreign)
        differ("store regroup: %ld foreign or duplicated entries", sc.foreign);
    for (int g = 0; g < RP_GROUPS; g++)
        if (sc.count[g] != RP.ref[g] && !bad++)
            differ("store regroup: key g-%02d holds %ld, the reference says %ld", g, sc.count[g],
                   RP.ref[g]);
    say("check store regroup: %d task stores, %ld entries, %ld differences", opened, sc.entries,
        bad);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(opened > 0);

    snprintf(R.where, sizeof R.where, "repartition: %s", RP.changelog);
    msgs m = {0};
    CU_ASSERT_EQUAL(read_topic(RP.changelog, "read_committed", &m), 0);
    long last[RP_GROUPS], differ_store = 0;
    rp_sequences("changelog regroup", &m, last);
    for (int g = 0; g < RP_GROUPS; g++)
        if (last[g] != sc.count[g] && !differ_store++)
            differ("changelog regroup: key g-%02d latest %ld, the store holds %ld", g, last[g],
                   sc.count[g]);
    CU_ASSERT_EQUAL(differ_store, 0);
    msgs_free(&m);
}

/* The repartition topic (read_committed), read after each kill (a dead
 * engine purges nothing) and after the last run, each record once: no seq
 * committed twice, each under the key it was re-keyed to. The records
 * aborted in it (read_uncommitted minus read_committed, below what was
 * read) are counted. */
static void rp_check_topic(void)
{
    snprintf(R.where, sizeof R.where, "repartition: %s", RP.topic);
    msgs m = {0}, u = {0};
    if (read_topic(RP.topic, "read_committed", &m) != 0) {
        differ("%s: not read to its end", RP.topic);
        msgs_free(&m);
        return;
    }
    if (RP.seen_cap < (size_t)RP.produced + 1) {
        RP.seen = realloc(RP.seen, (size_t)RP.produced + 1);
        memset(RP.seen + RP.seen_cap, 0, (size_t)RP.produced + 1 - RP.seen_cap);
        RP.seen_cap = (size_t)RP.produced + 1;
    }
    long bad = 0, fresh = 0;
    int64_t top[PARTS];
    memcpy(top, RP.checked, sizeof top);
    for (size_t i = 0; i < m.count; i++) {
        const msg *x = &m.items[i];
        if (x->partition < 0 || x->partition >= PARTS || x->offset < RP.checked[x->partition])
            continue; /* seen in an earlier read */
        if (x->offset + 1 > top[x->partition])
            top[x->partition] = x->offset + 1;
        fresh++;
        long seq = -1;
        char want[16] = "";
        if (x->value && sscanf(x->value, "{\"n\":%ld", &seq) == 1 && seq >= 0 &&
            seq < RP.produced)
            snprintf(want, sizeof want, "g-%02d", rp_group_of(seq));
        if (seq < 0 || seq >= RP.produced || !x->key || strcmp(x->key, want) != 0) {
            if (!bad++)
                differ("%s: foreign record at partition %d offset %lld: %s = %s", RP.topic,
                       (int)x->partition, (long long)x->offset, x->key ? x->key : "null",
                       x->value);
            continue;
        }
        if (RP.seen[seq]++ && !bad++)
            differ("%s: seq %ld committed twice (again at partition %d offset %lld)", RP.topic,
                   seq, (int)x->partition, (long long)x->offset);
    }
    memcpy(RP.checked, top, sizeof top);
    RP.topic_records += fresh;
    if (read_topic(RP.topic, "read_uncommitted", &u) == 0) {
        /* the aborted ones: records below the offsets read that
         * read_committed did not return */
        long below = 0;
        for (size_t i = 0; i < u.count; i++)
            if (u.items[i].partition >= 0 && u.items[i].partition < PARTS &&
                u.items[i].offset < RP.checked[u.items[i].partition])
                below++;
        long aborted = below - (long)m.count;
        if (aborted > RP.aborted)
            RP.aborted = aborted;
    }
    RP.topic_bad += bad;
    CU_ASSERT_EQUAL(bad, 0);
    msgs_free(&m);
    msgs_free(&u);
}

static int rp_iteration(uint64_t seed, FILE *summary)
{
    memset(&R.fig, 0, sizeof R.fig);
    memset(&RP, 0, sizeof RP);
    diffs = 0;
    memset(&R.pl, 0, sizeof R.pl);
    R.pl.seed = seed;
    R.pl.nsteps = RP_POINTS;
    uint64_t s = seed ^ 0x5245504152544954ull; /* not the main plan's draws */
    int order[RP_POINTS], visit[RP_POINTS];
    for (int i = 0; i < RP_POINTS; i++)
        order[i] = i;
    for (int i = RP_POINTS - 1; i > 0; i--) {
        int j = rnd(&s, 0, i), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    if (order[0] == RP_RESTORE) { /* a restore needs a changelog: never first */
        order[0] = order[1];
        order[1] = RP_RESTORE;
    }
    char plan_text[512];
    size_t pt = 0;
    for (int i = 0; i < RP_POINTS; i++) {
        int pi = order[i];
        /* the n-th restored record, ms of processing, the n-th commit */
        visit[i] = pi == RP_RESTORE   ? rnd(&s, 1, 400)
                   : pi == RP_SIGKILL ? rnd(&s, 200, 1500)
                                      : rnd(&s, 2, 12);
        pt += (size_t)snprintf(plan_text + pt, sizeof plan_text - pt, "%s%s:%d", i ? "," : "",
                               rp_point[pi], visit[i]);
    }
    printf("  [seed %" PRIu64 "] repartition plan: %s\n", seed, plan_text);

    it_tempdir(R.dir, sizeof R.dir);
    it_unique(R.app, sizeof R.app, "crash-rp");
    it_unique(R.in_topic, sizeof R.in_topic, "crash-rp-in");
    it_unique(RP.out_topic, sizeof RP.out_topic, "crash-rp-out");
    snprintf(RP.changelog, sizeof RP.changelog, "%s-regroup-changelog", R.app);
    snprintf(RP.topic, sizeof RP.topic, "%s-per_g-repartition", R.app);
    snprintf(RP.yaml, sizeof RP.yaml, "%s/rp.yaml", R.dir);
    snprintf(RP.log, sizeof RP.log, "%s/rp.log", R.dir);
    snprintf(RP.state, sizeof RP.state, "%s/state", R.dir);
    rp_yaml();
    snprintf(R.where, sizeof R.where, "repartition: setup");
    CU_ASSERT_FATAL(it_create_topic(R.in_topic, PARTS) == 0);
    int64_t t0 = it_now_ms();
    rp_produce(500);
    int hits = 0;
    for (R.cur_step = 1; R.cur_step <= RP_POINTS; R.cur_step++) {
        int pi = order[R.cur_step - 1];
        snprintf(R.where, sizeof R.where, "repartition: %s:%d at input %ld", rp_point[pi],
                 visit[R.cur_step - 1], RP.produced);
        hits += rp_kill_round(rp_point[pi], visit[R.cur_step - 1], visit[R.cur_step - 1], &s);
        R.fig.kills++;
        rp_check_topic();
    }
    R.cur_step = RP_POINTS;
    snprintf(R.where, sizeof R.where, "repartition: drain");
    pid_t pid = engine_start(RP.yaml, "a", RP.log);
    rp_produce(300);
    long have = 0;
    int64_t drain_from = it_now_ms();
    while ((have = rp_out_count()) < RP.produced && it_now_ms() - drain_from < 120000)
        it_sleep_ms(500);
    say("repartition: drained %ld of %ld outputs after %.1f s", have, RP.produced,
        (double)(it_now_ms() - drain_from) / 1000.0);
    int rc = it_engine_stop(pid, 60000);
    if (rc != 0)
        differ("clean stop gave %d (see %s)", rc, RP.log);
    R.fig.replayed = it_log_sum_before(RP.log, ": ", " records replayed");
    R.fig.aborts = it_log_count(RP.log, "aborting batch");

    snprintf(R.where, sizeof R.where, "repartition: check %s", RP.out_topic);
    msgs m = {0};
    CU_ASSERT_EQUAL(read_topic(RP.out_topic, "read_committed", &m), 0);
    long last[RP_GROUPS];
    rp_sequences("out (per new key)", &m, last);
    if ((long)m.count != RP.produced)
        differ("out: %zu records for %ld inputs", m.count, RP.produced);
    msgs_free(&m);
    rp_check_topic();
    say("check %s: %ld committed records read over the run, each seq at most once, %ld "
        "differences; %ld aborted ones filtered (most in one read)",
        RP.topic, RP.topic_records, RP.topic_bad, RP.aborted);
    R.fig.aborted_records = RP.aborted;
    free(RP.seen);
    RP.seen = NULL;
    rp_check_state();

    int ok = diffs == 0 && hits == RP_POINTS;
    const char *ver = getenv("KAFKA_VERSION") ? getenv("KAFKA_VERSION") : "?";
    char line[1400];
    snprintf(line, sizeof line,
             "topology=repartition seed=%" PRIu64 " kafka=%s records=%ld kills=%d "
             "crash_points=%s aborts=%ld aborted_records=%ld replayed=%ld seconds=%.0f "
             "result=%s",
             seed, ver, RP.produced, R.fig.kills, plan_text, R.fig.aborts,
             R.fig.aborted_records, R.fig.replayed, (double)(it_now_ms() - t0) / 1000.0,
             ok ? "ok" : "DIFFERENCE");
    printf("  %s\n", line);
    if (summary) {
        fprintf(summary, "%s\n", line);
        fflush(summary);
    }
    if (ok && !getenv("KS_CRASH_KEEP")) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", R.dir);
        if (system(cmd) != 0)
            say("cannot remove %s", R.dir);
    } else
        say("logs and state kept in %s", R.dir);
    return ok;
}

/* Short mode: one round of kills, seed + 3 (the three main iterations use
 * seed .. seed + 2). */
static void test_repartitioned(void)
{
    printf("\n");
    CU_ASSERT(rp_iteration(seed0 + 3, NULL));
}

/* ---- a store map too small (issue 7) ------------------------------------------------- */

/*
 * One process, count with long keys into a store whose map_size is far
 * too small. Phase 1 fits; phase 2 brings hundreds of new keys and the
 * map fills. The engine must stop with exit status 1 and an error naming
 * the store and its directory, with nothing of the failed batch visible:
 * the output and the changelog (read_committed) and the store agree
 * exactly with the committed input offsets. A restart with the same
 * map_size stops the same way; one with a bigger map_size completes and
 * everything equals the reference of the whole input.
 */
#define FULL_PARTS 2
#define FULL_KEYS1 40 /* phase 1: few keys, fits */
#define FULL_KEYS 800 /* phase 2: many more, does not */
#define FULL_N1 400
#define FULL_N2 1600
#define FULL_CHUNK 100
#define FULL_SMALL "128KiB"
#define FULL_BIG "64MiB"

static struct full {
    const char *what; /* "map full" or "disk full": for messages */
    char dir[256], app[128], in[128], out[128], changelog[300], yaml[512], log[512], state[512];
} F;

static int full_key_of(long n)
{
    return n < FULL_N1 ? (int)(n * 7 % FULL_KEYS1) : (int)(n % FULL_KEYS);
}

static void full_make(int i, char *key, size_t klen, char *value, size_t vlen,
                      int32_t *partition, void *arg)
{
    long n = *(long *)arg + i;
    int k = full_key_of(n);
    snprintf(key, klen, "f%04d-%0300d", k, 0); /* 306 bytes */
    *partition = k % FULL_PARTS;
    snprintf(value, vlen, "{\"n\":%ld}", n);
}

static void full_yaml(const char *map_size)
{
    it_write_file(F.yaml,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s] }\n"
                  "guarantee: exactly-once\n"
                  "commit_interval_ms: 100\n"
                  "workers: 1\n"
                  "state_dir: %s\n"
                  "plugins: [%s/plugins/.libs/count.so]\n"
                  "stores:\n"
                  "  counts: { map_size: %s }\n"
                  "sources:\n"
                  "  in: { topic: %s, key: string, value: json }\n"
                  "nodes:\n"
                  "  - { name: per_key, type: count.count, from: in, store: counts, cache_bytes: 1MiB }\n"
                  "sinks:\n"
                  "  - { from: per_key, topic: %s, key: string, value: int64, create: true, "
                  "partitions: %d }\n",
                  F.app, it_bootstrap(), F.state, KS_TEST_BUILDDIR, map_size, F.in, F.out,
                  FULL_PARTS);
}

/* The group's committed offsets on the input (0 where none). 0 or -1. */
static int full_committed(int64_t off[FULL_PARTS])
{
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *props[] = {"bootstrap.servers", it_bootstrap(), "group.id", F.app,
                           "isolation.level", "read_committed", "enable.auto.commit", "false",
                           NULL};
    for (int i = 0; props[i]; i += 2)
        rd_kafka_conf_set(conf, props[i], props[i + 1], err, sizeof err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk)
        return -1;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(FULL_PARTS);
    for (int p = 0; p < FULL_PARTS; p++)
        rd_kafka_topic_partition_list_add(l, F.in, p);
    rd_kafka_resp_err_t e = rd_kafka_committed(rk, l, 15000);
    for (int p = 0; p < FULL_PARTS; p++) {
        int64_t o = l->elems[p].offset;
        off[p] = o >= 0 ? o : 0;
        if (l->elems[p].err)
            e = l->elems[p].err;
    }
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_destroy(rk);
    return e ? -1 : 0;
}

static int full_parse_key(const char *k)
{
    int n = -1;
    return k && sscanf(k, "f%d", &n) == 1 && n >= 0 && n < FULL_KEYS ? n : -1;
}

/* Per key rising values ending at want[k] (the record cache folds
 * updates within a commit, as in check_sequences); last[] gets the last
 * values. */
static long full_sequences(const char *what, const msgs *m, const long *want, long *last)
{
    long bad = 0;
    for (int k = 0; k < FULL_KEYS; k++)
        last[k] = 0;
    for (size_t i = 0; i < m->count; i++) {
        const msg *x = &m->items[i];
        int k = full_parse_key(x->key);
        long c = k >= 0 && x->value_len == 8 ? (long)ks_int64_decode(x->value) : -1;
        if (k < 0 || c <= last[k] || c > want[k]) {
            if (!bad++)
                differ("%s: at partition %d offset %lld key f%04d has %ld after %ld", what,
                       (int)x->partition, (long long)x->offset, k, c, k >= 0 ? last[k] : -1);
            if (k < 0)
                continue;
        }
        last[k] = c;
    }
    for (int k = 0; k < FULL_KEYS; k++)
        if (last[k] != want[k] && !bad++)
            differ("%s: key f%04d ends at %ld, the committed input says %ld", what, k, last[k],
                   want[k]);
    return bad;
}

/* 1 when the output (read_committed) shows every key's count of the first
 * `n` inputs as its last value: the transaction markers of the outputs
 * may land a moment after the committed offsets are visible. */
static int full_outputs_at(long n)
{
    long want[FULL_KEYS] = {0}, last[FULL_KEYS] = {0};
    for (long i = 0; i < n; i++)
        want[full_key_of(i)]++;
    msgs m = {0};
    if (read_topic(F.out, "read_committed", &m) != 0)
        return 0;
    for (size_t i = 0; i < m.count; i++) {
        int k = full_parse_key(m.items[i].key);
        if (k >= 0 && m.items[i].value_len == 8)
            last[k] = (long)ks_int64_decode(m.items[i].value);
    }
    msgs_free(&m);
    return memcmp(want, last, sizeof want) == 0;
}

/* Everything visible must agree with the committed input offsets: the
 * output and the changelog hold per key rising counts ending at n (at
 * most one output per input), n = the key's input
 * records below those offsets, and each task's store holds n for exactly
 * those keys. With `lag_ok` (a stop between the Kafka and the LMDB commit)
 * a store may instead be behind: it must then hold exactly what its
 * changelog says below the store's checkpoint. Returns the number of
 * committed inputs. */
static long full_check(const char *when, long total, int lag_ok)
{
    snprintf(R.where, sizeof R.where, "%s: %s", F.what, when);
    int64_t off[FULL_PARTS];
    CU_ASSERT_EQUAL_FATAL(full_committed(off), 0);
    long want[FULL_KEYS] = {0}, last[FULL_KEYS], done = 0, bad = 0;
    int keys_in[FULL_PARTS] = {0};
    msgs in = {0}, out = {0}, cl = {0};
    CU_ASSERT_EQUAL(read_topic(F.in, "read_committed", &in), 0);
    CU_ASSERT_EQUAL((long)in.count, total);
    for (size_t i = 0; i < in.count; i++) {
        const msg *x = &in.items[i];
        int k = full_parse_key(x->key);
        if (k >= 0 && x->partition >= 0 && x->partition < FULL_PARTS &&
            x->offset < off[x->partition]) {
            keys_in[x->partition] += want[k]++ == 0;
            done++;
        }
    }
    CU_ASSERT_EQUAL(read_topic(F.out, "read_committed", &out), 0);
    bad += full_sequences("output", &out, want, last);
    if ((long)out.count > done && !bad++)
        differ("output: %zu records for %ld committed inputs", out.count, done);
    CU_ASSERT_EQUAL(read_topic(F.changelog, "read_committed", &cl), 0);
    bad += full_sequences("changelog", &cl, want, last);
    long entries = 0;
    for (int p = 0; p < FULL_PARTS; p++) {
        char dir[900], err[512];
        snprintf(dir, sizeof dir, "%s/%s/task-%d", F.state, F.app, p);
        ks_store_env *env;
        if (ks_store_env_open_readonly(dir, &env, err, sizeof err) != 0) {
            if (off[p] > 0 && !bad++)
                differ("store of task %d: %s", p, err);
            continue;
        }
        kvs st = {0};
        ks_store_db *db;
        ks_bytes none = {NULL, 0};
        int64_t ckpt = -1;
        if (ks_store_db_open(env, "counts", &db) == 0) {
            CU_ASSERT_EQUAL(ks_store_range(db, none, none, kvs_scan_cb, &st), 0);
            ks_store_checkpoint_get(db, &ckpt);
        }
        ks_store_read_end(env);
        ks_store_env_close(env);
        entries += (long)st.n;
        /* what the store must hold: the cut of the committed input, or
         * (lag_ok) its changelog below its checkpoint */
        long *exp = calloc(FULL_KEYS, sizeof *exp);
        int exp_keys = 0;
        for (int k = 0; k < FULL_KEYS; k++)
            if (k % FULL_PARTS == p) {
                exp[k] = want[k];
                exp_keys += want[k] > 0;
            }
        int behind = 0;
        if (lag_ok) {
            long *at = calloc(FULL_KEYS, sizeof *at);
            int at_keys = 0;
            for (size_t i = 0; i < cl.count; i++) {
                const msg *x = &cl.items[i];
                int k = full_parse_key(x->key);
                if (k >= 0 && x->partition == p && x->offset < ckpt && x->value_len == 8) {
                    at_keys += at[k] == 0;
                    at[k] = (long)ks_int64_decode(x->value);
                }
            }
            behind = memcmp(at, exp, FULL_KEYS * sizeof *at) != 0;
            free(exp);
            exp = at;
            exp_keys = at_keys;
        }
        if (behind)
            printf("  [%s] the store of task %d is behind its changelog (checkpoint %lld): the "
                   "restart replays the rest\n",
                   F.what, p, (long long)ckpt);
        if ((long)st.n != exp_keys && !bad++)
            differ("store of task %d: %zu keys, %s has %d", p, st.n,
                   lag_ok ? "its changelog below the checkpoint" : "the committed input",
                   exp_keys);
        for (size_t i = 0; i < st.n; i++) {
            char k[16];
            snprintf(k, sizeof k, "%.*s", (int)(st.items[i].kl < 8 ? st.items[i].kl : 8),
                     (const char *)st.items[i].k);
            int n = full_parse_key(k);
            long v = st.items[i].vl == 8 ? (long)ks_int64_decode(st.items[i].v) : -1;
            if ((n < 0 || n % FULL_PARTS != p || v != exp[n]) && !bad++)
                differ("store of task %d: key %s holds %ld, %s says %ld", p, k, v,
                       lag_ok ? "its changelog below the checkpoint" : "the committed input",
                       n >= 0 ? exp[n] : -1);
        }
        free(exp);
        kvs_free(&st);
    }
    printf("  [%s] %s: committed input offsets %lld + %lld = %ld of %ld records; output %zu, "
           "changelog %zu records, stores %ld keys; %ld differences\n",
           F.what, when, (long long)off[0], (long long)off[1], done, total, out.count, cl.count, entries,
           bad);
    CU_ASSERT_EQUAL(bad, 0);
    msgs_free(&in);
    msgs_free(&out);
    msgs_free(&cl);
    return done;
}

/* The line of `log` that holds `needle`, printed. */
static void full_show(const char *needle)
{
    FILE *f = fopen(F.log, "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, needle))
            printf("  [%s] log: %s", F.what, line);
    if (f)
        fclose(f);
}

static void full_setup(const char *what)
{
    memset(&F, 0, sizeof F);
    F.what = what;
    R.cur_step = R.pl.nsteps = 0;
    R.pl.seed = seed0;
    diffs = 0;
    it_tempdir(F.dir, sizeof F.dir);
    it_unique(F.app, sizeof F.app, "crash-full");
    it_unique(F.in, sizeof F.in, "full-in");
    it_unique(F.out, sizeof F.out, "full-out");
    snprintf(F.changelog, sizeof F.changelog, "%s-counts-changelog", F.app);
    snprintf(F.yaml, sizeof F.yaml, "%s/full.yaml", F.dir);
    snprintf(F.log, sizeof F.log, "%s/full.log", F.dir);
    snprintf(F.state, sizeof F.state, "%s/state", F.dir);
}

/* Input records below the group's committed offsets (0 when unknown):
 * under exactly-once every output of those is committed too. Progress is
 * measured here, not by the output: the count's record cache folds. */
static long full_inputs_done(void)
{
    int64_t off[FULL_PARTS];
    if (full_committed(off) != 0)
        return 0;
    long n = 0;
    for (int p = 0; p < FULL_PARTS; p++)
        n += (long)off[p];
    return n;
}

/* Phase 1 (fits), then phase 2 in chunks until the engine stops by
 * itself; the rest of the input is produced anyway. The exit status. */
static int full_run_until_stop(void)
{
    const long total = FULL_N1 + FULL_N2;
    long base = 0;
    CU_ASSERT_FATAL(it_produce(F.in, FULL_N1, full_make, &base) == 0);
    pid_t pid = engine_start(F.yaml, "full", F.log);
    int64_t t0 = it_now_ms();
    while (full_inputs_done() < FULL_N1 && it_now_ms() - t0 < 60000)
        it_sleep_ms(300);
    CU_ASSERT_EQUAL(full_inputs_done(), FULL_N1);
    while (!full_outputs_at(FULL_N1) && it_now_ms() - t0 < 60000)
        it_sleep_ms(300);
    CU_ASSERT(full_outputs_at(FULL_N1));

    /* phase 2 in chunks, so that some batches of new keys commit before
     * the store fills up (the failed batch is then somewhere in the
     * middle) */
    int st = -1, chunks = 0;
    long at = FULL_N1;
    for (; at < total && st < 0; at += FULL_CHUNK, chunks++) {
        base = at;
        CU_ASSERT_FATAL(it_produce(F.in, FULL_CHUNK, full_make, &base) == 0);
        t0 = it_now_ms();
        while ((st = it_engine_wait(pid, 200)) < 0 && full_inputs_done() < at + FULL_CHUNK &&
               it_now_ms() - t0 < 30000)
            ;
    }
    for (; at < total; at += FULL_CHUNK) { /* the rest, for the run that completes */
        base = at;
        CU_ASSERT_FATAL(it_produce(F.in, FULL_CHUNK, full_make, &base) == 0);
    }
    if (st < 0)
        st = it_engine_wait(pid, 90000);
    if (st < 0)
        it_engine_kill(pid);
    printf("  [%s] the engine stopped (status %d) during chunk %d of %d\n", F.what, st, chunks,
           FULL_N2 / FULL_CHUNK);
    return st;
}

static void full_cleanup(void)
{
    if (diffs == 0 && !getenv("KS_CRASH_KEEP")) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", F.dir);
        if (system(cmd) != 0)
            printf("  cannot remove %s\n", F.dir);
    } else
        printf("  [%s] logs and state kept in %s\n", F.what, F.dir);
}

/* Restart (after more room), wait for every output, stop: everything must
 * equal the reference of the whole input, and `bad` is not logged again. */
static void full_complete(const char *when, const char *bad)
{
    const long total = FULL_N1 + FULL_N2;
    long from = file_size(F.log);
    pid_t pid = engine_start(F.yaml, "full", F.log);
    int64_t t0 = it_now_ms();
    while ((full_inputs_done() < total || !full_outputs_at(total)) &&
           it_now_ms() - t0 < 90000)
        it_sleep_ms(500);
    CU_ASSERT_EQUAL(it_engine_stop(pid, 30000), 0);
    CU_ASSERT_EQUAL(log_count_from(F.log, from, bad), 0);
    CU_ASSERT_EQUAL(full_check(when, total, 0), total);
}

static void test_map_full(void)
{
    printf("\n");
    full_setup("map full");
    CU_ASSERT_FATAL(it_create_topic(F.in, FULL_PARTS) == 0);
    const long total = FULL_N1 + FULL_N2;
    full_yaml(FULL_SMALL); /* phase 1 fits, phase 2 does not */
    int st = full_run_until_stop();
    CU_ASSERT_EQUAL(st, 1);
    char needle[800];
    snprintf(needle, sizeof needle, "store 'counts' in %s/%s/task-", F.state, F.app);
    full_show("stopped after a failure");
    CU_ASSERT_EQUAL(it_log_count(F.log, "stopped after a failure"), 1);
    CU_ASSERT(it_log_count(F.log, needle) > 0);
    CU_ASSERT(it_log_count(F.log, "LMDB map full (map_size 131072 bytes") > 0);
    CU_ASSERT(it_log_count(F.log, "raise `map_size` of the store in the pipeline YAML") > 0);
    /* the map filled in the batch, not inside LMDB's commit */
    CU_ASSERT_EQUAL(it_log_count(F.log, "the Kafka transaction committed"), 0);
    long done1 = full_check("after the failure", total, 0);
    CU_ASSERT(done1 > FULL_N1 && done1 < total); /* some new keys fitted */

    /* the same map again: the same clean stop, still nothing half */
    long from = file_size(F.log);
    pid_t pid = engine_start(F.yaml, "full", F.log);
    st = it_engine_wait(pid, 90000);
    if (st < 0)
        it_engine_kill(pid);
    CU_ASSERT_EQUAL(st, 1);
    CU_ASSERT(log_count_from(F.log, from, needle) > 0);
    long done2 = full_check("after a restart with the same map_size", total, 0);
    CU_ASSERT(done2 >= done1 && done2 < total);

    /* a bigger map: the run completes, exactly */
    full_yaml(FULL_BIG);
    full_complete("after a restart with map_size " FULL_BIG, "LMDB map full");
    full_cleanup();
}

#ifdef __linux__
/* The disk fills up instead (state_dir on a 256 KiB tmpfs, map_size
 * 64 MiB): LMDB writes its pages in the commit, after the Kafka commit,
 * so the stop is the one of a crash between the two commits. The engine
 * stops with an error naming the directory; the Kafka side is exact at
 * the committed offsets and each store holds what its changelog says
 * below its checkpoint; after more room, the restart replays the rest and
 * everything equals the reference. Needs root (mount); skipped otherwise. */
static void test_disk_full(void)
{
    printf("\n");
    full_setup("disk full");
    if (geteuid() != 0) {
        printf("  [disk full] skipped: mounting a small tmpfs needs root (uid %d)\n",
               (int)geteuid());
        full_cleanup();
        return;
    }
    mkdir(F.state, 0755);
    if (mount("kstreams-test", F.state, "tmpfs", 0, "size=256k") != 0) {
        printf("  [disk full] skipped: cannot mount a tmpfs on %s: %s\n", F.state,
               strerror(errno));
        full_cleanup();
        return;
    }
    CU_ASSERT_FATAL(it_create_topic(F.in, FULL_PARTS) == 0);
    const long total = FULL_N1 + FULL_N2;
    full_yaml(FULL_BIG); /* the map is not the limit: the disk is */
    int st = full_run_until_stop();
    CU_ASSERT_EQUAL(st, 1);
    full_show("stopped after a failure");
    char needle[800];
    snprintf(needle, sizeof needle, "%s/%s/task-", F.state, F.app);
    CU_ASSERT(log_count_from(F.log, 0, needle) > 0);
    CU_ASSERT(it_log_count(F.log, "is its file system full?") > 0);
    long done1 = full_check("after the disk filled up", total, 1);
    CU_ASSERT(done1 > FULL_N1 && done1 < total);
    /* more room (the data stays), then the run completes */
    CU_ASSERT_EQUAL(mount(NULL, F.state, NULL, MS_REMOUNT, "size=64m"), 0);
    full_complete("after a restart with a bigger file system", "file system full");
    if (umount2(F.state, MNT_DETACH) != 0)
        printf("  [disk full] cannot unmount %s: %s\n", F.state, strerror(errno));
    full_cleanup();
}
#endif

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    setenv("KS_LOG_LEVEL", "DEBUG", 1); /* commit lines: kills at commit time */
    seed0 = base_seed();
    printf("crash suite: seed %" PRIu64 " (KS_CRASH_SEED=%" PRIu64 " reproduces the plans), "
           "broker %s, Kafka %s\n",
           seed0, seed0, it_bootstrap(), getenv("KAFKA_VERSION") ? getenv("KAFKA_VERSION") : "?");
    int long_mode = getenv("KS_CRASH_ITERATIONS") || getenv("KS_CRASH_SECONDS");
    static const it_case short_cases[] = {
        {"crash: seeded kills + special fault (seed+0)", test_short_1},
        {"crash: seeded kills + special fault (seed+1)", test_short_2},
        {"crash: seeded kills + special fault (seed+2)", test_short_3},
        {"crash: re-key + count through a repartition topic, killed at each commit step "
         "(seed+3)",
         test_repartitioned},
        {"crash: a store map too small: clean stop, nothing half, then complete",
         test_map_full},
#ifdef __linux__
        {"crash: the state directory's file system full (root only)", test_disk_full},
#endif
        {NULL, NULL}};
    static const it_case long_cases[] = {{"crash: long run", test_long}, {NULL, NULL}};
    static const it_case rp_cases[] = {
        {"crash: re-key + count through a repartition topic, killed at each commit step",
         test_repartitioned},
        {NULL, NULL}};
    if (getenv("KS_CRASH_ONLY_MAP_FULL")) /* the map-full case alone */
        return it_main("crash", short_cases + 4);
    if (getenv("KS_CRASH_ONLY_REPART") && !long_mode) /* the repartitioned case alone */
        return it_main("crash", rp_cases);
    return it_main("crash", long_mode ? long_cases : short_cases);
}
