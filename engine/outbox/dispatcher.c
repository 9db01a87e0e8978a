/*
 * dispatcher.c - see dispatcher.h.
 *
 * One batch at a time: claim (PENDING -> DISPATCHING, one txn), assign
 * partitions, remember each partition's end offset ("probe_from"), produce,
 * wait for every delivery report, then complete each row. Because a batch
 * is finished before the next is claimed, the rows a crashed process left
 * DISPATCHING all belong to its last batch, and the probe_from offsets
 * written before that batch bound where their records can be. Until every
 * such orphan is decided, later batches never move probe_from forward:
 * a restarted process dispatches other users' events at once, and a
 * probe_from past an orphan's record would make the probe miss it and
 * publish it twice.
 *
 * Probe of a stale row (claimed longer than `stale_after` ago): read its
 * user's partition from probe_from to the current end, looking for the
 * ks.event_id header. Found -> PUBLISHED at that offset; absent ->
 * PENDING. A probe that cannot read Kafka decides nothing.
 */
#include "outbox/dispatcher.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/fault.h"
#include "kafka/kafka.h"
#include "outbox/kafka_probe.h"
#include "base/log.h"
#include "outbox/partition_assign.h"

#define BATCH_MAX 500
#define EVENT_ID_HEADER "ks.event_id"
#define USER_HEADER "ks.user"
#define WHERE "outbox-dispatcher"

struct ks_dispatcher {
    ks_outbox *ob;
    const ks_pipeline *p;
    const ks_cfg_outbox *cfg;
    ks_assigner *as;
    rd_kafka_t *prod, *probe;
    pthread_t thread;
    volatile int stop;
    int synced;    /* the assigner read the claims log since the last error */
    int orphans;   /* rows may be DISPATCHING that no batch of ours is sending */
    int warned;    /* Kafka unreachable was logged */
    long published;
    long probe_found, probe_absent; /* the stale probe's decisions */
    int64_t next_probe_ms; /* after a failed probe: not before this */
    ks_metrics *metrics;   /* NULL: none */
    int64_t metrics_ms;    /* when they were last published */
};

typedef struct result {
    volatile int done;
    rd_kafka_resp_err_t err;
    int32_t partition;
    int64_t offset;
} result;

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    (void)opaque;
    result *r = m->_private;
    r->err = m->err;
    r->partition = m->partition;
    r->offset = m->offset;
    r->done = 1;
}

/* --- probe_from bookkeeping ------------------------------------------ */

static int probe_from_put(ks_dispatcher *d, int32_t part, int64_t off)
{
    char k[32];
    unsigned char b[8];
    snprintf(k, sizeof k, "probe_from:%d", (int)part);
    ks_int64_encode(off, b);
    return ks_outbox_meta_put(d->ob, k, b, sizeof b);
}

/* -1 when never written. */
static int64_t probe_from_get(ks_dispatcher *d, int32_t part)
{
    char k[32];
    unsigned char b[8];
    size_t len = 0;
    snprintf(k, sizeof k, "probe_from:%d", (int)part);
    if (ks_outbox_meta_get(d->ob, k, b, sizeof b, &len) != 0 || len != sizeof b)
        return -1;
    return ks_int64_decode(b);
}

/* --- Kafka clients --------------------------------------------------- */

static int make_clients(ks_dispatcher *d, char *err, size_t errlen)
{
    return ks_outbox_kafka_clients(d->p, on_delivery, &d->prod, &d->probe, err, errlen);
}

/* --- the stale probe ------------------------------------------------- */

/* Probe one partition for the stale rows `rows` (all of it). Returns 0
 * when every row was decided, -1 when Kafka did not answer. */
