/*
 * measure.c - what bench/run.sh measures with, against a real broker.
 *
 *   measure create -b B TOPIC PARTITIONS
 *       create a topic (an existing one is fine)
 *   measure delete -b B TOPIC...
 *       delete topics (missing ones are fine)
 *   measure wait -b B -g GROUP -t TOPIC -p PID[,PID...] -0 START_NS [-T TIMEOUT_S]
 *       wait until GROUP's committed offsets on every partition of TOPIC
 *       reach the partition's end (consumer lag 0: under exactly-once the
 *       offsets commit in the same transaction as the outputs, so the
 *       outputs of every input record are committed then). START_NS is
 *       CLOCK_REALTIME in ns when PID was started (date +%s%N). Prints
 *         records=N wall_s=S first_s=F cpu_s=C rss_kb=R
 *       wall_s: start -> lag 0; first_s: start -> first committed offset;
 *       cpu_s: utime+stime of PID (all its threads) at lag 0, from
 *       /proc/PID/stat; rss_kb: VmHWM (peak RSS) of PID at lag 0. Several
 *       PIDs (the processes of one application): cpu_s and rss_kb are
 *       their sums. Exit 1 if a PID dies or the timeout passes first.
 *   measure latency -b B -t TOPIC[,TOPIC...] -r READY_FILE [-i IDLE_MS]
 *                   [-n EXPECT] [-w WARMUP_MS] [-T TIMEOUT_S]
 *       read the topics from their current end with read_committed; once
 *       positioned, create READY_FILE; then for every record: latency =
 *       arrival (wall clock) - record timestamp. Stops after EXPECT records,
 *       or IDLE_MS (3000) without a record once one arrived, or the timeout.
 *       When a record's key holds "L<digits>" (loadgen -L: the send time in
 *       us), latency = arrival - that time instead: windowed outputs carry
 *       their window's time, not their input's.
 *       Records sent less than WARMUP_MS (0) after READY_FILE was made
 *       are read but not counted (connections and fetch sessions warm up).
 *       Prints  latency n=N p50_ms=A p99_ms=B max_ms=C gap_ms=G
 *       gap_ms: the longest time between two arrivals once counting began
 *       (outputs arrive in bursts, one per commit: about the commit
 *       interval when all is well; a stall, such as a hot swap, shows here)
 *   measure until -b B -t TOPIC[,TOPIC...] -m count|records|table -x EXPECT -p PID
 *                 -0 START_NS [-n INPUT_RECORDS] [-i IDLE_MS] [-T TIMEOUT_S]
 *       the scenarios whose work crosses internal topics (a re-key, a
 *       join): the consumer group's lag on the input says nothing about
 *       the stages behind a repartition topic, so this waits for the
 *       outputs themselves. Reads the output topics from the beginning,
 *       read_committed, while PID runs, until
 *         -m count:   the sum over keys of each key's latest value (an
 *                     8-byte big-endian count, kstreams' int64 and Java's
 *                     LongSerializer) reaches EXPECT (every input counted);
 *         -m records: EXPECT records have arrived (every join result);
 *         -m table:   EXPECT keys have a value (not a tombstone) as their
 *                     latest record (a table-table join's result table:
 *                     every left key joined);
 *       then reads utime+stime and VmHWM of PID as `wait` does, and goes on
 *       reading until IDLE_MS (3000) pass without a record, to catch
 *       outputs beyond EXPECT (counted twice). Prints
 *         records=INPUT_RECORDS wall_s=S first_s=F cpu_s=C rss_kb=R
 *           out=M keys=K sum=X extra=E
 *       first_s: start -> first output; out: output records read; keys:
 *       distinct output keys; sum: the latest counts' sum (count mode),
 *       the keys with a value (table mode); extra: records (records mode),
 *       counts (count mode) or keys with a value (table mode) beyond
 *       EXPECT. Exit 1 if PID dies or the timeout passes before EXPECT,
 *       2 if there were extra ones.
 *   measure count -b B TOPIC
 *       the records of TOPIC a read_committed reader gets (transaction
 *       markers and aborted records not counted), from the beginning to the
 *       end of every partition. Prints  records=N
 */
