/*
 * loadgen.c - the benchmark's load generator: N records with K keys to an
 * input topic (created with P partitions when it does not exist).
 *
 *   loadgen -b HOST:PORT -t TOPIC [-p PARTITIONS] [-n RECORDS] [-k KEYS]
 *           [-s VALUE_BYTES] [-z SKEW] [-f bytes|orders|json] [-r RATE]
 *           [-S SEED] [-w SPREAD_MS] [-L] [-q] [-P KEY_PREFIX] [-Q]
 *           [-c FIELD_KEYS]
 *
 *   -n  records to write (1000000)       -k  distinct keys (100000)
 *   -s  value size in bytes (100)        -p  partitions when creating (4)
 *   -z  key skew: Zipf exponent, 0 = uniform (0); 0.99 is "web-like"
 *   -f  bytes:  key "u0000042", value: printable bytes of the given size
 *       orders: key = the user, value = an order as JSON, padded to about
 *               the given size, for examples/orders:
 *               {"id":7,"kind":"purchase","user":"u0000042","amount":12,"pad":"..."}
 *               kind: 80% purchase, 10% refund, 10% test (dropped by the
 *               example's route processor)
 *       json:   value = a record with a customer id in a field, padded to
 *               about the given size, for the re-key and join scenarios:
 *               {"id":7,"customer":"c0000042","amount":12,"pad":"..."}
 *               the customer is uniform over -c FIELD_KEYS ids
 *   -P  key prefix ("u"): keys are PREFIX + 7 digits ("c0000042")
 *   -Q  sequential keys: record i gets key i % KEYS (each key once per
 *       KEYS records; a table, or two streams with the same ids)
 *   -c  distinct customer ids in the json format's field (KEYS)
 *   -r  records per second, steady (0 = as fast as possible): the latency
 *       runs produce at a steady rate
 *   -w  timestamps: 0 = the wall clock when the record is produced (the
 *       default; latency runs need it); W > 0 = spread evenly over the W ms
 *       that end now (windowed scenarios see many windows)
 *   -S  seed (1): the same seed gives the same keys, values and order
 *   -L  latency keys: every key is "L<send time, us since the epoch>_u0000042"
 *       (unique), so a reader of any output whose key contains the input
 *       key (count, windowed count with either key format, the orders
 *       route's user) knows when its input was sent: measure latency uses
 *       it, since a windowed output's timestamp is not its input's
 *
 * Keys are hashed with murmur2 (Java's partitioner), so a key lands on the
 * same partition whichever client writes it. The producer is idempotent
 * (acks=all) and not transactional; a steady (-r) run is not idempotent
 * (the producer id would hold back the first records for a second or so,
 * which would count as latency) and lingers 1 ms instead of 20. Prints one line: records, seconds,
 * records/s. Exit 0 when every record was delivered.
 */
