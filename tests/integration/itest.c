/*
 * itest.c - see itest.h. Everything talks to a real broker on loopback.
 */
#include "itest.h"

#include <CUnit/Basic.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kstreams/kstreams.h"

#ifndef KS_TEST_BUILDDIR
#define KS_TEST_BUILDDIR "."
#endif

const char *it_bootstrap(void)
{
    const char *b = getenv("KS_BOOTSTRAP");
    return b && *b ? b : "127.0.0.1:9092";
}

int it_broker_ctl(const char *command)
{
    const char *colon = strrchr(it_bootstrap(), ':');
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "KAFKA_PORT=%d '%s/../scripts/kafka.sh' %s >/dev/null 2>&1",
             colon ? atoi(colon + 1) : 9092, KS_TEST_SRCDIR, command);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void it_unique(char *buf, size_t len, const char *base)
{
    static int n;
    snprintf(buf, len, "%s-%d-%ld-%d", base, (int)getpid(), (long)time(NULL) % 100000, ++n);
}

void it_tempdir(char *buf, size_t len)
{
    snprintf(buf, len, "/tmp/ks-itest-XXXXXX");
    if (!mkdtemp(buf))
        buf[0] = '\0';
}

void it_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int64_t it_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static rd_kafka_t *client(rd_kafka_type_t type, const char *const *props)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char err[512];
    rd_kafka_conf_set(conf, "bootstrap.servers", it_bootstrap(), err, sizeof err);
    rd_kafka_conf_set(conf, "socket.nagle.disable", "true", err, sizeof err);
    for (size_t i = 0; props && props[i]; i += 2)
        if (rd_kafka_conf_set(conf, props[i], props[i + 1], err, sizeof err)) {
            fprintf(stderr, "itest: %s=%s: %s\n", props[i], props[i + 1], err);
            rd_kafka_conf_destroy(conf);
            return NULL;
        }
    rd_kafka_t *rk = rd_kafka_new(type, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "itest: %s\n", err);
        rd_kafka_conf_destroy(conf);
    }
    return rk;
}

rd_kafka_t *it_admin_client(void)
{
    static const char *const props[] = {"allow.auto.create.topics", "false", NULL};
    return client(RD_KAFKA_PRODUCER, props);
}

/* One CreateTopics request: 0, else the error code (-1 when there was no
 * answer or the request could not be made); *msg says why. */
static int create_topic_once(const char *topic, int partitions, int replication,
                             const char *const *configs, char *msg, size_t msglen)
{
    rd_kafka_t *rk = it_admin_client();
    if (!rk) {
        snprintf(msg, msglen, "no admin client");
        return -1;
    }
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, partitions, replication, msg, msglen);
    for (size_t i = 0; nt && configs && configs[i]; i += 2)
        rd_kafka_NewTopic_set_config(nt, configs[i], configs[i + 1]);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    if (nt)
        rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
    rd_kafka_event_t *ev = nt ? rd_kafka_queue_poll(q, 30000) : NULL;
    int rc = -1;
    if (nt && !ev)
        snprintf(msg, msglen, "no answer in 30 s");
    if (ev) {
        size_t n;
        const rd_kafka_topic_result_t **tr =
            rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
        rc = n == 1 ? (int)rd_kafka_topic_result_error(tr[0]) : -1;
        snprintf(msg, msglen, "%s", n ? rd_kafka_topic_result_error_string(tr[0]) : "?");
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_queue_destroy(q);
    if (nt)
        rd_kafka_NewTopic_destroy(nt);
    rd_kafka_destroy(rk);
    return rc;
}

/* Errors of a broker that another suite is restarting (the test command
 * runs two suites at a time): a stopping KRaft broker is fenced ("All
 * brokers are currently fenced", INVALID_REPLICATION_FACTOR), a stopped
 * one does not answer. */
