/*
 * collector.c - the producer of one worker and what a batch sends through
 * it (collector.h).
 */
#include "runtime/collector.h"
#include "base/grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "kafka/kafka.h"
#include "runtime/serde.h"
#include "runtime/table.h"

/* Delivery reports: remember changelog offsets (opaque = the task's
 * changelog_hi slot) and the first failure. */
static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    ks_collector *c = opaque;
    if (m->err) {
        if (!c->delivery_err) {
            c->delivery_err = m->err;
            snprintf(c->delivery_errstr, sizeof c->delivery_errstr, "%s [%d]: %s",
                     rd_kafka_topic_name(m->rkt), (int)m->partition,
                     rd_kafka_err2str(m->err));
        }
        return;
    }
    int64_t *hi = m->_private;
    if (hi && m->offset > *hi)
        *hi = m->offset;
}

/* A topic's handle, kept for the producer's life. */
typedef struct ks_topic_handle {
    char *name;
    rd_kafka_topic_t *rkt;
} ks_topic_handle;

/* At most this many handles are kept (the sinks, changelogs and a few
 * outbox or dead-letter topics of a pipeline); past it, produce by name. */
#define MAX_HANDLES 64

/* The handle of `topic`, made and kept on first use; NULL when none can be
 * kept (then the record is produced by name). */
static rd_kafka_topic_t *topic_handle(ks_collector *c, const char *topic)
{
    for (size_t i = 0; i < c->handle_count; i++)
        if (strcmp(c->handles[i].name, topic) == 0)
            return c->handles[i].rkt;
    if (c->handle_count == MAX_HANDLES)
        return NULL;
    ks_topic_handle *grown = ks_grow(c->handles, &c->handle_cap, c->handle_count, sizeof *grown, 8);
    if (!grown)
        return NULL;
    c->handles = grown;
    char *name = strdup(topic);
    rd_kafka_topic_t *rkt = name ? rd_kafka_topic_new(c->producer, topic, NULL) : NULL;
    if (!rkt) {
        free(name);
        return NULL;
    }
    c->handles[c->handle_count++] = (ks_topic_handle){name, rkt};
    return rkt;
}

/* Release the handles (before their producer is destroyed). */
static void drop_handles(ks_collector *c)
{
    for (size_t i = 0; i < c->handle_count; i++) {
        rd_kafka_topic_destroy(c->handles[i].rkt);
        free(c->handles[i].name);
    }
    free(c->handles);
    c->handles = NULL;
    c->handle_count = c->handle_cap = 0;
}

/* Queue one record; waits while the producer's queue is full. Takes
 * `hdrs` over. 0, or KS_ERR_IO (logged). */
static int produce(ks_collector *c, const char *topic, int32_t partition, const void *key,
                   size_t klen, const void *value, size_t vlen, int64_t ts, void *opaque,
                   rd_kafka_headers_t *hdrs)
{
    for (;;) {
        /* two calls: RD_KAFKA_V_HEADERS is two varargs, and inside a ?: only
         * the last of them was passed (every record with headers failed
         * with "Invalid argument") */
        rd_kafka_topic_t *kept = topic_handle(c, topic);
        rd_kafka_topic_t *rkt = kept ? kept : rd_kafka_topic_new(c->producer, topic, NULL);
        rd_kafka_resp_err_t e =
            !rkt ? (rd_kafka_last_error() ? rd_kafka_last_error() : RD_KAFKA_RESP_ERR__INVALID_ARG)
            : hdrs ? rd_kafka_producev(
                         c->producer, RD_KAFKA_V_RKT(rkt), RD_KAFKA_V_PARTITION(partition),
                         RD_KAFKA_V_KEY(key, klen), RD_KAFKA_V_VALUE((void *)value, vlen),
                         RD_KAFKA_V_TIMESTAMP(ts > 0 ? ts : 0),
                         RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(opaque),
                         RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END)
                   : rd_kafka_producev(
                         c->producer, RD_KAFKA_V_RKT(rkt), RD_KAFKA_V_PARTITION(partition),
                         RD_KAFKA_V_KEY(key, klen), RD_KAFKA_V_VALUE((void *)value, vlen),
                         RD_KAFKA_V_TIMESTAMP(ts > 0 ? ts : 0),
                         RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(opaque),
                         RD_KAFKA_V_END);
        if (rkt && !kept)
            rd_kafka_topic_destroy(rkt);
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(c->producer, 10);
            continue;
        }
        if (e) {
            if (hdrs)
                rd_kafka_headers_destroy(hdrs);
            ks_error(c->where, "produce to %s [%d] failed: %s", topic, (int)partition,
                     rd_kafka_err2str(e));
            return KS_ERR_IO;
        }
        return 0;
    }
}