#define _GNU_SOURCE
#include <librdkafka/rdkafka.h>

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* xorshift64*: fast, seeded, good enough for keys and padding */
static uint64_t rng_state = 88172645463325252ULL;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}
static double rnd01(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

/* Zipf over [0, k): a cumulative table and a binary search. */
static double *zipf_cdf(long k, double s)
{
    double *cdf = malloc((size_t)k * sizeof *cdf);
    if (!cdf)
        return NULL;
    double sum = 0;
    for (long i = 0; i < k; i++)
        cdf[i] = (sum += 1.0 / pow((double)(i + 1), s));
    for (long i = 0; i < k; i++)
        cdf[i] /= sum;
    return cdf;
}

static long pick_key(long k, const double *cdf)
{
    if (!cdf)
        return (long)(rnd() % (uint64_t)k);
    double u = rnd01();
    long lo = 0, hi = k - 1;
    while (lo < hi) {
        long mid = (lo + hi) / 2;
        if (cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* scatter the popular ranks over the key space */
    return (long)(((uint64_t)lo * 2654435761ULL) % (uint64_t)k);
}

static int delivery_failed;
static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    (void)opaque;
    if (m->err && delivery_failed++ < 5)
        fprintf(stderr, "loadgen: delivery failed: %s\n", rd_kafka_err2str(m->err));
}

static int set(rd_kafka_conf_t *c, const char *k, const char *v)
{
    char err[512];
    if (rd_kafka_conf_set(c, k, v, err, sizeof err) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "loadgen: %s=%s: %s\n", k, v, err);
        return -1;
    }
    return 0;
}

/* Create TOPIC with P partitions; an existing topic is fine. */
static int create_topic(rd_kafka_t *rk, const char *topic, int partitions)
{
    char err[512];
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, partitions, 1, err, sizeof err);
    if (!nt) {
        fprintf(stderr, "loadgen: %s\n", err);
        return -1;
    }
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    int rc = -1;
    if (ev) {
        size_t n = 0;
        const rd_kafka_topic_result_t **tr =
            rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
        rd_kafka_resp_err_t e = n == 1 ? rd_kafka_topic_result_error(tr[0])
                                       : rd_kafka_event_error(ev);
        if (!e || e == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
            rc = 0;
        else
            fprintf(stderr, "loadgen: create %s: %s\n", topic, rd_kafka_err2str(e));
        rd_kafka_event_destroy(ev);
    } else {
        fprintf(stderr, "loadgen: create %s: no answer in 30 s\n", topic);
    }
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
    return rc;
}

static void usage(void)
{
    fprintf(stderr, "usage: loadgen -b HOST:PORT -t TOPIC [-p PARTITIONS] [-n RECORDS] "
                    "[-k KEYS] [-s VALUE_BYTES] [-z SKEW] [-f bytes|orders|json] [-r RATE] "
                    "[-S SEED] [-w SPREAD_MS] [-L] [-q] [-P KEY_PREFIX] [-Q] [-c FIELD_KEYS]\n");
    exit(64);
}

int main(int argc, char **argv)
{
    const char *bootstrap = NULL, *topic = NULL, *format = "bytes", *prefix = "u";
    long field_keys = 0;
    int sequential = 0;
    long n = 1000000, keys = 100000, vsize = 100, partitions = 4, rate = 0, seed = 1;
    long spread_ms = 0;
    double skew = 0;
    int quiet = 0, latency_keys = 0;
    int c;
    while ((c = getopt(argc, argv, "b:t:p:n:k:s:z:f:r:S:w:LqP:Qc:")) != -1) {
        switch (c) {
        case 'b': bootstrap = optarg; break;
        case 't': topic = optarg; break;
        case 'p': partitions = atol(optarg); break;
        case 'n': n = atol(optarg); break;
        case 'k': keys = atol(optarg); break;
        case 's': vsize = atol(optarg); break;
        case 'z': skew = atof(optarg); break;
        case 'f': format = optarg; break;
        case 'r': rate = atol(optarg); break;
        case 'S': seed = atol(optarg); break;
        case 'w': spread_ms = atol(optarg); break;
        case 'L': latency_keys = 1; break;
        case 'q': quiet = 1; break;
        case 'P': prefix = optarg; break;
        case 'Q': sequential = 1; break;
        case 'c': field_keys = atol(optarg); break;
        default: usage();
        }
    }
    int orders = strcmp(format, "orders") == 0, json = strcmp(format, "json") == 0;
    if (field_keys == 0)
        field_keys = keys;
    if (!bootstrap || !topic || n < 0 || keys < 1 || vsize < 0 || vsize > 1000000 ||
        partitions < 1 || rate < 0 || skew < 0 || field_keys < 1 || strlen(prefix) > 16 ||
        (!orders && !json && strcmp(format, "bytes") != 0))
        usage();
    rng_state ^= (uint64_t)seed * 0x9E3779B97F4A7C15ULL;

    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char lingerbuf[16];
    snprintf(lingerbuf, sizeof lingerbuf, "%d", rate ? 1 : 20);
    if (set(conf, "bootstrap.servers", bootstrap) || set(conf, "socket.nagle.disable", "true") ||
        set(conf, "enable.idempotence", rate ? "false" : "true") || set(conf, "acks", "all") ||
        set(conf, "partitioner", "murmur2_random") || set(conf, "linger.ms", lingerbuf) ||
        set(conf, "batch.num.messages", "10000") ||
        set(conf, "queue.buffering.max.messages", "1000000") ||
        set(conf, "compression.type", "none")) {
        rd_kafka_conf_destroy(conf);
        return 2;
    }
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "loadgen: %s\n", err);
        return 2;
    }
    if (create_topic(rk, topic, (int)partitions) != 0) {
        rd_kafka_destroy(rk);
        return 1;
    }

    if (rate > 0) {
        /* a steady run measures latency from the record's timestamp: have
         * the connection and the topic's metadata before the first one */
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
        const struct rd_kafka_metadata *md = NULL;
        if (rd_kafka_metadata(rk, 0, rkt, &md, 10000) == 0)
            rd_kafka_metadata_destroy(md);
        rd_kafka_topic_destroy(rkt);
    }

    double *cdf = skew > 0 ? zipf_cdf(keys, skew) : NULL;
    if (skew > 0 && !cdf) {
        fprintf(stderr, "loadgen: out of memory\n");
        return 1;
    }
    /* padding: printable, random per run but fixed per seed */
    size_t padlen = (size_t)vsize + 64;
    char *pad = malloc(padlen + 1);
    for (size_t i = 0; i < padlen; i++)
        pad[i] = (char)('a' + rnd() % 26);
    pad[padlen] = '\0';
    char *value = malloc((size_t)vsize + 256);
    static const char *kinds[] = {"purchase", "purchase", "purchase", "purchase", "purchase",
                                  "purchase", "purchase", "purchase", "refund", "test"};

    int64_t now0 = wall_ms();
    double t0 = mono_s();
    for (long i = 0; i < n; i++) {
        if (rate > 0) {
            /* steady: record i is due at t0 + i / rate */
            double due = t0 + (double)i / (double)rate;
            double now;
            while ((now = mono_s()) < due) {
                double wait = due - now;
                struct timespec ts = {0, (long)(wait > 0.001 ? 1000000 : wait * 1e9)};
                rd_kafka_poll(rk, 0);
                nanosleep(&ts, NULL);
            }
        }
        long k = sequential ? i % keys : pick_key(keys, cdf);
        char key[64];
        int klen = latency_keys
                       ? snprintf(key, sizeof key, "L%lld_%s%07ld", (long long)wall_us(), prefix, k)
                       : snprintf(key, sizeof key, "%s%07ld", prefix, k);
        size_t vlen;
        if (orders || json) {
            int len = orders ? snprintf(value, (size_t)vsize + 256,
                                        "{\"id\":%ld,\"kind\":\"%s\",\"user\":\"%s\","
                                        "\"amount\":%ld,\"pad\":\"",
                                        i, kinds[rnd() % 10], key, (long)(1 + rnd() % 1000))
                             : snprintf(value, (size_t)vsize + 256,
                                        "{\"id\":%ld,\"customer\":\"c%07ld\",\"amount\":%ld,"
                                        "\"pad\":\"",
                                        i, (long)(rnd() % (uint64_t)field_keys),
                                        (long)(1 + rnd() % 1000));
            long room = vsize - len - 2;
            if (room < 0)
                room = 0;
            size_t off = rnd() % 64;
            memcpy(value + len, pad + off, (size_t)room);
            len += (int)room;
            value[len++] = '"';
            value[len++] = '}';
            vlen = (size_t)len;
        } else {
            size_t off = rnd() % 64;
            memcpy(value, pad + off, (size_t)vsize);
            vlen = (size_t)vsize;
        }
        int64_t ts = spread_ms > 0 ? now0 - spread_ms + (int64_t)((double)spread_ms * i / n)
                                   : wall_ms();
        for (;;) {
            rd_kafka_resp_err_t e = rd_kafka_producev(
                rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, (size_t)klen),
                RD_KAFKA_V_VALUE(value, vlen), RD_KAFKA_V_TIMESTAMP(ts),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
            if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                rd_kafka_poll(rk, 10);
                continue;
            }
            if (e) {
                fprintf(stderr, "loadgen: produce: %s\n", rd_kafka_err2str(e));
                rd_kafka_destroy(rk);
                return 1;
            }
            break;
        }
        if ((i & 1023) == 0)
            rd_kafka_poll(rk, 0);
    }
    rd_kafka_resp_err_t fe = rd_kafka_flush(rk, 120000);
    double secs = mono_s() - t0;
    rd_kafka_destroy(rk);
    free(cdf);
    free(pad);
    free(value);
    if (fe || delivery_failed) {
        fprintf(stderr, "loadgen: %d records not delivered (%s)\n", delivery_failed,
                rd_kafka_err2str(fe));
        return 1;
    }
    if (!quiet)
        printf("loadgen: %ld records to %s in %.2f s (%.0f records/s)\n", n, topic, secs,
               secs > 0 ? (double)n / secs : 0.0);
    return 0;
}