static int transient(int rc)
{
    return rc == -1 || rc == RD_KAFKA_RESP_ERR_INVALID_REPLICATION_FACTOR ||
           rc == RD_KAFKA_RESP_ERR_BROKER_NOT_AVAILABLE || rc == RD_KAFKA_RESP_ERR_NOT_CONTROLLER ||
           rc == RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT || rc == RD_KAFKA_RESP_ERR__TIMED_OUT ||
           rc == RD_KAFKA_RESP_ERR__TRANSPORT;
}

int it_create_topic_with(const char *topic, int partitions, int replication,
                         const char *const *configs)
{
    char msg[512] = "";
    int64_t until = it_now_ms() + 90000;
    for (int attempt = 0;; attempt++) {
        int rc = create_topic_once(topic, partitions, replication, configs, msg, sizeof msg);
        if (rc == 0 || (attempt > 0 && rc == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS))
            return 0; /* (an earlier attempt created it without answering) */
        if (!transient(rc) || it_now_ms() > until) {
            fprintf(stderr, "itest: create %s: %s\n", topic, msg);
            return -1;
        }
        fprintf(stderr, "itest: create %s: %s (the broker restarting? trying again)\n", topic, msg);
        it_sleep_ms(1000);
    }
}

/* One ListOffsets round for every partition of `topic`: 0, else the first
 * error code. */
static int watermarks_once(const char *topic, int n, int64_t *lo, int64_t *hi)
{
    rd_kafka_t *rk = it_admin_client();
    if (!rk)
        return -1;
    int rc = 0;
    for (int p = 0; rc == 0 && p < n; p++) {
        int64_t l = -1, h = -1;
        rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(rk, topic, p, &l, &h, 10000);
        if (err) {
            fprintf(stderr, "itest: watermarks of %s [%d]: %s\n", topic, p, rd_kafka_err2str(err));
            rc = (int)err;
        }
        if (lo)
            lo[p] = l;
        if (hi)
            hi[p] = h;
    }
    rd_kafka_destroy(rk);
    return rc;
}

int it_watermarks(const char *topic, int n, int64_t *lo, int64_t *hi)
{
    /* the other lane's suite may have the broker down (test_faults: 12 s) */
    int64_t until = it_now_ms() + 90000;
    for (;;) {
        int rc = watermarks_once(topic, n, lo, hi);
        if (rc == 0)
            return 0;
        int restarting = transient(rc) || rc == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN ||
                         rc == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE ||
                         rc == RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION;
        if (!restarting || it_now_ms() > until)
            return -1;
        fprintf(stderr, "itest: (the broker restarting? trying again)\n");
        it_sleep_ms(1000);
    }
}