#define _GNU_SOURCE
#include <librdkafka/rdkafka.h>

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *bootstrap;

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static rd_kafka_t *client(rd_kafka_type_t type, const char *const *props)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char err[512];
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, err, sizeof err);
    rd_kafka_conf_set(conf, "socket.nagle.disable", "true", err, sizeof err);
    for (size_t i = 0; props && props[i]; i += 2)
        if (rd_kafka_conf_set(conf, props[i], props[i + 1], err, sizeof err)) {
            fprintf(stderr, "measure: %s=%s: %s\n", props[i], props[i + 1], err);
            rd_kafka_conf_destroy(conf);
            return NULL;
        }
    rd_kafka_t *rk = rd_kafka_new(type, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "measure: %s\n", err);
        rd_kafka_conf_destroy(conf);
    }
    return rk;
}

static int partition_count(rd_kafka_t *rk, const char *topic)
{
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    int n = -1;
    if (rd_kafka_metadata(rk, 0, rkt, &md, 10000) == 0) {
        if (md->topic_cnt == 1 && !md->topics[0].err)
            n = md->topics[0].partition_cnt;
        rd_kafka_metadata_destroy(md);
    }
    rd_kafka_topic_destroy(rkt);
    return n;
}

/* ---- create / delete ------------------------------------------------------ */

static int admin_result(rd_kafka_queue_t *q, int create)
{
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    if (!ev) {
        fprintf(stderr, "measure: no answer from the broker in 30 s\n");
        return -1;
    }
    size_t n = 0;
    const rd_kafka_topic_result_t **tr =
        create ? rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n)
               : rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(ev), &n);
    int rc = rd_kafka_event_error(ev) ? -1 : 0;
    for (size_t i = 0; i < n; i++) {
        rd_kafka_resp_err_t e = rd_kafka_topic_result_error(tr[i]);
        if (e && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS &&
            e != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
            fprintf(stderr, "measure: %s: %s\n", rd_kafka_topic_result_name(tr[i]),
                    rd_kafka_err2str(e));
            rc = -1;
        }
    }
    rd_kafka_event_destroy(ev);
    return rc;
}

static int cmd_create(int argc, char **argv)
{
    if (argc != 2)
        return 64;
    rd_kafka_t *rk = client(RD_KAFKA_PRODUCER, NULL);
    if (!rk)
        return 2;
    char err[512];
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(argv[0], atoi(argv[1]), 1, err, sizeof err);
    if (!nt) {
        fprintf(stderr, "measure: %s\n", err);
        return 2;
    }
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
    int rc = admin_result(q, 1);
    rd_kafka_NewTopic_destroy(nt);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
    return rc ? 1 : 0;
}

static int cmd_delete(int argc, char **argv)
{
    if (argc < 1)
        return 64;
    rd_kafka_t *rk = client(RD_KAFKA_PRODUCER, NULL);
    if (!rk)
        return 2;
    rd_kafka_DeleteTopic_t **dt = calloc((size_t)argc, sizeof *dt);
    for (int i = 0; i < argc; i++)
        dt[i] = rd_kafka_DeleteTopic_new(argv[i]);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_DeleteTopics(rk, dt, (size_t)argc, NULL, q);
    int rc = admin_result(q, 0);
    rd_kafka_DeleteTopic_destroy_array(dt, (size_t)argc);
    free(dt);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
    return rc ? 1 : 0;
}

/* ---- wait ---------------------------------------------------------------- */

static int proc_cpu(pid_t pid, double *cpu)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    char *p = strrchr(buf, ')'); /* the command may hold spaces */
    if (!p)
        return -1;
    char state = 0;
    unsigned long long ut = 0, st = 0;
    /* after ')': state(3) ppid pgrp session tty tpgid flags minflt cminflt
     * majflt cmajflt utime(14) stime(15) */
    if (sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &state, &ut,
               &st) != 3)
        return -1;
    if (state == 'Z' || state == 'X')
        return -1;
    *cpu = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    return 0;
}

static long proc_hwm_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kb = atol(line + 6);
    fclose(f);
    return kb;
}

#define MAX_PIDS 16

/* the summed utime+stime of PIDS; -1 when one of them has ended */
static int procs_cpu(const pid_t *pids, int n, double *cpu)
{
    double sum = 0;
    for (int i = 0; i < n; i++) {
        double c;
        if (proc_cpu(pids[i], &c) != 0)
            return -1;
        sum += c;
    }
    *cpu = sum;
    return 0;
}