static int probe_partition(ks_dispatcher *d, int32_t part, ks_outbox_event **rows,
                           size_t n)
{
    char err[1024];
    int64_t lo, hi;
    int count = ks_kafka_partition_count(d->prod, d->cfg->topic, 5000, err, sizeof err);
    if (count >= 0 && part >= count) {
        /* the crashed process died while growing the topic: a partition
         * that does not exist holds nothing */
        for (size_t i = 0; i < n; i++)
            ks_outbox_requeue(d->ob, rows[i]->id,
                              "stale dispatch: its partition did not exist yet");
        ks_info(WHERE,
                "stale dispatch probe %s [%d] does not exist (%d partitions), "
                "nothing was published, %zu absent -> PENDING",
                d->cfg->topic, (int)part, count, n);
        return 0;
    }
    rd_kafka_resp_err_t e =
        rd_kafka_query_watermark_offsets(d->prod, d->cfg->topic, part, &lo, &hi, 5000);
    if (e) {
        ks_warn(WHERE, "stale dispatch probe %s [%d]: watermarks: %s; %zu rows stay "
                       "DISPATCHING until Kafka answers",
                d->cfg->topic, (int)part, rd_kafka_err2str(e), n);
        return -1;
    }
    int64_t from = probe_from_get(d, part);
    if (from < lo)
        from = lo; /* never recorded: from the start of the partition */
    ks_probe_hit *f = NULL;
    size_t nf = 0;
    if (from < hi && ks_probe_read(d->probe, d->cfg->topic, part, from, hi, EVENT_ID_HEADER,
                                   &f, &nf, err, sizeof err) != 0) {
        ks_warn(WHERE, "%s; %zu rows stay DISPATCHING", err, n);
        return -1;
    }
    size_t hit = 0, miss = 0;
    for (size_t i = 0; i < n; i++) {
        ks_outbox_event *ev = rows[i];
        int64_t at = -1;
        for (size_t j = 0; j < nf && at < 0; j++)
            if (strcmp(f[j].id, ev->id) == 0)
                at = f[j].offset;
        if (at >= 0) {
            ks_outbox_mark_published(d->ob, ev->id, part, at, NULL);
            ks_debug(WHERE, "probe: event %s found at %s [%d] offset %lld -> PUBLISHED",
                     ev->id, d->cfg->topic, (int)part, (long long)at);
            hit++;
            d->probe_found++;
        } else {
            ks_outbox_requeue(d->ob, ev->id, "stale dispatch: the probe found no record");
            ks_debug(WHERE, "probe: event %s absent from %s [%d] -> PENDING", ev->id,
                     d->cfg->topic, (int)part);
            miss++;
            d->probe_absent++;
        }
    }
    ks_info(WHERE,
            "stale dispatch probe %s [%d] offsets %lld..%lld: %zu found -> PUBLISHED, "
            "%zu absent -> PENDING",
            d->cfg->topic, (int)part, (long long)from, (long long)hi, hit, miss);
    free(f);
    return 0;
}

static void resolve_stale(ks_dispatcher *d)
{
    ks_outbox_event *rows;
    size_t n;
    if (ks_outbox_now_ms() < d->next_probe_ms)
        return;
    int64_t before = ks_outbox_now_ms() - d->cfg->stale_after_ms;
    if (ks_outbox_stale(d->ob, before, 10000, &rows, &n) != 0 || n == 0) {
        if (n == 0)
            ks_outbox_events_free(rows, 0);
        return;
    }
    ks_outbox_event **group = calloc(n, sizeof *group);
    int32_t *parts = calloc(n, sizeof *parts);
    for (size_t i = 0; group && parts && i < n; i++)
        if (ks_assigner_lookup(d->as, rows[i].user, &parts[i]) != 0) {
            /* partitions are assigned before anything is produced */
            ks_outbox_requeue(d->ob, rows[i].id,
                              "stale dispatch: user had no partition, nothing was sent");
            ks_info(WHERE, "stale dispatch: event %s of user %s had no partition yet "
                           "-> PENDING",
                    rows[i].id, rows[i].user);
            parts[i] = -1;
        }
    for (size_t i = 0; group && parts && i < n; i++) {
        if (parts[i] < 0)
            continue;
        int32_t part = parts[i];
        size_t g = 0;
        for (size_t j = i; j < n; j++)
            if (parts[j] == part) {
                group[g++] = &rows[j];
                parts[j] = -1;
            }
        if (probe_partition(d, part, group, g) != 0)
            d->next_probe_ms = ks_outbox_now_ms() + 1000; /* Kafka did not answer */
    }
    free(group);
    free(parts);
    ks_outbox_events_free(rows, n);
}

/* --- one batch ------------------------------------------------------- */

/* Retry policy for one failed row. */
static void failed_row(ks_dispatcher *d, const ks_outbox_event *ev, int32_t part,
                       rd_kafka_resp_err_t e)
{
    char why[600];
    snprintf(why, sizeof why, "publish to %s [%d]: %s", ev->topic, (int)part,
             rd_kafka_err2str(e));
    if (e == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION && d->cfg->recover_unknown_partition) {
        char err[1024];
        /* the mapping says the partition must exist: grow, then retry
         * without giving up on the row */
        if (ks_assigner_grow(d->as, part + 1, err, sizeof err) != 0)
            ks_warn(WHERE, "unknown partition recovery: %s", err);
        ks_outbox_requeue(d->ob, ev->id, why);
        ks_warn(WHERE, "event %s: %s; topic checked, requeued", ev->id, why);
        return;
    }
    if (ev->attempts >= d->cfg->max_attempts) {
        ks_outbox_mark_failed(d->ob, ev->id, why);
        ks_error(WHERE, "event %s: %s; attempt %d of %d -> FAILURE", ev->id, why,
                 (int)ev->attempts, (int)d->cfg->max_attempts);
    } else {
        ks_outbox_requeue(d->ob, ev->id, why);
    }
}