/* The record's headers for producev (which takes them over), or NULL. */
static rd_kafka_headers_t *record_headers(const ks_record *rec)
{
    if (!rec->header_count)
        return NULL;
    rd_kafka_headers_t *hdrs = rd_kafka_headers_new(rec->header_count);
    for (size_t i = 0; i < rec->header_count; i++)
        rd_kafka_header_add(hdrs, rec->headers[i].name, -1, rec->headers[i].value,
                            (ssize_t)rec->headers[i].value_len);
    return hdrs;
}

/* A sink's record: KS_ERR_INVALID (and c->refusal) when it does not match
 * the sink's serdes, which a replay cannot mend. */
static int on_emit(void *arg, ks_task *task, const ks_topo_node *sink, const ks_record *rec)
{
    ks_collector *c = arg;
    const char *why = NULL;
    if (ks_serde_check(sink->sink->key_serde, rec->key, rec->key_len, &why) != 0 ||
        ks_serde_check(sink->sink->value_serde, rec->value, rec->value_len, &why) != 0) {
        ks_error(task->where, "record for sink '%s' (topic %s) does not match its serde: %s",
                 sink->name, sink->sink->topic, why);
        if (!c->refusal.sink)
            c->refusal = (ks_refusal){sink, why};
        return KS_ERR_INVALID;
    }
    return produce(c, sink->sink->topic, RD_KAFKA_PARTITION_UA, rec->key, rec->key_len,
                rec->value, rec->value_len, rec->timestamp, NULL, record_headers(rec));
}

/* The outbox's requests: keyed by user id, so one user's events stay in
 * order in one partition. */
static int on_emit_topic(void *arg, ks_task *task, const char *topic, const ks_record *rec)
{
    (void)task;
    return produce(arg, topic, RD_KAFKA_PARTITION_UA, rec->key, rec->key_len, rec->value,
                rec->value_len, rec->timestamp, NULL, record_headers(rec));
}

static int on_changelog(void *arg, ks_task *task, int store, ks_bytes key,
                        const ks_bytes *value)
{
    ks_collector *c = arg;
    /* names made once at start: an snprintf per write was ~5% of the
     * worker's instructions (bench/ callgrind) */
    const char *topic = c->changelog_topics[store];
    return produce(c, topic, task->partition, key.data, key.len, value ? value->data : NULL,
                value ? value->len : 0, task->current ? task->current->timestamp : 0,
                &task->changelog_hi[store], NULL);
}

ks_task_io ks_collector_task_io(ks_collector *c, struct ks_metrics *metrics)
{
    return (ks_task_io){.arg = c,
                        .emit = on_emit,
                        .emit_topic = on_emit_topic,
                        .changelog = on_changelog,
                        .metrics = metrics,
                        .cache = 1};
}

int ks_collector_dead_letter(ks_collector *c, const char *dlq, const rd_kafka_message_t *m,
                             const char *why, const char *reason)
{
    rd_kafka_headers_t *h = rd_kafka_headers_new(5);
    char off[32], part[16];
    snprintf(off, sizeof off, "%lld", (long long)m->offset);
    snprintf(part, sizeof part, "%d", (int)m->partition);
    rd_kafka_header_add(h, "ks.topic", -1, rd_kafka_topic_name(m->rkt), -1);
    rd_kafka_header_add(h, "ks.partition", -1, part, -1);
    rd_kafka_header_add(h, "ks.offset", -1, off, -1);
    rd_kafka_header_add(h, "ks.error", -1, why, -1);
    if (reason)
        rd_kafka_header_add(h, "ks.error.reason", -1, reason, -1);
    return produce(c, dlq, RD_KAFKA_PARTITION_UA, m->key, m->key_len, m->payload, m->len,
                rd_kafka_message_timestamp(m, NULL), NULL, h);
}

const char *ks_collector_delivery_error(const ks_collector *c)
{
    return c->delivery_err ? c->delivery_errstr : NULL;
}

void ks_collector_clear_delivery_error(ks_collector *c)
{
    c->delivery_err = 0;
}

void ks_collector_clear_refusal(ks_collector *c)
{
    c->refusal = (ks_refusal){NULL, NULL};
}

