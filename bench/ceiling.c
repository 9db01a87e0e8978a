/*
 * ceiling.c - the benchmark's ceiling: a plain librdkafka consume -> produce
 * loop with no processing and no state, with the kstreams engine's batch
 * and commit rules and client settings (engine/runtime/committer.c,
 * collector.c, worker.c), so that kstreams
 * can be given as a percentage of what librdkafka alone does.
 *
 *   ceiling -b HOST:PORT -g GROUP -i INPUT -o OUTPUT [-e|-a] [-c COMMIT_MS]
 *           [-x TRANSACTIONAL_ID] [-l SECOND_OUTPUT]
 *
 *   -e  exactly-once (default): one transaction per batch, offsets sent with
 *       the group metadata (KIP-447), read_committed
 *   -a  at-least-once: flush, then commit the offsets
 *   -c  commit interval in ms (100)
 *   -l  also write every record to SECOND_OUTPUT, to the input's partition
 *       (what a stateful processor's changelog costs in Kafka I/O: the
 *       count scenario writes an output and a changelog record per input)
 *
 * Every input record is produced to OUTPUT as is (key, value, timestamp),
 * partitioned by key (murmur2, like the engine's sinks). A batch ends when
 * it is COMMIT_MS old or holds max_batch records; max_batch adapts as in
 * the engine (starts at 1000, grows by 1/4 while a batch takes < 2
 * intervals, up to 100000). Runs until SIGTERM/SIGINT, then commits and
 * exits 0. One consumer and one producer, one thread (the engine's
 * default `workers: 1`).
 *
 * Like the engine (engine/kafka/fair_poll.c), the loop wakes librdkafka's
 * fetcher when its queue runs dry after a run of at least 10 000 records
 * (one watermark query to the next input partition's leader, at most once
 * per 50 ms): librdkafka 2.0.2 stops fetching once queued.min.messages are
 * queued and looks again only about once a second. CEILING_FETCH_WAKE=0 in
 * the environment turns it off (the loop as before).
 */
#define _GNU_SOURCE
#include <librdkafka/rdkafka.h>

#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t stop;
static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int eos = 1;
static rd_kafka_t *consumer, *producer;
static int in_batch;
static int64_t batch_started;
static size_t batch_records, max_batch = 1000;
static int commit_ms = 100;
/* next offset per partition of the input (positions of this batch) */
static rd_kafka_topic_partition_list_t *positions;
static const char *input, *output, *output2;

/* The fetcher wake (see the top of the file). */
enum { WAKE_AFTER_RECORDS = 10000, WAKE_GAP_MS = 50, WAKE_TIMEOUT_MS = 200, MAX_PARTS = 1024 };
static int wake = 1;
static int32_t seen[MAX_PARTS]; /* input partitions met so far */
static int nseen, wake_next;
static uint64_t run;
static int64_t last_wake;

static void saw_partition(int32_t p)
{
    for (int i = 0; i < nseen; i++)
        if (seen[i] == p)
            return;
    if (nseen < MAX_PARTS)
        seen[nseen++] = p;
}

/* The queue ran dry: after a long run, ask one partition's watermarks so
 * that its leader's broker thread decides to fetch again now. */
static void dry_spell(void)
{
    if (wake && run >= WAKE_AFTER_RECORDS && nseen > 0 && now_ms() - last_wake >= WAKE_GAP_MS) {
        int64_t low, high;
        last_wake = now_ms();
        rd_kafka_query_watermark_offsets(consumer, input, seen[wake_next++ % nseen], &low, &high,
                                         WAKE_TIMEOUT_MS);
    }
    run = 0;
}

static void die(const char *what, rd_kafka_error_t *e)
{
    fprintf(stderr, "ceiling: %s: %s\n", what, rd_kafka_error_string(e));
    exit(1);
}

static int set(rd_kafka_conf_t *c, const char *k, const char *v)
{
    char err[512];
    if (rd_kafka_conf_set(c, k, v, err, sizeof err) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "ceiling: %s=%s: %s\n", k, v, err);
        exit(2);
    }
    return 0;
}