/* the summed peak RSS of PIDS (each process has its own peak) */
static long procs_hwm_kb(const pid_t *pids, int n)
{
    long sum = 0;
    for (int i = 0; i < n; i++) {
        long kb = proc_hwm_kb(pids[i]);
        if (kb < 0)
            return -1;
        sum += kb;
    }
    return sum;
}

/* "1,2,3" -> pids; the count, or -1 when malformed or too many */
static int parse_pids(const char *arg, pid_t *pids)
{
    int n = 0;
    for (const char *p = arg; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v <= 0 || n == MAX_PIDS || (*end && *end != ','))
            return -1;
        pids[n++] = (pid_t)v;
        p = *end ? end + 1 : end;
    }
    return n;
}

static int cmd_wait(int argc, char **argv)
{
    const char *group = NULL, *topic = NULL;
    pid_t pids[MAX_PIDS];
    int npids = 0;
    double start = 0, timeout = 600;
    int c;
    optind = 0;
    while ((c = getopt(argc, argv, "g:t:p:0:T:")) != -1) {
        switch (c) {
        case 'g': group = optarg; break;
        case 't': topic = optarg; break;
        case 'p': npids = parse_pids(optarg, pids); break;
        case '0': start = atof(optarg) / 1e9; break;
        case 'T': timeout = atof(optarg); break;
        default: return 64;
        }
    }
    if (!group || !topic || npids <= 0 || start <= 0)
        return 64;
    const char *props[] = {"group.id", group, "enable.auto.commit", "false",
                           "isolation.level", "read_committed", NULL};
    rd_kafka_t *rk = client(RD_KAFKA_CONSUMER, props);
    if (!rk)
        return 2;
    int parts = partition_count(rk, topic);
    if (parts <= 0) {
        fprintf(stderr, "measure: no partitions for %s\n", topic);
        return 1;
    }
    int64_t *end = calloc((size_t)parts, sizeof *end);
    int64_t total = 0;
    for (int p = 0; p < parts; p++) {
        int64_t lo;
        if (rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &end[p], 10000)) {
            fprintf(stderr, "measure: cannot read the end of %s [%d]\n", topic, p);
            return 1;
        }
        total += end[p];
    }
    double first = 0, cpu = 0;
    int rc = 1;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(parts);
    for (int p = 0; p < parts; p++)
        rd_kafka_topic_partition_list_add(l, topic, p);
    for (;;) {
        double cpu_now;
        if (procs_cpu(pids, npids, &cpu_now) != 0) {
            fprintf(stderr, "measure: a process ended before group %s caught up\n", group);
            break;
        }
        if (wall_s() - start > timeout) {
            fprintf(stderr, "measure: group %s not caught up after %.0f s\n", group, timeout);
            break;
        }
        for (int p = 0; p < parts; p++)
            l->elems[p].offset = RD_KAFKA_OFFSET_INVALID;
        if (rd_kafka_committed(rk, l, 5000) == 0) {
            int done = 1, any = 0;
            for (int p = 0; p < parts; p++) {
                if (l->elems[p].offset > 0)
                    any = 1;
                if (l->elems[p].offset < end[p])
                    done = 0;
            }
            if (any && first == 0)
                first = wall_s() - start;
            if (done) {
                double wall = wall_s() - start;
                if (procs_cpu(pids, npids, &cpu) != 0)
                    cpu = cpu_now;
                printf("records=%lld wall_s=%.3f first_s=%.3f cpu_s=%.2f rss_kb=%ld\n",
                       (long long)total, wall, first, cpu, procs_hwm_kb(pids, npids));
                rc = 0;
                break;
            }
        }
        sleep_ms(25);
    }
    rd_kafka_topic_partition_list_destroy(l);
    free(end);
    rd_kafka_destroy(rk);
    return rc;
}

