/*
 * outbox_results.c - see outbox_results.h.
 *
 * Exactly-once-ish: a result is applied, then (every poll burst) the next
 * offset is written to the outbox env. A crash in between replays a few
 * results; each move is a CAS that refuses to leave a terminal status, so
 * the replay changes nothing.
 */
#include "outbox/outbox_results.h"

#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kafka/kafka.h"
#include "kafka/topics.h"
#include "base/log.h"

#define WHERE "outbox-results"
#define MAX_PARTS 1024

struct ks_outbox_results {
    ks_outbox *ob;
    const ks_pipeline *p;
    char topic[512];
    ks_store_db *meta; /* "results_from:<partition>" -> next offset */
    rd_kafka_t *admin, *cons;
    pthread_t thread;
    volatile int stop;
    int started;
    int32_t parts;      /* assigned partitions; 0: not assigned yet */
    int64_t next[MAX_PARTS]; /* next offset per partition; -1: none applied */
    int dirty;
    int warned;
    long applied, replays, unknown, early;
};

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void ks_outbox_results_topic(const ks_pipeline *p, char *buf, size_t len)
{
    if (p->outbox && p->outbox->results_topic)
        snprintf(buf, len, "%s", p->outbox->results_topic);
    else
        snprintf(buf, len, "%s-outbox-results", p->application);
}

/* --- position in the outbox env ------------------------------------- */

/* The meta key of partition `part`'s position: "results_from:<p>" for the
 * default topic (as 0.1.x wrote it), "results_from:<topic>:<p>" for a
 * configured one, so that a renamed topic starts from its beginning (its
 * results replay harmlessly) instead of from another topic's offsets. */
static ks_bytes pos_key(const ks_outbox_results *r, int32_t part, char *k, size_t klen)
{
    const ks_cfg_outbox *o = r->p->outbox;
    int n = o && o->results_topic
                ? snprintf(k, klen, "results_from:%s:%d", r->topic, (int)part)
                : snprintf(k, klen, "results_from:%d", (int)part);
    return (ks_bytes){k, (size_t)n};
}

static int64_t pos_get(ks_outbox_results *r, int32_t part)
{
    char k[320];
    ks_bytes key = pos_key(r, part, k, sizeof k), v;
    int64_t off = -1;
    ks_store_env *env = ks_outbox_env(r->ob);
    ks_outbox_lock(r->ob);
    if (ks_store_begin(env) == 0) {
        if (ks_store_get(r->meta, key, &v) == 0 && v.len == 8)
            off = ks_int64_decode(v.data);
        ks_store_abort(env);
    }
    ks_outbox_unlock(r->ob);
    return off;
}

static void pos_save(ks_outbox_results *r)
{
    if (!r->dirty)
        return;
    ks_store_env *env = ks_outbox_env(r->ob);
    ks_outbox_lock(r->ob);
    int rc = ks_store_begin(env);
    for (int32_t p = 0; rc == 0 && p < r->parts; p++) {
        if (r->next[p] < 0)
            continue;
        char k[320];
        unsigned char b[8];
        ks_int64_encode(r->next[p], b);
        ks_bytes key = pos_key(r, p, k, sizeof k);
        rc = ks_store_put(r->meta, key, (ks_bytes){b, 8});
    }
    if (rc == 0)
        rc = ks_store_commit(env);
    else
        ks_store_abort(env);
    ks_outbox_unlock(r->ob);
    if (rc == 0)
        r->dirty = 0;
}

/* --- Kafka ----------------------------------------------------------- */

/* Make sure the topic exists and assign every partition from the stored
 * position. 0 when assigned. */
static int assign(ks_outbox_results *r)
{
    char err[1024];
    ks_topic_spec spec = {.topic = r->topic, .what = "outbox results", .create = 1,
                          .partitions = 1, .replication = r->p->replication_factor,
                          .internal = 1};
    ks_topic_found f;
    int n = ks_topic_ensure(r->admin, &spec, &f, err, sizeof err) == 0 ? f.partitions : -1;
    if (n < 0) {
        if (!r->warned++)
            ks_warn(WHERE, "%s; results wait in Kafka, retrying", err);
        return -1;
    }
    if (n > MAX_PARTS)
        n = MAX_PARTS;
    if (n == r->parts)
        return 0;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n);
    for (int32_t p = 0; p < n; p++) {
        if (p >= r->parts)
            r->next[p] = pos_get(r, p);
        rd_kafka_topic_partition_list_add(l, r->topic, p)->offset =
            r->next[p] >= 0 ? r->next[p] : RD_KAFKA_OFFSET_BEGINNING;
    }
    rd_kafka_resp_err_t e = rd_kafka_assign(r->cons, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (e) {
        ks_warn(WHERE, "assign %s: %s", r->topic, rd_kafka_err2str(e));
        return -1;
    }
    ks_info(WHERE, "reading results from %s (%d partition%s)", r->topic, n,
            n == 1 ? "" : "s");
    r->parts = n;
    r->warned = 0;
    return 0;
}