static void commit_batch(void)
{
    if (!in_batch)
        return;
    int64_t began = batch_started;
    if (eos) {
        rd_kafka_flush(producer, 60000);
        if (positions->cnt) {
            rd_kafka_consumer_group_metadata_t *md = rd_kafka_consumer_group_metadata(consumer);
            rd_kafka_error_t *e =
                rd_kafka_send_offsets_to_transaction(producer, positions, md, 30000);
            rd_kafka_consumer_group_metadata_destroy(md);
            if (e)
                die("send_offsets_to_transaction", e);
        }
        rd_kafka_error_t *e = rd_kafka_commit_transaction(producer, 60000);
        if (e)
            die("commit_transaction", e);
    } else {
        rd_kafka_flush(producer, 60000);
        if (positions->cnt) {
            rd_kafka_resp_err_t e = rd_kafka_commit(consumer, positions, 0);
            if (e && e != RD_KAFKA_RESP_ERR__NO_OFFSET)
                fprintf(stderr, "ceiling: commit: %s\n", rd_kafka_err2str(e));
        }
    }
    in_batch = 0;
    int64_t took = now_ms() - began;
    if (took > 4 * commit_ms && max_batch > 16)
        max_batch /= 2;
    else if (took < 2 * commit_ms && max_batch < 100000)
        max_batch += max_batch / 4 + 1;
}

static void begin_batch(void)
{
    if (in_batch)
        return;
    if (eos) {
        rd_kafka_error_t *e = rd_kafka_begin_transaction(producer);
        if (e)
            die("begin_transaction", e);
    }
    in_batch = 1;
    batch_started = now_ms();
    batch_records = 0;
}

static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    (void)opaque;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        rd_kafka_assign(rk, parts);
        return;
    }
    if (rd_kafka_assignment_lost(rk)) {
        if (in_batch && eos) {
            rd_kafka_error_t *e = rd_kafka_abort_transaction(producer, 60000);
            if (e)
                die("abort_transaction", e);
        }
        in_batch = 0;
    } else {
        commit_batch();
    }
    rd_kafka_topic_partition_list_destroy(positions);
    positions = rd_kafka_topic_partition_list_new(8);
    rd_kafka_assign(rk, NULL);
}