static rd_kafka_t *new_producer(ks_collector *c, char *err, size_t errlen)
{
    const ks_pipeline *p = c->topo->pipeline;
    const char *defaults[] = {"linger.ms", "5", "batch.num.messages", "10000",
                              "queue.buffering.max.messages", "500000",
                              "transaction.timeout.ms", "30000", "retry.backoff.ms", "20",
                              NULL};
    const char *alo[] = {"enable.idempotence", "true", "acks", "all", "partitioner",
                         "murmur2_random", NULL};
    const char *eos[] = {"enable.idempotence", "true", "acks",    "all",
                         "partitioner",        "murmur2_random", "transactional.id",
                         c->txn_id,            NULL};
    rd_kafka_conf_t *conf = ks_kafka_conf(p, RD_KAFKA_PRODUCER, defaults, c->eos ? eos : alo,
                                          err, errlen);
    if (!conf)
        return NULL;
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_opaque(conf, c);
    char timeout[32];
    size_t timeout_len = sizeof timeout;
    if (rd_kafka_conf_get(conf, "transaction.timeout.ms", timeout, &timeout_len) ==
        RD_KAFKA_CONF_OK)
        c->txn_timeout_ms = strtoll(timeout, NULL, 10);
    rd_kafka_t *rk = ks_kafka_new(RD_KAFKA_PRODUCER, conf, "cannot create producer", err, errlen);
    if (!rk)
        return NULL;
    if (c->eos) {
        /* a broker still restarting times this out (retriable): librdkafka
         * 2.0.2 allows calling it again; wait up to 3 minutes in all, as
         * topic set-up does (kafka/topics.h) */
        rd_kafka_error_t *e = rd_kafka_init_transactions(rk, 60000);
        for (int i = 0; i < 2 && e && rd_kafka_error_is_retriable(e); i++) {
            ks_warn(c->where, "init_transactions (transactional.id %s): %s; trying again",
                    c->txn_id, rd_kafka_error_string(e));
            rd_kafka_error_destroy(e);
            e = rd_kafka_init_transactions(rk, 60000);
        }
        if (e) {
            snprintf(err, errlen, "init_transactions (transactional.id %s): %s", c->txn_id,
                     rd_kafka_error_string(e));
            rd_kafka_error_destroy(e);
            rd_kafka_destroy(rk);
            return NULL;
        }
    }
    return rk;
}

/* Make the handles of the changelogs and sinks now. librdkafka 2.0.2 asks
 * for a topic's metadata at once when its handle is made, but not when a
 * record names a topic it has not seen (produce by name): that record
 * waits for the main thread's once-a-second scan for topics without
 * metadata, and a pipeline's first commit waited 1-2 s for it (one scan
 * for the changelog, the next for the sink). */
static void known_topics(ks_collector *c)
{
    for (size_t s = 0; s < c->topo->pipeline->store_count; s++)
        topic_handle(c, c->changelog_topics[s]);
    for (size_t i = 0; i < c->topo->node_count; i++)
        if (c->topo->nodes[i].kind == KS_NODE_SINK)
            topic_handle(c, c->topo->nodes[i].sink->topic);
}

int ks_collector_init(ks_collector *c, const ks_topology *topo, const char *where,
                      const char *txn_id, char *err, size_t errlen)
{
    const ks_pipeline *p = topo->pipeline;
    c->topo = topo;
    c->where = where;
    c->eos = p->guarantee == KS_GUARANTEE_EXACTLY_ONCE;
    snprintf(c->txn_id, sizeof c->txn_id, "%s", txn_id);
    c->changelog_topics = calloc(p->store_count + 1, sizeof *c->changelog_topics);
    for (size_t s = 0; c->changelog_topics && s < p->store_count; s++) {
        char topic[512];
        ks_store_changelog(topo, (int)s, topic, sizeof topic);
        if (!(c->changelog_topics[s] = strdup(topic)))
            break;
    }
    if (!c->changelog_topics || (p->store_count && !c->changelog_topics[p->store_count - 1])) {
        snprintf(err, errlen, "out of memory");
        return KS_ERR_NOMEM;
    }
    c->producer = new_producer(c, err, errlen);
    if (c->producer)
        known_topics(c);
    return c->producer ? 0 : KS_ERR_IO;
}

int ks_collector_rebuild(ks_collector *c, char *err, size_t errlen)
{
    ks_warn(c->where, "producer fatal error: rebuilding it (transactional.id %s)", c->txn_id);
    drop_handles(c);
    rd_kafka_destroy(c->producer);
    c->producer = new_producer(c, err, errlen);
    if (c->producer)
        known_topics(c);
    return c->producer ? 0 : KS_ERR_IO;
}

void ks_collector_free(ks_collector *c)
{
    if (!c->topo)
        return; /* never initialised */
    if (c->producer) {
        rd_kafka_flush(c->producer, 10000);
        drop_handles(c);
        rd_kafka_destroy(c->producer);
        c->producer = NULL;
    }
    for (size_t s = 0; c->changelog_topics && s < c->topo->pipeline->store_count; s++)
        free(c->changelog_topics[s]);
    free(c->changelog_topics);
    c->changelog_topics = NULL;
}