/* Make the producer's metadata show `need` partitions: the assigner may
 * have just grown the topic, and producing to a partition the producer
 * does not know fails at once. */
static int producer_knows(ks_dispatcher *d, int32_t need, char *err, size_t errlen)
{
    for (int i = 0; i < 100; i++) {
        int n = ks_kafka_partition_count(d->prod, d->cfg->topic, 5000, err, errlen);
        if (n < 0)
            return -1;
        if (n >= need)
            return 0;
        sleep_ms(100);
    }
    snprintf(err, errlen, "%s: metadata does not show %d partitions yet", d->cfg->topic,
             (int)need);
    return -1;
}

/* Record where each partition of the batch ends before producing; while
 * orphans wait for their probe, an existing probe_from stays where it is. */
static int note_probe_from(ks_dispatcher *d, const int32_t *parts, size_t n, char *err,
                           size_t errlen)
{
    int32_t need = 0;
    for (size_t i = 0; i < n; i++)
        if (parts[i] + 1 > need)
            need = parts[i] + 1;
    if (producer_knows(d, need, err, errlen) != 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = parts[j] == parts[i];
        if (seen)
            continue;
        int64_t lo, hi;
        rd_kafka_resp_err_t e =
            rd_kafka_query_watermark_offsets(d->prod, d->cfg->topic, parts[i], &lo, &hi, 5000);
        if (e) {
            snprintf(err, errlen, "%s [%d]: watermarks: %s", d->cfg->topic, (int)parts[i],
                     rd_kafka_err2str(e));
            return -1;
        }
        if (d->orphans && probe_from_get(d, parts[i]) >= 0)
            continue;
        if (probe_from_put(d, parts[i], hi) != 0) {
            snprintf(err, errlen, "outbox: %s", ks_outbox_last_error(d->ob));
            return -1;
        }
    }
    return 0;
}

static void dispatch(ks_dispatcher *d, ks_outbox_event *rows, size_t n)
{
    char err[1024] = "";
    const char **users = calloc(n, sizeof *users);
    int32_t *parts = calloc(n, sizeof *parts);
    result *res = calloc(n, sizeof *res);
    if (!users || !parts || !res)
        goto requeue_all;
    for (size_t i = 0; i < n; i++)
        users[i] = rows[i].user;
    if (ks_assigner_assign(d->as, users, n, parts, err, sizeof err) != 0 ||
        note_probe_from(d, parts, n, err, sizeof err) != 0) {
        ks_warn(WHERE, "cannot assign partitions: %s; batch requeued", err);
        d->synced = 0;
        goto requeue_all;
    }
    for (size_t i = 0; i < n; i++) {
        const ks_outbox_event *ev = &rows[i];
        const char *key = ev->key ? ev->key : ev->user;
        rd_kafka_resp_err_t e = rd_kafka_producev(
            d->prod, RD_KAFKA_V_TOPIC(ev->topic), RD_KAFKA_V_PARTITION(parts[i]),
            RD_KAFKA_V_KEY(key, strlen(key)), RD_KAFKA_V_VALUE(ev->payload, ev->payload_len),
            RD_KAFKA_V_HEADER(EVENT_ID_HEADER, ev->id, KS_OUTBOX_ID_LEN),
            RD_KAFKA_V_HEADER(USER_HEADER, ev->user, (ssize_t)strlen(ev->user)),
            RD_KAFKA_V_OPAQUE(&res[i]), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_END);
        if (e) {
            res[i].err = e;
            res[i].done = 1;
        }
    }
    ks_fault_point(KS_FAULT_DISPATCH_PRODUCED);
    /* every report arrives within message.timeout.ms */
    rd_kafka_flush(d->prod, 30000);
    ks_fault_point(KS_FAULT_DISPATCH_ACKED);
    for (size_t i = 0; i < n; i++) {
        if (!res[i].done)
            failed_row(d, &rows[i], parts[i], RD_KAFKA_RESP_ERR__TIMED_OUT);
        else if (res[i].err)
            failed_row(d, &rows[i], parts[i], res[i].err);
        else if (ks_outbox_mark_published(d->ob, rows[i].id, res[i].partition,
                                          res[i].offset, NULL) == 0)
            d->published++;
        else
            d->orphans = 1; /* left DISPATCHING: the probe decides it later */
    }
    goto out;
requeue_all:
    for (size_t i = 0; i < n; i++)
        ks_outbox_requeue(d->ob, rows[i].id, "Kafka unreachable while assigning partitions");
    sleep_ms(500);
out:
    free(users);
    free(parts);
    free(res);
}

/* The outbox's gauges and counters, about once a second (metrics.h;
 * docs/operations.md lists them). */