/* Apply one result record to its row. */
static void apply(ks_outbox_results *r, const rd_kafka_message_t *m)
{
    if (!m->key || m->key_len != KS_OUTBOX_ID_LEN || !m->payload) {
        ks_warn(WHERE, "%s [%d] offset %lld: not a result record (key must be an event id)",
                r->topic, (int)m->partition, (long long)m->offset);
        return;
    }
    char id[KS_OUTBOX_ID_LEN + 1];
    memcpy(id, m->key, KS_OUTBOX_ID_LEN);
    id[KS_OUTBOX_ID_LEN] = '\0';
    json_error_t jerr;
    json_t *j = json_loadb(m->payload, m->len, 0, &jerr);
    const char *status = j ? json_string_value(json_object_get(j, "status")) : NULL;
    int ok = status && strcmp(status, "SUCCESS") == 0;
    if (!status || (!ok && strcmp(status, "PUSHED_FAILURE") != 0)) {
        ks_warn(WHERE, "%s [%d] offset %lld: result for %s has no status SUCCESS or "
                       "PUSHED_FAILURE; ignored",
                r->topic, (int)m->partition, (long long)m->offset, id);
        json_decref(j);
        return;
    }
    json_t *res = json_object_get(j, "result");
    char *text = res && !json_is_null(res) ? json_dumps(res, JSON_COMPACT | JSON_ENCODE_ANY)
                                           : NULL;
    json_decref(j);
    ks_outbox_status was = KS_OUTBOX_PENDING;
    int rc = ks_outbox_start_processing(r->ob, id, &was);
    if (rc == KS_ERR_NOT_FOUND) {
        r->unknown++; /* another outbox's event on a shared topic */
        ks_debug(WHERE, "result for unknown event %s ignored", id);
    } else if (rc == KS_ERR_STATE && ks_outbox_status_terminal(was)) {
        r->replays++; /* already applied: the CAS keeps it where it is */
    } else if (rc == KS_ERR_STATE && was != KS_OUTBOX_UNDER_PROCESSING) {
        r->early++;
        ks_warn(WHERE, "result for event %s while its row is %s; left as is", id,
                ks_outbox_status_name(was));
    } else if (rc == 0 || rc == KS_ERR_STATE) {
        rc = ks_outbox_finish(r->ob, id, ok, text, &was);
        if (rc == 0)
            r->applied++;
        else if (rc == KS_ERR_STATE)
            r->replays++;
        else
            ks_warn(WHERE, "event %s: cannot record the result: %s", id,
                    ks_outbox_last_error(r->ob));
    } else {
        ks_warn(WHERE, "event %s: cannot start processing: %s", id,
                ks_outbox_last_error(r->ob));
    }
    free(text);
}

static void *results_main(void *arg)
{
    ks_outbox_results *r = arg;
    int64_t last_check = 0, last_report = 0;
    long reported = -1;
    while (!r->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        if (r->parts == 0 || now - last_check > 10000) {
            last_check = now;
            if (assign(r) != 0 && r->parts == 0) {
                for (int i = 0; i < 20 && !r->stop; i++)
                    sleep_ms(50);
                continue;
            }
        }
        for (int burst = 0; burst < 500 && !r->stop; burst++) {
            rd_kafka_message_t *m = rd_kafka_consumer_poll(r->cons, burst ? 0 : 100);
            if (!m)
                break;
            if (!m->err && m->partition >= 0 && m->partition < r->parts &&
                m->offset >= r->next[m->partition]) {
                apply(r, m);
                r->next[m->partition] = m->offset + 1;
                r->dirty = 1;
            } else if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                ks_debug(WHERE, "consumer: %s", rd_kafka_message_errstr(m));
            }
            rd_kafka_message_destroy(m);
        }
        pos_save(r);
        if (now - last_report > 5000 && r->applied != reported) {
            last_report = now;
            reported = r->applied;
            ks_info(WHERE, "results applied: %ld (%ld replays left alone, %ld unknown, %ld "
                           "early)",
                    r->applied, r->replays, r->unknown, r->early);
        }
    }
    pos_save(r);
    return NULL;
}

int ks_outbox_results_start(ks_outbox *ob, const ks_pipeline *p, ks_outbox_results **out,
                            char *err, size_t errlen)
{
    *out = NULL;
    ks_outbox_results *r = calloc(1, sizeof *r);
    if (!r)
        return KS_ERR_NOMEM;
    r->ob = ob;
    r->p = p;
    ks_outbox_results_topic(p, r->topic, sizeof r->topic);
    for (int i = 0; i < MAX_PARTS; i++)
        r->next[i] = -1;
    /* under the lock: the dispatcher's thread already uses the env */
    ks_outbox_lock(ob);
    int rc = ks_store_db_open(ks_outbox_env(ob), "results_meta", &r->meta);
    if (rc)
        snprintf(err, errlen, "outbox results: cannot open results_meta: %s",
                 ks_store_last_error(ks_outbox_env(ob)));
    ks_outbox_unlock(ob);
    if (rc) {
        free(r);
        return rc;
    }
    if (!(r->admin = ks_kafka_admin_client(p, err, errlen))) {
        free(r);
        return KS_ERR_IO;
    }
    /* assign-only; the group id only keeps librdkafka quiet, nothing is
     * committed to it (the position lives in the outbox env) */
    r->cons = ks_kafka_side_consumer(p, "outbox-results", NULL, r, "outbox results", err,
                                     errlen);
    if (!r->cons || pthread_create(&r->thread, NULL, results_main, r) != 0) {
        if (r->cons)
            snprintf(err, errlen, "outbox results: cannot start its thread");
        ks_outbox_results_stop(r);
        return KS_ERR_IO;
    }
    r->started = 1;
    *out = r;
    return 0;
}

void ks_outbox_results_stop(ks_outbox_results *r)
{
    if (!r)
        return;
    r->stop = 1;
    if (r->started)
        pthread_join(r->thread, NULL);
    if (r->cons) {
        rd_kafka_assign(r->cons, NULL);
        rd_kafka_destroy(r->cons);
    }
    if (r->admin)
        rd_kafka_destroy(r->admin);
    if (r->started)
        ks_info(WHERE, "stopped: %ld results applied, %ld replays left alone", r->applied,
                r->replays);
    free(r);
}