int it_delete_records(const char *topic, int n, const int64_t *before)
{
    rd_kafka_t *rk = it_admin_client();
    if (!rk)
        return -1;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n);
    for (int p = 0; p < n; p++)
        if (before[p] >= 0)
            rd_kafka_topic_partition_list_add(l, topic, p)->offset = before[p];
    rd_kafka_DeleteRecords_t *del = rd_kafka_DeleteRecords_new(l);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_DeleteRecords(rk, &del, 1, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    int rc = -1;
    const rd_kafka_DeleteRecords_result_t *res = ev ? rd_kafka_event_DeleteRecords_result(ev) : NULL;
    const rd_kafka_topic_partition_list_t *done =
        res ? rd_kafka_DeleteRecords_result_offsets(res) : NULL;
    if (!ev)
        fprintf(stderr, "DeleteRecords on %s: no answer in 30 s\n", topic);
    else if (rd_kafka_event_error(ev))
        fprintf(stderr, "DeleteRecords on %s: %s\n", topic, rd_kafka_event_error_string(ev));
    else if (done) {
        rc = 0;
        for (int i = 0; i < done->cnt; i++)
            if (done->elems[i].err) {
                fprintf(stderr, "DeleteRecords on %s [%d]: %s\n", topic,
                        (int)done->elems[i].partition, rd_kafka_err2str(done->elems[i].err));
                rc = -1;
            }
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_DeleteRecords_destroy(del);
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_destroy(rk);
    return rc;
}

int it_alter_topic(const char *topic, const char *const *configs)
{
    rd_kafka_t *rk = it_admin_client();
    if (!rk)
        return -1;
    rd_kafka_ConfigResource_t *res = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
    for (size_t i = 0; configs[i]; i += 2)
        rd_kafka_ConfigResource_set_config(res, configs[i], configs[i + 1]);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AlterConfigs(rk, &res, 1, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    int rc = -1;
    if (!ev) {
        fprintf(stderr, "AlterConfigs on %s: no answer in 30 s\n", topic);
    } else if (rd_kafka_event_error(ev)) {
        fprintf(stderr, "AlterConfigs on %s: %s\n", topic, rd_kafka_event_error_string(ev));
    } else {
        size_t n = 0;
        const rd_kafka_ConfigResource_t **r =
            rd_kafka_AlterConfigs_result_resources(rd_kafka_event_AlterConfigs_result(ev), &n);
        rc = n == 1 && !rd_kafka_ConfigResource_error(r[0]) ? 0 : -1;
        if (rc)
            fprintf(stderr, "AlterConfigs on %s: %s\n", topic,
                    n ? rd_kafka_ConfigResource_error_string(r[0]) : "no result");
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_ConfigResource_destroy(res);
    rd_kafka_destroy(rk);
    return rc;
}

int it_empty_changelog(const char *topic, int n, int64_t *hi)
{
    static const char *const both[] = {"cleanup.policy", "compact,delete", NULL};
    int64_t lo[64];
    if (n > 64 || it_alter_topic(topic, both) != 0 || it_watermarks(topic, n, NULL, hi) != 0 ||
        it_delete_records(topic, n, hi) != 0 || it_watermarks(topic, n, lo, NULL) != 0)
        return -1;
    for (int p = 0; p < n; p++)
        if (lo[p] != hi[p]) {
            fprintf(stderr, "itest: %s [%d] starts at %lld after DeleteRecords to %lld\n", topic,
                    p, (long long)lo[p], (long long)hi[p]);
            return -1;
        }
    return 0;
}

/* Whether the broker still lists `topic` (1), not (0), or cannot say (-1). */
static int topic_listed(rd_kafka_t *rk, const char *topic)
{
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    int listed = -1;
    if (rkt && rd_kafka_metadata(rk, 0, rkt, &md, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        listed = md->topic_cnt == 1 &&
                 md->topics[0].err != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
        rd_kafka_metadata_destroy(md);
    }
    if (rkt)
        rd_kafka_topic_destroy(rkt);
    return listed;
}

int it_delete_topic(const char *topic)
{
    rd_kafka_t *rk = it_admin_client();
    if (!rk)
        return -1;
    rd_kafka_DeleteTopic_t *dt = rd_kafka_DeleteTopic_new(topic);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_DeleteTopics(rk, &dt, 1, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    int rc = -1;
    if (!ev) {
        fprintf(stderr, "itest: delete %s: no answer in 30 s\n", topic);
    } else {
        size_t n = 0;
        const rd_kafka_topic_result_t **tr =
            rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(ev), &n);
        rc = n == 1 && !rd_kafka_topic_result_error(tr[0]) ? 0 : -1;
        if (rc)
            fprintf(stderr, "itest: delete %s: %s\n", topic,
                    n ? rd_kafka_topic_result_error_string(tr[0]) : "no result");
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_queue_destroy(q);
    rd_kafka_DeleteTopic_destroy(dt);
    /* the answer comes before every broker forgot it */
    for (int64_t end = it_now_ms() + 30000; rc == 0 && topic_listed(rk, topic) != 0;) {
        if (it_now_ms() > end) {
            fprintf(stderr, "itest: %s still listed 30 s after its deletion\n", topic);
            rc = -1;
        }
        it_sleep_ms(200);
    }
    rd_kafka_destroy(rk);
    return rc;
}

int it_create_topic(const char *topic, int partitions)
{
    return it_create_topic_with(topic, partitions, 1, NULL);
}

static void count_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    (void)opaque;
    if (m->err)
        fprintf(stderr, "itest: delivery failed: %s\n", rd_kafka_err2str(m->err));
}

int it_produce(const char *topic, int n, it_make_fn make, void *arg)
{
    const char *props[] = {"linger.ms", "5", "enable.idempotence", "true",
                           "partitioner", "murmur2_random", NULL};
    rd_kafka_conf_t *unused = NULL;
    (void)unused;
    rd_kafka_t *rk = client(RD_KAFKA_PRODUCER, props);
    if (!rk)
        return -1;
    char key[512], value[4096];
    for (int i = 0; i < n; i++) {
        int32_t part = RD_KAFKA_PARTITION_UA;
        key[0] = value[0] = '\0';
        make(i, key, sizeof key, value, sizeof value, &part, arg);
        for (;;) {
            rd_kafka_resp_err_t e = rd_kafka_producev(
                rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(part),
                RD_KAFKA_V_KEY(key, strlen(key)), RD_KAFKA_V_VALUE(value, strlen(value)),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
            if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                rd_kafka_poll(rk, 10);
                continue;
            }
            if (e) {
                fprintf(stderr, "itest: produce: %s\n", rd_kafka_err2str(e));
                rd_kafka_destroy(rk);
                return -1;
            }
            break;
        }
        rd_kafka_poll(rk, 0);
    }
    rd_kafka_resp_err_t e = rd_kafka_flush(rk, 60000);
    rd_kafka_destroy(rk);
    (void)count_dr;
    return e ? -1 : 0;
}

static char *dup_bytes(const void *p, size_t n)
{
    if (!p)
        return NULL;
    char *c = malloc(n + 1);
    memcpy(c, p, n);
    c[n] = '\0';
    return c;
}

/* Read `topic` until done(out, arg) and nothing more came for idle_ms, or
 * max_ms passed. */
static int consume_until(const char *topic, int (*done)(const it_msgs *, void *), void *arg,
                         int idle_ms, int max_ms, it_msgs *out)
{
    char group[256];
    it_unique(group, sizeof group, "itest-reader");
    const char *props[] = {"group.id", group, "isolation.level", "read_committed",
                           "enable.auto.commit", "false", "enable.partition.eof", "false",
                           NULL};
    rd_kafka_t *rk = client(RD_KAFKA_CONSUMER, props);
    if (!rk)
        return -1;
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    int64_t wait_from = it_now_ms();
    /* the topic may not exist yet: the engine creates its sinks */
    for (;;) {
        if (!rd_kafka_metadata(rk, 0, rkt, &md, 10000)) {
            if (md->topic_cnt == 1 && !md->topics[0].err && md->topics[0].partition_cnt > 0)
                break;
            rd_kafka_metadata_destroy(md);
        }
        md = NULL;
        if (it_now_ms() - wait_from > max_ms)
            break;
        it_sleep_ms(200);
    }
    if (!md) {
        fprintf(stderr, "itest: no metadata for %s\n", topic);
        rd_kafka_topic_destroy(rkt);
        rd_kafka_destroy(rk);
        return -1;
    }
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(8);
    for (int p = 0; p < md->topics[0].partition_cnt; p++)
        rd_kafka_topic_partition_list_add(l, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    int64_t start = it_now_ms(), last = start;
    while (it_now_ms() - start < max_ms) {
        if (done(out, arg) && it_now_ms() - last >= idle_ms)
            break;
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m)
            continue;
        if (!m->err) {
            if (out->count == out->cap) {
                out->cap = out->cap ? out->cap * 2 : 1024;
                out->items = realloc(out->items, out->cap * sizeof *out->items);
            }
            it_msg *x = &out->items[out->count++];
            x->key = dup_bytes(m->key, m->key_len);
            x->key_len = m->key_len;
            x->value = dup_bytes(m->payload, m->len);
            x->value_len = m->len;
            x->partition = m->partition;
            x->offset = m->offset;
            x->timestamp = rd_kafka_message_timestamp(m, NULL);
            x->headers = NULL;
            rd_kafka_headers_t *hdrs;
            if (rd_kafka_message_headers(m, &hdrs) == 0) {
                char buf[2048] = "";
                const char *name;
                const void *val;
                size_t vlen, at = 0;
                for (size_t h = 0; rd_kafka_header_get_all(hdrs, h, &name, &val, &vlen) == 0;
                     h++)
                    at += (size_t)snprintf(buf + at, at < sizeof buf ? sizeof buf - at : 0,
                                           "%s=%.*s\n", name, (int)vlen,
                                           val ? (const char *)val : "");
                x->headers = strdup(buf);
            }
            last = it_now_ms();
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return 0;
}

static int count_reached(const it_msgs *out, void *arg)
{
    return out->count >= *(const size_t *)arg;
}

int it_consume(const char *topic, size_t expect, int idle_ms, int max_ms, it_msgs *out)
{
    return consume_until(topic, count_reached, &expect, idle_ms, max_ms, out);
}

typedef struct counts_goal {
    const long *want;
    int keys;
    const char *key_fmt;
    long *last; /* per key, the last value read */
    size_t seen; /* outputs looked at so far */
    int reached; /* keys whose last value is want[k] */
} counts_goal;

static int counts_reached(const it_msgs *out, void *arg)
{
    counts_goal *g = arg;
    for (; g->seen < out->count; g->seen++) {
        const it_msg *m = &out->items[g->seen];
        int k = -1;
        if (!m->key || sscanf(m->key, g->key_fmt, &k) != 1 || k < 0 || k >= g->keys ||
            m->value_len != 8)
            continue;
        long c = (long)ks_int64_decode(m->value);
        g->reached += (c == g->want[k]) - (g->last[k] == g->want[k]);
        g->last[k] = c;
    }
    int goal = 0;
    for (int k = 0; k < g->keys; k++)
        goal += g->want[k] > 0;
    return g->reached >= goal;
}

int it_consume_counts(const char *topic, const long *want, int keys, const char *key_fmt,
                      int idle_ms, int max_ms, it_msgs *out)
{
    counts_goal g = {want, keys, key_fmt, calloc((size_t)keys, sizeof(long)), 0, 0};
    if (!g.last)
        return -1;
    int rc = consume_until(topic, counts_reached, &g, idle_ms, max_ms, out);
    free(g.last);
    return rc;
}

void it_check_count_folded(const it_msgs *out, const long *want, int keys,
                           const char *key_fmt, long *folded, long *repeats, long *foreign,
                           int *wrong_keys)
{
    long *last = calloc((size_t)keys, sizeof *last);
    if (!last) {
        fprintf(stderr, "it_check_count_folded: out of memory\n");
        abort();
    }
    *folded = *repeats = *foreign = 0;
    for (size_t i = 0; i < out->count; i++) {
        const it_msg *m = &out->items[i];
        int k = -1;
        if (!m->key || sscanf(m->key, key_fmt, &k) != 1)
            k = -1;
        if (k < 0 || k >= keys || m->value_len != 8) {
            (*foreign)++;
            continue;
        }
        long c = (long)ks_int64_decode(m->value);
        if (c <= last[k] || c > want[k])
            (*repeats)++;
        else
            *folded += c - last[k] - 1;
        if (c > last[k])
            last[k] = c;
    }
    *wrong_keys = 0;
    for (int k = 0; k < keys; k++)
        *wrong_keys += last[k] != want[k];
    free(last);
}

void it_msgs_free(it_msgs *m)
{
    for (size_t i = 0; i < m->count; i++) {
        free(m->items[i].key);
        free(m->items[i].value);
        free(m->items[i].headers);
    }
    free(m->items);
    memset(m, 0, sizeof *m);
}

void it_check_count_sequences(const it_msgs *out, const long *want, int keys,
                              const char *key_fmt, long *gaps, long *repeats,
                              long *foreign, int *wrong_keys)
{
    long *last = calloc((size_t)keys, sizeof *last); /* last value in sequence */
    if (!last) {
        fprintf(stderr, "it_check_count_sequences: out of memory\n");
        abort();
    }
    *gaps = *repeats = *foreign = 0;
    for (size_t i = 0; i < out->count; i++) {
        const it_msg *m = &out->items[i];
        int k = -1;
        if (!m->key || sscanf(m->key, key_fmt, &k) != 1)
            k = -1;
        if (k < 0 || k >= keys || m->value_len != 8) {
            (*foreign)++;
            continue;
        }
        long c = (long)ks_int64_decode(m->value);
        if (c == last[k] + 1)
            last[k] = c;
        else if (c <= last[k])
            (*repeats)++;
        else {
            (*gaps)++;
            last[k] = c;
        }
    }
    *wrong_keys = 0;
    for (int k = 0; k < keys; k++)
        *wrong_keys += last[k] != want[k];
    free(last);
}

int it_write_file(const char *path, const char *fmt, ...)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    return fclose(f) == 0 ? 0 : -1;
}

const char *it_kstreams(void)
{
    const char *b = getenv("KSTREAMS_BIN");
    return b && *b ? b : KS_TEST_BUILDDIR "/engine/kstreams";
}

int it_kstreams_run(const char *args, char *out, size_t outlen, const char *errpath)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s 2>%s", it_kstreams(), args, errpath);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, outlen - 1, p);
    out[n] = '\0';
    char sink[4096];
    while (fread(sink, 1, sizeof sink, p) > 0)
        ;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Sanitizer reports of spawned engines. A UBSan report of a build with
 * both ASan and UBSan (GCC) goes to stderr whatever UBSAN_OPTIONS's
 * log_path says, so into the engine's log: every log an engine wrote to
 * is scanned, from where that engine started writing, when the engine is
 * reaped and again at the end of the suite; each report is a failure of
 * the suite (it_main). */
enum { MAX_ENGINE_LOGS = 512 };
static struct engine_log {
    pid_t pid;
    char path[512];
    long from; /* the log's size when the engine started */
    int scanned_reaped; /* scanned after the engine ended */
} engine_logs[MAX_ENGINE_LOGS];
static int n_engine_logs, sanitizer_reports;

static int is_sanitizer_line(const char *line)
{
    return strstr(line, "ERROR: AddressSanitizer") || strstr(line, "ERROR: LeakSanitizer") ||
           strstr(line, ": runtime error: ");
}

/* Count the reports in one log from its offset; 0 once it is unreadable. */
static int scan_engine_log(struct engine_log *e)
{
    FILE *f = fopen(e->path, "r");
    if (!f)
        return 0;
    fseek(f, 0, SEEK_END);
    if (ftell(f) < e->from) /* the test truncated it: all of it is new */
        e->from = 0;
    fseek(f, e->from, SEEK_SET);
    char line[8192];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (is_sanitizer_line(line)) {
            fprintf(stderr, "\n  sanitizer report in %s (engine %d): %s", e->path, (int)e->pid,
                    line);
            n++;
        }
    e->from = ftell(f); /* the same report is not counted twice */
    fclose(f);
    return n;
}

static void engine_reaped(pid_t pid)
{
    for (int i = 0; i < n_engine_logs; i++)
        if (engine_logs[i].pid == pid && !engine_logs[i].scanned_reaped) {
            engine_logs[i].scanned_reaped = 1;
            sanitizer_reports += scan_engine_log(&engine_logs[i]);
        }
}

pid_t it_engine_start(const char *yaml, const char *instance, const char *log)
{
    return it_engine_start_env(yaml, instance, log, NULL);
}

pid_t it_engine_start_env(const char *yaml, const char *instance, const char *log,
                          const char *env)
{
    struct stat st;
    long from = stat(log, &st) == 0 ? (long)st.st_size : 0;
    pid_t pid = fork();
    if (pid > 0 && n_engine_logs < MAX_ENGINE_LOGS) {
        struct engine_log *e = &engine_logs[n_engine_logs++];
        e->pid = pid;
        snprintf(e->path, sizeof e->path, "%s", log);
        e->from = from;
        e->scanned_reaped = 0;
    }
    if (pid != 0)
        return pid;
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

int it_engine_wait(pid_t pid, int timeout_ms)
{
    int64_t start = it_now_ms();
    int status;
    do {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            engine_reaped(pid);
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        it_sleep_ms(50);
    } while (it_now_ms() - start < timeout_ms);
    return -1;
}

/* An engine that ignores SIGTERM is a bug to diagnose: print every
 * thread's stack (when gdb is installed) before it is killed. */
static void dump_stacks(pid_t pid)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd,
             "command -v gdb >/dev/null && gdb -batch -p %d -ex 'thread apply all bt' "
             "2>/dev/null | grep -E '^(Thread|#)' >&2",
             (int)pid);
    fprintf(stderr, "\n  engine %d did not stop in time; its threads:\n", (int)pid);
    if (system(cmd) != 0)
        fprintf(stderr, "  (no stacks: gdb missing or failed)\n");
}

/* 1 once `pid` catches SIGTERM (its SigCgt mask in /proc), 0 while it
 * does not yet, -1 once it has exited (a zombie or gone). */
static int catches_sigterm(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    unsigned long long mask = 0;
    char state = '?';
    while (fgets(line, sizeof line, f)) {
        sscanf(line, "State: %c", &state);
        sscanf(line, "SigCgt: %llx", &mask);
    }
    fclose(f);
    if (state == 'Z' || state == 'X')
        return -1;
    return (int)((mask >> (SIGTERM - 1)) & 1);
}

int it_engine_stop(pid_t pid, int timeout_ms)
{
    int64_t start = it_now_ms();
    /* a SIGTERM before the engine's handler is installed kills it at once
     * (exit 143, no log): a test that stops an engine right after starting
     * it waits for the handler first */
    while (catches_sigterm(pid) == 0 && it_now_ms() - start < timeout_ms)
        it_sleep_ms(5);
    kill(pid, SIGTERM);
    int status;
    while (it_now_ms() - start < timeout_ms) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid && WIFSIGNALED(status))
            fprintf(stderr, "\n  engine %d ended by signal %d before its stop\n", (int)pid,
                    WTERMSIG(status));
        if (r == pid) {
            engine_reaped(pid);
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        it_sleep_ms(50);
    }
    dump_stacks(pid);
    it_engine_kill(pid);
    return -1;
}

void it_engine_kill(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    engine_reaped(pid);
}

/* --- loopback HTTP --------------------------------------------------- */

static int http_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = send(fd, buf, len, MSG_NOSIGNAL); /* a closed peer is no signal */
        if (w <= 0)
            return -1;
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

/* The whole response (until the server closes); malloc'd, NUL-terminated. */
static char *read_all(int fd)
{
    size_t cap = 1 << 14, len = 0;
    char *buf = malloc(cap);
    ssize_t n;
    while (buf && (n = read(fd, buf + len, cap - len - 1)) > 0) {
        len += (size_t)n;
        if (len + 1 == cap) {
            char *g = realloc(buf, cap *= 2);
            if (!g) {
                free(buf);
                return NULL;
            }
            buf = g;
        }
    }
    if (buf)
        buf[len] = '\0';
    return buf;
}

int it_http(int port, const char *method, const char *path, const char *body, char *resp,
            size_t resplen)
{
    if (resp && resplen)
        resp[0] = '\0';
    int fd = http_connect(port);
    if (fd < 0)
        return -1;
    size_t blen = body ? strlen(body) : 0;
    char head[1024];
    int n = snprintf(head, sizeof head,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                     method, path, blen);
    /* a server may answer (413) and close before the whole body is sent:
     * read the answer whatever the write did */
    if (write_all(fd, head, (size_t)n) == 0)
        (void)write_all(fd, body ? body : "", blen);
    char *all = read_all(fd);
    close(fd);
    int code = -1;
    if (all && sscanf(all, "HTTP/1.%*d %d", &code) == 1 && resp && resplen) {
        const char *b = strstr(all, "\r\n\r\n");
        snprintf(resp, resplen, "%s", b ? b + 4 : "");
    }
    free(all);
    return code;
}

int it_http_wait(int port, const char *path, int timeout_ms)
{
    for (int64_t end = it_now_ms() + timeout_ms; it_now_ms() < end; it_sleep_ms(50))
        if (it_http(port, "GET", path, NULL, NULL, 0) > 0)
            return 0;
    return -1;
}

int it_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof sa;
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static int port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

int it_port_base(int span)
{
    const int lo = 11000, hi = 32768; /* above the brokers' 9092-10999 */
    int slots = (hi - lo) / span;
    for (int i = 0; i < slots; i++) {
        int base = lo + (int)((getpid() + i) % slots) * span, p = 0;
        while (p < span && port_free(base + p))
            p++;
        if (p == span)
            return base;
    }
    return 0;
}

char *it_metrics_scrape(int port)
{
    static char body[1 << 20];
    return it_http(port, "GET", "/metrics", NULL, body, sizeof body) == 200 ? strdup(body)
                                                                              : NULL;
}

double it_metrics_sum(const char *text, const char *family, const char *match, int *samples)
{
    double sum = 0;
    int n = 0;
    size_t fl = strlen(family);
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        if (strncmp(line, family, fl) == 0 && (line[fl] == '{' || line[fl] == ' ')) {
            const char *sp = end ? end : line + strlen(line);
            while (sp > line && sp[-1] != ' ')
                sp--;
            char l[1024];
            snprintf(l, sizeof l, "%.*s", (int)((end ? end : line + strlen(line)) - line), line);
            if (!match || strstr(l, match)) {
                sum += strtod(sp, NULL);
                n++;
            }
        }
        line = end ? end + 1 : NULL;
    }
    if (samples)
        *samples = n;
    return sum;
}

int it_log_count(const char *log, const char *needle)
{
    FILE *f = fopen(log, "r");
    if (!f)
        return 0;
    char line[8192];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

long it_log_sum_before(const char *log, const char *prefix, const char *suffix)
{
    FILE *f = fopen(log, "r");
    if (!f)
        return 0;
    char line[8192];
    long sum = 0;
    while (fgets(line, sizeof line, f)) {
        char *p = strstr(line, prefix);
        if (!p || (suffix && !strstr(p, suffix)))
            continue;
        sum += strtol(p + strlen(prefix), NULL, 10);
    }
    fclose(f);
    return sum;
}

int it_main(const char *suite, const it_case *cases)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite(suite, NULL, NULL);
    /* KS_IT_ONLY=TEXT runs only the cases whose name contains TEXT */
    const char *only = getenv("KS_IT_ONLY");
    for (const it_case *c = cases; c->name; c++)
        if (!only || strstr(c->name, only))
            CU_add_test(s, c->name, c->fn);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_tests_failed();
    unsigned run = CU_get_number_of_tests_run();
    for (int i = 0; i < n_engine_logs; i++)
        sanitizer_reports += scan_engine_log(&engine_logs[i]);
    if (sanitizer_reports) {
        printf("\n%s: %d sanitizer report(s) in engine logs (above): each counted as a "
               "failure\n",
               suite, sanitizer_reports);
        failed += (unsigned)sanitizer_reports;
        run += (unsigned)sanitizer_reports;
    }
    printf("\n%s: %u passed, %u failed\n", suite, run - failed, failed);
    CU_cleanup_registry();
    return failed ? 1 : 0;
}