int main(int argc, char **argv)
{
    const char *bootstrap = NULL, *group = NULL, *txn_id = NULL;
    int c;
    while ((c = getopt(argc, argv, "b:g:i:o:eac:x:l:")) != -1) {
        switch (c) {
        case 'b': bootstrap = optarg; break;
        case 'g': group = optarg; break;
        case 'i': input = optarg; break;
        case 'o': output = optarg; break;
        case 'e': eos = 1; break;
        case 'a': eos = 0; break;
        case 'c': commit_ms = atoi(optarg); break;
        case 'x': txn_id = optarg; break;
        case 'l': output2 = optarg; break;
        default:
            fprintf(stderr, "usage: ceiling -b HOST:PORT -g GROUP -i INPUT -o OUTPUT [-e|-a] "
                            "[-c COMMIT_MS] [-x TRANSACTIONAL_ID] [-l SECOND_OUTPUT]\n");
            return 64;
        }
    }
    if (!bootstrap || !group || !input || !output || commit_ms <= 0) {
        fprintf(stderr, "ceiling: -b, -g, -i and -o are required\n");
        return 64;
    }
    char txn_buf[256];
    if (!txn_id) {
        snprintf(txn_buf, sizeof txn_buf, "%s-ceiling", group);
        txn_id = txn_buf;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    const char *w = getenv("CEILING_FETCH_WAKE");
    wake = !(w && strcmp(w, "0") == 0);
    char err[512];

    /* the engine's producer settings (collector.c new_producer, kafka.c) */
    rd_kafka_conf_t *pc = rd_kafka_conf_new();
    set(pc, "bootstrap.servers", bootstrap);
    set(pc, "socket.nagle.disable", "true");
    set(pc, "linger.ms", "5");
    set(pc, "batch.num.messages", "10000");
    set(pc, "queue.buffering.max.messages", "500000");
    set(pc, "transaction.timeout.ms", "30000");
    set(pc, "retry.backoff.ms", "20");
    set(pc, "enable.idempotence", "true");
    set(pc, "acks", "all");
    set(pc, "partitioner", "murmur2_random");
    if (eos)
        set(pc, "transactional.id", txn_id);
    producer = rd_kafka_new(RD_KAFKA_PRODUCER, pc, err, sizeof err);
    if (!producer) {
        fprintf(stderr, "ceiling: %s\n", err);
        return 2;
    }
    if (eos) {
        rd_kafka_error_t *e = rd_kafka_init_transactions(producer, 60000);
        if (e)
            die("init_transactions", e);
    }

    /* the engine's consumer settings (worker.c new_consumer) */
    rd_kafka_conf_t *cc = rd_kafka_conf_new();
    set(cc, "bootstrap.servers", bootstrap);
    set(cc, "socket.nagle.disable", "true");
    set(cc, "group.id", group);
    set(cc, "session.timeout.ms", "10000");
    set(cc, "heartbeat.interval.ms", "1000");
    set(cc, "max.poll.interval.ms", "300000");
    set(cc, "fetch.wait.max.ms", "100");
    set(cc, "enable.auto.commit", "false");
    set(cc, "enable.auto.offset.store", "false");
    set(cc, "auto.offset.reset", "earliest");
    set(cc, "isolation.level", "read_committed");
    set(cc, "partition.assignment.strategy", "range");
    rd_kafka_conf_set_rebalance_cb(cc, on_rebalance);
    consumer = rd_kafka_new(RD_KAFKA_CONSUMER, cc, err, sizeof err);
    if (!consumer) {
        fprintf(stderr, "ceiling: %s\n", err);
        return 2;
    }
    rd_kafka_poll_set_consumer(consumer);
    positions = rd_kafka_topic_partition_list_new(8);
    rd_kafka_topic_partition_list_t *subs = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(subs, input, RD_KAFKA_PARTITION_UA);
    rd_kafka_subscribe(consumer, subs);
    rd_kafka_topic_partition_list_destroy(subs);

    rd_kafka_topic_t *out = rd_kafka_topic_new(producer, output, NULL);
    rd_kafka_topic_t *out2 = output2 ? rd_kafka_topic_new(producer, output2, NULL) : NULL;
    uint64_t records = 0;
    while (!stop) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(consumer, 0);
        if (!m) {
            dry_spell();
            m = rd_kafka_consumer_poll(consumer, 50);
        }
        if (m) {
            if (!m->err) {
                begin_batch();
                for (int copy = 0; copy < (out2 ? 2 : 1); copy++) {
                    /* the ?: in parentheses: RD_KAFKA_V_* cast their argument,
                     * which would otherwise bind to `copy` alone */
                    int r = rd_kafka_producev(
                        producer, RD_KAFKA_V_RKT((copy ? out2 : out)),
                        RD_KAFKA_V_PARTITION((copy ? m->partition : RD_KAFKA_PARTITION_UA)),
                        RD_KAFKA_V_KEY(m->key, m->key_len), RD_KAFKA_V_VALUE(m->payload, m->len),
                        RD_KAFKA_V_TIMESTAMP(rd_kafka_message_timestamp(m, NULL)),
                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
                    if (r == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                        rd_kafka_poll(producer, 10);
                        copy--;
                        continue;
                    }
                    if (r) {
                        fprintf(stderr, "ceiling: produce: %s\n", rd_kafka_err2str(r));
                        return 1;
                    }
                }
                rd_kafka_topic_partition_t *tp =
                    rd_kafka_topic_partition_list_find(positions, input, m->partition);
                if (!tp)
                    tp = rd_kafka_topic_partition_list_add(positions, input, m->partition);
                tp->offset = m->offset + 1;
                batch_records++;
                records++;
                run++;
                saw_partition(m->partition);
            }
            rd_kafka_message_destroy(m);
        }
        rd_kafka_poll(producer, 0);
        if (in_batch && (now_ms() - batch_started >= commit_ms || batch_records >= max_batch))
            commit_batch();
    }
    commit_batch();
    rd_kafka_consumer_close(consumer);
    rd_kafka_destroy(consumer);
    rd_kafka_topic_destroy(out);
    if (out2)
        rd_kafka_topic_destroy(out2);
    rd_kafka_flush(producer, 10000);
    rd_kafka_destroy(producer);
    fprintf(stderr, "ceiling: %llu records copied\n", (unsigned long long)records);
    return 0;
}