static void publish_metrics(ks_dispatcher *d)
{
    int64_t now = ks_outbox_now_ms();
    if (!d->metrics || now - d->metrics_ms < 1000)
        return;
    d->metrics_ms = now;
    uint64_t active, total, entered[KS_OUTBOX_STATUS_COUNT];
    if (ks_outbox_sizes(d->ob, &active, &total, entered) != 0)
        return;
    char labels[512];
    snprintf(labels, sizeof labels, "outbox=\"%s\"", d->cfg->name);
    ks_metrics_set(d->metrics, "kstreams_outbox_backlog", labels, (double)active);
    ks_metrics_set(d->metrics, "kstreams_outbox_rows", labels, (double)total);
    for (int s = 0; s < KS_OUTBOX_STATUS_COUNT; s++) {
        snprintf(labels, sizeof labels, "outbox=\"%s\",status=\"%s\"", d->cfg->name,
                 ks_outbox_status_name((ks_outbox_status)s));
        ks_metrics_set(d->metrics, "kstreams_outbox_entered_total", labels,
                       (double)entered[s]);
    }
    ks_outbox_probe_metrics(d->metrics, d->cfg->name, d->probe_found, d->probe_absent);
}

/* --- the thread ------------------------------------------------------ */

/* 1 while some row is DISPATCHING outside a batch of ours (between
 * batches every row we claimed has been completed or requeued). */
static int orphans_left(ks_dispatcher *d)
{
    ks_outbox_event *rows;
    size_t n = 0;
    if (ks_outbox_stale(d->ob, INT64_MAX, 1, &rows, &n) != 0)
        return 1; /* cannot tell: keep probe_from where it is */
    ks_outbox_events_free(rows, n);
    return n > 0;
}

static void *run(void *arg)
{
    ks_dispatcher *d = arg;
    char err[1024];
    long reported = 0;
    int64_t last_report = ks_outbox_now_ms();
    while (!d->stop) {
        publish_metrics(d); /* also while Kafka is out of reach */
        if (!d->synced) {
            if (ks_assigner_sync(d->as, err, sizeof err) != 0) {
                if (!d->warned)
                    ks_warn(WHERE, "Kafka unreachable, events are kept in the outbox: %s",
                            err);
                d->warned = 1;
                for (int i = 0; i < 20 && !d->stop; i++) {
                    publish_metrics(d);
                    sleep_ms(50);
                }
                continue;
            }
            if (d->warned)
                ks_info(WHERE, "Kafka reachable again, dispatching");
            d->synced = 1;
            d->warned = 0;
        }
        resolve_stale(d);
        if (d->orphans && !(d->orphans = orphans_left(d)))
            ks_debug(WHERE, "no event is left DISPATCHING by a previous process");
        ks_outbox_event *rows;
        size_t n;
        if (ks_outbox_claim_pending(d->ob, BATCH_MAX, &rows, &n) != 0) {
            ks_error(WHERE, "claim: %s", ks_outbox_last_error(d->ob));
            sleep_ms(500);
            continue;
        }
        if (n)
            dispatch(d, rows, n);
        ks_outbox_events_free(rows, n);
        if (d->published != reported && ks_outbox_now_ms() - last_report > 1000) {
            ks_info(WHERE, "%ld events published so far", d->published);
            reported = d->published;
            last_report = ks_outbox_now_ms();
        }
        if (!n)
            sleep_ms(50);
    }
    return NULL;
}

int ks_dispatcher_start(ks_outbox *ob, const ks_pipeline *p, const ks_cfg_outbox *cfg,
                        ks_metrics *metrics, ks_dispatcher **out, char *err, size_t errlen)
{
    *out = NULL;
    ks_dispatcher *d = calloc(1, sizeof *d);
    if (!d)
        return KS_ERR_NOMEM;
    d->ob = ob;
    d->p = p;
    d->cfg = cfg;
    d->metrics = metrics;
    d->orphans = 1; /* a previous process may have died mid-batch */
    int rc = ks_assigner_new(ob, p, cfg->topic, (int)cfg->max_users_per_partition, &d->as,
                             err, errlen);
    if (rc == 0)
        rc = make_clients(d, err, errlen);
    if (rc == 0 && pthread_create(&d->thread, NULL, run, d) != 0) {
        snprintf(err, errlen, "outbox dispatcher: cannot start a thread");
        rc = KS_ERR_NOMEM;
    }
    if (rc) {
        ks_outbox_kafka_clients_free(d->prod, d->probe, 0);
        ks_assigner_free(d->as);
        free(d);
        return rc;
    }
    *out = d;
    return 0;
}

void ks_dispatcher_stop(ks_dispatcher *d)
{
    if (!d)
        return;
    d->stop = 1;
    pthread_join(d->thread, NULL);
    ks_outbox_kafka_clients_free(d->prod, d->probe, 1);
    ks_assigner_free(d->as);
    ks_info(WHERE, "stopped after publishing %ld events", d->published);
    free(d);
}