/* ---- latency -------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmd_latency(int argc, char **argv)
{
    char *topics = NULL;
    const char *ready = NULL;
    int idle_ms = 3000, warmup_ms = 0;
    long expect = 0;
    double timeout = 120;
    int c;
    optind = 0;
    while ((c = getopt(argc, argv, "t:r:i:n:w:T:")) != -1) {
        switch (c) {
        case 't': topics = strdup(optarg); break;
        case 'r': ready = optarg; break;
        case 'i': idle_ms = atoi(optarg); break;
        case 'n': expect = atol(optarg); break;
        case 'w': warmup_ms = atoi(optarg); break;
        case 'T': timeout = atof(optarg); break;
        default: return 64;
        }
    }
    if (!topics || !ready)
        return 64;
    char group[128];
    snprintf(group, sizeof group, "bench-latency-%d", (int)getpid());
    const char *props[] = {"group.id", group, "enable.auto.commit", "false",
                           "isolation.level", "read_committed", "fetch.wait.max.ms", "10",
                           "enable.partition.eof", "false", NULL};
    rd_kafka_t *rk = client(RD_KAFKA_CONSUMER, props);
    if (!rk)
        return 2;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(8);
    for (char *save = NULL, *t = strtok_r(topics, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int parts = -1;
        for (int tries = 0; tries < 100 && parts <= 0; tries++) {
            parts = partition_count(rk, t);
            if (parts <= 0)
                sleep_ms(100);
        }
        if (parts <= 0) {
            fprintf(stderr, "measure: no partitions for %s\n", t);
            return 1;
        }
        /* start at the last stable offset: what is committed now is old */
        for (int p = 0; p < parts; p++) {
            int64_t lo, hi;
            if (rd_kafka_query_watermark_offsets(rk, t, p, &lo, &hi, 10000)) {
                fprintf(stderr, "measure: cannot read the end of %s [%d]\n", t, p);
                return 1;
            }
            rd_kafka_topic_partition_list_add(l, t, p)->offset = hi;
        }
    }
    rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    /* fetch sessions start on the first poll */
    rd_kafka_message_t *m0 = rd_kafka_consumer_poll(rk, 200);
    if (m0)
        rd_kafka_message_destroy(m0); /* nothing was produced yet: cannot be ours */
    FILE *f = fopen(ready, "w");
    if (f)
        fclose(f);
    size_t cap = 1 << 16, n = 0;
    double *lat = malloc(cap * sizeof *lat);
    double started = wall_s(), last = 0;
    double counted_from_ms = started * 1000.0 + warmup_ms;
    double prev_arrival = 0, gap = 0;
    long seen = 0;
    for (;;) {
        double now = wall_s();
        if (now - started > timeout || (expect > 0 && seen >= expect))
            break;
        if (seen > 0 && (now - last) * 1000 >= idle_ms)
            break;
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 50);
        if (!m)
            continue;
        if (!m->err) {
            double arrived = wall_s();
            double ts = (double)rd_kafka_message_timestamp(m, NULL);
            const char *k = m->key, *L = k ? memchr(k, 'L', m->key_len) : NULL;
            if (L && (size_t)(L - k) + 2 < m->key_len && L[1] >= '0' && L[1] <= '9') {
                char digits[24];
                size_t i = 0;
                for (L++; i < sizeof digits - 1 && L < k + m->key_len && *L >= '0' && *L <= '9';)
                    digits[i++] = *L++;
                digits[i] = '\0';
                ts = (double)atoll(digits) / 1000.0;
            }
            seen++;
            if (ts > 0 && ts >= counted_from_ms) {
                if (n == cap)
                    lat = realloc(lat, (cap *= 2) * sizeof *lat);
                lat[n++] = arrived * 1000.0 - ts;
                if (prev_arrival > 0 && (arrived - prev_arrival) * 1000.0 > gap)
                    gap = (arrived - prev_arrival) * 1000.0;
                prev_arrival = arrived;
            }
            last = arrived;
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_destroy(rk);
    if (n == 0) {
        printf("latency n=0 p50_ms=nan p99_ms=nan max_ms=nan gap_ms=nan\n");
        return 1;
    }
    qsort(lat, n, sizeof *lat, cmp_double);
    printf("latency n=%zu p50_ms=%.1f p99_ms=%.1f max_ms=%.1f gap_ms=%.1f\n", n,
           lat[(n - 1) / 2], lat[(size_t)((double)(n - 1) * 0.99)], lat[n - 1], gap);
    free(lat);
    free(topics);
    return 0;
}

/* ---- until ---------------------------------------------------------------- */

/* key -> latest count: open addressing, keys copied into one arena */
struct kv {
    uint64_t hash;
    char *key;
    size_t len;
    int64_t value;
};
static struct kv *tab;
static size_t tab_cap, tab_n;

static uint64_t fnv1a(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static struct kv *kv_slot(struct kv *t, size_t cap, uint64_t h, const void *key, size_t len)
{
    for (size_t i = h & (cap - 1);; i = (i + 1) & (cap - 1))
        if (!t[i].key || (t[i].hash == h && t[i].len == len && memcmp(t[i].key, key, len) == 0))
            return &t[i];
}

/* the latest value of KEY (set to VALUE), the previous one in *old */
static int kv_put(const void *key, size_t len, int64_t value, int64_t *old)
{
    if ((tab_n + 1) * 2 > tab_cap) {
        size_t ncap = tab_cap ? tab_cap * 2 : 1 << 16;
        struct kv *nt = calloc(ncap, sizeof *nt);
        if (!nt)
            return -1;
        for (size_t i = 0; i < tab_cap; i++)
            if (tab[i].key)
                *kv_slot(nt, ncap, tab[i].hash, tab[i].key, tab[i].len) = tab[i];
        free(tab);
        tab = nt;
        tab_cap = ncap;
    }
    uint64_t h = fnv1a(key, len);
    struct kv *e = kv_slot(tab, tab_cap, h, key, len);
    if (!e->key) {
        e->key = malloc(len ? len : 1);
        if (!e->key)
            return -1;
        memcpy(e->key, key, len);
        e->len = len;
        e->hash = h;
        e->value = 0;
        tab_n++;
    }
    *old = e->value;
    e->value = value;
    return 0;
}

static int cmd_until(int argc, char **argv)
{
    char *topics = NULL;
    const char *mode = NULL;
    long long expect = -1, input = -1;
    pid_t pid = 0;
    double start = 0, timeout = 600;
    int idle_ms = 3000, c;
    optind = 0;
    while ((c = getopt(argc, argv, "t:m:x:p:0:n:i:T:")) != -1) {
        switch (c) {
        case 't': topics = strdup(optarg); break;
        case 'm': mode = optarg; break;
        case 'x': expect = atoll(optarg); break;
        case 'p': pid = (pid_t)atoi(optarg); break;
        case '0': start = atof(optarg) / 1e9; break;
        case 'n': input = atoll(optarg); break;
        case 'i': idle_ms = atoi(optarg); break;
        case 'T': timeout = atof(optarg); break;
        default: return 64;
        }
    }
    int counts = mode && strcmp(mode, "count") == 0;
    int table = mode && strcmp(mode, "table") == 0;
    if (!topics || !mode || (!counts && !table && strcmp(mode, "records") != 0) || expect < 0 ||
        pid <= 0 || start <= 0)
        return 64;
    if (input < 0)
        input = expect;
    char group[128];
    snprintf(group, sizeof group, "bench-until-%d", (int)getpid());
    const char *props[] = {"group.id", group, "enable.auto.commit", "false",
                           "isolation.level", "read_committed", "fetch.wait.max.ms", "10",
                           "enable.partition.eof", "false", NULL};
    rd_kafka_t *rk = client(RD_KAFKA_CONSUMER, props);
    if (!rk)
        return 2;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(8);
    for (char *save = NULL, *t = strtok_r(topics, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int parts = partition_count(rk, t);
        if (parts <= 0) {
            fprintf(stderr, "measure: no partitions for %s\n", t);
            return 1;
        }
        for (int p = 0; p < parts; p++)
            rd_kafka_topic_partition_list_add(l, t, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    }
    rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    long long out = 0, sum = 0;
    double first = 0, done_at = 0, cpu = 0, last = 0;
    long rss = -1;
    int rc = 1;
    for (;;) {
        double now = wall_s();
        if (done_at > 0) {
            if ((now - last) * 1000 >= idle_ms)
                break;
        } else {
            double cpu_now;
            if (proc_cpu(pid, &cpu_now) != 0) {
                fprintf(stderr, "measure: process %d ended before its outputs were complete "
                                "(%lld records, sum %lld of %lld)\n",
                        (int)pid, out, sum, expect);
                break;
            }
            if (now - start > timeout) {
                fprintf(stderr, "measure: outputs not complete after %.0f s (%lld records, sum "
                                "%lld, expected %lld)\n",
                        timeout, out, sum, expect);
                break;
            }
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 20);
        if (!m)
            continue;
        if (!m->err) {
            last = wall_s();
            if (first == 0)
                first = last - start;
            out++;
            if (counts || table) {
                int64_t v = 0, old = 0;
                const unsigned char *b = m->payload;
                if (table)
                    v = b != NULL; /* 1: the key has a value, 0: a tombstone */
                else if (b && m->len == 8)
                    for (int i = 0; i < 8; i++)
                        v = (int64_t)((uint64_t)v << 8 | b[i]);
                if (kv_put(m->key ? m->key : "", m->key_len, v, &old) != 0) {
                    fprintf(stderr, "measure: out of memory\n");
                    break;
                }
                sum += v - old;
            } else {
                int64_t old;
                if (kv_put(m->key ? m->key : "", m->key_len, 0, &old) != 0) {
                    fprintf(stderr, "measure: out of memory\n");
                    break;
                }
            }
            if (done_at == 0 && (counts || table ? sum : out) >= expect) {
                done_at = last;
                double cpu_now = 0;
                if (proc_cpu(pid, &cpu_now) == 0)
                    cpu = cpu_now;
                rss = proc_hwm_kb(pid);
                rc = 0;
            }
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_destroy(rk);
    if (rc == 0) {
        long long extra = (counts || table ? sum : out) - expect;
        printf("records=%lld wall_s=%.3f first_s=%.3f cpu_s=%.2f rss_kb=%ld out=%lld keys=%zu "
               "sum=%lld extra=%lld\n",
               input, done_at - start, first, cpu, rss, out, tab_n, counts || table ? sum : 0, extra);
        if (extra != 0)
            rc = 2;
    }
    for (size_t i = 0; i < tab_cap; i++)
        free(tab[i].key);
    free(tab);
    free(topics);
    return rc;
}

/* ---- count ---------------------------------------------------------------- */

static int cmd_count(int argc, char **argv)
{
    if (argc != 1)
        return 64;
    const char *props[] = {"group.id", "bench-measure-count", "isolation.level",
                           "read_committed", "enable.partition.eof", "true",
                           "enable.auto.commit", "false", NULL};
    rd_kafka_t *rk = client(RD_KAFKA_CONSUMER, props);
    if (!rk)
        return 2;
    int parts = partition_count(rk, argv[0]);
    if (parts <= 0) {
        fprintf(stderr, "measure: no topic %s\n", argv[0]);
        rd_kafka_destroy(rk);
        return 1;
    }
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(parts);
    for (int p = 0; p < parts; p++)
        rd_kafka_topic_partition_list_add(l, argv[0], p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    long n = 0;
    int at_end = 0, idle = 0;
    char *done = calloc((size_t)parts, 1);
    while (at_end < parts && idle < 300) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m) {
            idle++;
            continue;
        }
        idle = 0;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            if (m->partition >= 0 && m->partition < parts && !done[m->partition]) {
                done[m->partition] = 1;
                at_end++;
            }
        } else if (!m->err) {
            n++;
        }
        rd_kafka_message_destroy(m);
    }
    free(done);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    printf("records=%ld\n", n);
    return at_end == parts ? 0 : 1;
}
int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : "";
    argc -= 1;
    argv += 1;
    /* -b B right after the command */
    if (argc >= 3 && strcmp(argv[1], "-b") == 0) {
        bootstrap = argv[2];
        argv[2] = argv[0];
        argc -= 2;
        argv += 2;
    }
    int rc = 64;
    if (!bootstrap)
        rc = 64;
    else if (strcmp(cmd, "create") == 0)
        rc = cmd_create(argc - 1, argv + 1);
    else if (strcmp(cmd, "delete") == 0)
        rc = cmd_delete(argc - 1, argv + 1);
    else if (strcmp(cmd, "wait") == 0)
        rc = cmd_wait(argc, argv);
    else if (strcmp(cmd, "latency") == 0)
        rc = cmd_latency(argc, argv);
    else if (strcmp(cmd, "until") == 0)
        rc = cmd_until(argc, argv);
    else if (strcmp(cmd, "count") == 0)
        rc = cmd_count(argc - 1, argv + 1);
    if (rc == 64)
        fprintf(stderr, "usage: measure create|delete|wait|latency|until|count -b HOST:PORT ... "
                        "(see the top of bench/measure.c)\n");
    return rc;
}
