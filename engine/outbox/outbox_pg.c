/*
 * outbox_pg.c - see outbox_pg.h.
 *
 * One batch at a time, like the LMDB dispatcher: claim (one UPDATE, the
 * rows move PENDING -> DISPATCHING and attempts grows), choose each row's
 * partition (murmur2 of the key, as Kafka's Java client does; or, with
 * max_users_per_partition, the aggregate's slot from ks_user_partitions,
 * the topic grown to hold it: outbox_pg_assign.h) and record
 * it with the partition's end offset ("probe_from") in the row, produce,
 * wait for every delivery report, then complete each row with a
 * compare-and-set on (event_id, DISPATCHING, attempts). A row that stays
 * DISPATCHING (kstreams died, PostgreSQL went away) is probed once it is
 * older than stale_after: its partition is read from its own probe_from,
 * so no bookkeeping outside the row is needed, whichever process claimed
 * it. Between batches a process has nothing in flight, so what it probes
 * is never its own live produce; another process's batch finishes within
 * the producer's message timeout (15 s), below the 30 s default of
 * stale_after.
 *
 * Every statement is parameterised; only the table name is spliced in,
 * and config_outbox.c allows it to be [A-Za-z_][A-Za-z0-9_]* only.
 */
#include "outbox/outbox_pg.h"

#include <ctype.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fault.h"
#include "kafka/kafka.h"
#include "outbox/kafka_probe.h"
#include "base/log.h"
#include "outbox/outbox_pg_assign.h"
#include "outbox/outbox_pg_sql.h"
#include "pg/pq_dl.h"
#include "base/clock.h"

#define BATCH_MAX 100
#define EVENT_ID_HEADER "ks.event_id"
#define USER_HEADER "ks.user"
#define WHERE "outbox-pg"

struct ks_pg_dispatcher {
    const ks_pipeline *p;
    const ks_cfg_outbox *cfg;
    char *dsn; /* owned; never logged */
    PGconn *conn;
    rd_kafka_t *prod, *probe;
    pthread_t thread;
    volatile int stop;
    int pg_warned, kafka_warned;
    long connects; /* successful connections so far */
    long published, failed, requeued, probe_found, probe_absent;
    int64_t next_stale_ms;
    ks_metrics *metrics;
    int64_t metrics_ms;
    ks_pg_sql sql;
    ks_pg_assign *assign; /* sequential assignment; NULL: murmur2 */
};

typedef struct row {
    char *event_id, *aggregate, *topic, *headers;
    unsigned char *key, *payload; /* PQunescapeBytea: PQfreemem */
    size_t key_len, payload_len;
    int attempts;
    int32_t partition;
    int64_t probe_from;
    int bad; /* its event id cannot be a header we can probe for: FAILURE */
    int count; /* partitions of its topic */
    /* the delivery report */
    volatile int done;
    rd_kafka_resp_err_t err;
    int64_t offset;
} row;

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk, (void)opaque;
    row *r = m->_private;
    r->err = m->err;
    r->offset = m->offset;
    r->done = 1;
}

/* --- PostgreSQL ------------------------------------------------------ */

static int pg_ok(ks_pg_dispatcher *d)
{
    return d->conn && PQstatus(d->conn) == CONNECTION_OK;
}

/* Connect and LISTEN on the table's channel; 0 or -1 (warned once). */
static int pg_connect(ks_pg_dispatcher *d)
{
    if (d->conn)
        PQfinish(d->conn);
    d->conn = PQconnectdb(d->dsn);
    char sql[128];
    snprintf(sql, sizeof sql, "LISTEN %s", d->cfg->table);
    PGresult *r = PQstatus(d->conn) == CONNECTION_OK ? PQexec(d->conn, sql) : NULL;
    int ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!ok) {
        if (!d->pg_warned) /* libpq's message names host and database, never the password */
            ks_warn(WHERE, "PostgreSQL unreachable, retrying every second: %s",
                    PQerrorMessage(d->conn));
        d->pg_warned = 1;
        return -1;
    }
    ks_info(WHERE, "%s PostgreSQL %s/%s, table %s", d->connects++ ? "reconnected to" :
            "connected to", PQhost(d->conn), PQdb(d->conn), d->cfg->table);
    d->pg_warned = 0;
    return 0;
}

/* Run one parameterised statement; NULL (logged) on failure. */
static PGresult *pg_exec(ks_pg_dispatcher *d, const char *sql, int n, const char *const *v,
                         ExecStatusType want)
{
    PGresult *r = PQexecParams(d->conn, sql, n, NULL, v, NULL, NULL, 0);
    if (PQresultStatus(r) != want) {
        ks_warn(WHERE, "PostgreSQL: %s", PQresultErrorMessage(r));
        PQclear(r);
        return NULL;
    }
    return r;
}

/* A compare-and-set update of one row's status: 1 moved, 0 the row was not
 * where we thought (advanced, or taken over by a probe), -1 error. */
static int pg_move(ks_pg_dispatcher *d, const char *sql, int n, const char *const *v)
{
    PGresult *r = pg_exec(d, sql, n, v, PGRES_COMMAND_OK);
    if (!r)
        return -1;
    int moved = atoi(PQcmdTuples(r)) > 0;
    PQclear(r);
    return moved;
}

static int mark_published(ks_pg_dispatcher *d, const char *id, int attempts, int32_t part,
                          int64_t off)
{
    char a[16], p[16], o[24];
    snprintf(a, sizeof a, "%d", attempts);
    snprintf(p, sizeof p, "%d", (int)part);
    snprintf(o, sizeof o, "%lld", (long long)off);
    const char *v[] = {id, a, p, o};
    int m = pg_move(d, d->sql.done, 4, v);
    if (m == 0) /* never backward: whoever moved it knew more */
        ks_info(WHERE, "event %s was no longer DISPATCHING attempt %d; left as it is", id,
                attempts);
    return m;
}

static int requeue(ks_pg_dispatcher *d, const char *id, int attempts, const char *why,
                   int give_back)
{
    char a[16];
    snprintf(a, sizeof a, "%d", attempts);
    const char *v[] = {id, a, why, give_back ? "1" : "0"};
    int m = pg_move(d, d->sql.requeue, 4, v);
    d->requeued += m > 0;
    return m;
}

/* --- Kafka ----------------------------------------------------------- */

static int make_clients(ks_pg_dispatcher *d, char *err, size_t errlen)
{
    return ks_outbox_kafka_clients(d->p, on_delivery, &d->prod, &d->probe, err, errlen);
}

/* 0 when the broker answers for the pipeline's topic. */
static int kafka_ok(ks_pg_dispatcher *d)
{
    char err[512];
    if (ks_kafka_partition_count(d->prod, d->cfg->topic, 5000, err, sizeof err) > 0) {
        if (d->kafka_warned)
            ks_info(WHERE, "Kafka reachable again, dispatching");
        d->kafka_warned = 0;
        return 0;
    }
    if (!d->kafka_warned)
        ks_warn(WHERE, "Kafka unreachable, events stay PENDING in PostgreSQL: %s", err);
    d->kafka_warned = 1;
    return -1;
}

/* --- the stale probe ------------------------------------------------- */

/* Decide the stale rows r[idx[0..n)] (all of one topic and partition). */
static void probe_group(ks_pg_dispatcher *d, PGresult *r, const int *idx, int n)
{
    const char *topic = PQgetvalue(r, idx[0], 1);
    int32_t part = (int32_t)atoi(PQgetvalue(r, idx[0], 2));
    int64_t from = INT64_MAX, lo, hi;
    for (int i = 0; i < n; i++) {
        int64_t f = strtoll(PQgetvalue(r, idx[i], 3), NULL, 10);
        if (f < from)
            from = f;
    }
    char err[1024] = "";
    rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(d->prod, topic, part, &lo, &hi, 5000);
    if (e)
        snprintf(err, sizeof err, "watermarks: %s", rd_kafka_err2str(e));
    if (from < lo)
        from = lo; /* retention removed the start: what is left is all there is */
    ks_probe_hit *f = NULL;
    size_t nf = 0;
    if (e || (from < hi && ks_probe_read(d->probe, topic, part, from, hi, EVENT_ID_HEADER, &f,
                                         &nf, err, sizeof err) != 0)) {
        ks_warn(WHERE, "stale dispatch probe %s [%d]: %s; %d rows stay DISPATCHING", topic,
                (int)part, err, n);
        d->next_stale_ms = ks_mono_ms() + 1000;
        return;
    }
    int hit = 0, miss = 0;
    for (int i = 0; i < n; i++) {
        const char *id = PQgetvalue(r, idx[i], 0);
        int attempts = atoi(PQgetvalue(r, idx[i], 4));
        int64_t at = -1;
        for (size_t j = 0; j < nf && at < 0; j++)
            if (strcmp(f[j].id, id) == 0)
                at = f[j].offset;
        if (at >= 0 && mark_published(d, id, attempts, part, at) > 0) {
            hit++;
            d->probe_found++;
        } else if (at < 0 &&
                   requeue(d, id, attempts, "stale dispatch: the probe found no record", 0) > 0) {
            miss++;
            d->probe_absent++;
        }
    }
    ks_info(WHERE,
            "stale dispatch probe %s [%d] offsets %lld..%lld: %d found -> PUBLISHED, "
            "%d absent -> PENDING",
            topic, (int)part, (long long)from, (long long)hi, hit, miss);
    free(f);
}

static void resolve_stale(ks_pg_dispatcher *d)
{
    if (ks_mono_ms() < d->next_stale_ms)
        return;
    d->next_stale_ms = ks_mono_ms() + 1000;
    char iv[48];
    snprintf(iv, sizeof iv, "%lld milliseconds", (long long)d->cfg->stale_after_ms);
    const char *v[] = {iv, d->cfg->topic};
    PGresult *r = pg_exec(d, d->sql.stale, 2, v, PGRES_TUPLES_OK);
    int n = r ? PQntuples(r) : 0;
    int *idx = n ? calloc((size_t)n, sizeof *idx) : NULL;
    char *done = n ? calloc((size_t)n, 1) : NULL;
    for (int i = 0; idx && done && i < n; i++) {
        if (done[i])
            continue;
        if (PQgetisnull(r, i, 2) || PQgetisnull(r, i, 3)) {
            /* claimed, but no partition was recorded: nothing was produced */
            if (requeue(d, PQgetvalue(r, i, 0), atoi(PQgetvalue(r, i, 4)),
                        "stale dispatch: claimed but never produced", 0) > 0) {
                ks_info(WHERE, "stale dispatch: event %s was claimed but never produced "
                               "-> PENDING", PQgetvalue(r, i, 0));
                d->probe_absent++;
            }
            continue;
        }
        int g = 0;
        for (int j = i; j < n; j++)
            if (!done[j] && !PQgetisnull(r, j, 2) &&
                !strcmp(PQgetvalue(r, j, 1), PQgetvalue(r, i, 1)) &&
                !strcmp(PQgetvalue(r, j, 2), PQgetvalue(r, i, 2))) {
                idx[g++] = j;
                done[j] = 1;
            }
        probe_group(d, r, idx, g);
    }
    free(idx);
    free(done);
    PQclear(r);
}

/* --- one batch ------------------------------------------------------- */

static void rows_free(row *rows, int n)
{
    for (int i = 0; rows && i < n; i++) {
        free(rows[i].event_id);
        free(rows[i].aggregate);
        free(rows[i].topic);
        free(rows[i].headers);
        PQfreemem(rows[i].key);
        PQfreemem(rows[i].payload);
    }
    free(rows);
}

static char *dup_or_null(PGresult *r, int i, int c)
{
    return PQgetisnull(r, i, c) ? NULL : strdup(PQgetvalue(r, i, c));
}

static int claim(ks_pg_dispatcher *d, row **out, int *nout)
{
    char lim[16];
    snprintf(lim, sizeof lim, "%d", BATCH_MAX);
    const char *v[] = {lim, d->cfg->topic};
    *out = NULL;
    *nout = 0;
    PGresult *r = pg_exec(d, d->sql.claim, 2, v, PGRES_TUPLES_OK);
    if (!r)
        return -1;
    int n = PQntuples(r);
    row *rows = n ? calloc((size_t)n, sizeof *rows) : NULL;
    for (int i = 0; rows && i < n; i++) {
        row *w = &rows[i];
        w->event_id = strdup(PQgetvalue(r, i, 0));
        w->aggregate = strdup(PQgetvalue(r, i, 1));
        w->topic = strdup(PQgetvalue(r, i, 2));
        if (!PQgetisnull(r, i, 3))
            w->key = PQunescapeBytea((const unsigned char *)PQgetvalue(r, i, 3), &w->key_len);
        w->payload = PQunescapeBytea((const unsigned char *)PQgetvalue(r, i, 4), &w->payload_len);
        w->headers = dup_or_null(r, i, 5);
        w->attempts = atoi(PQgetvalue(r, i, 6));
    }
    PQclear(r);
    *out = rows;
    *nout = rows ? n : 0;
    /* n rows but no memory: they stay DISPATCHING and the probe frees them */
    return n && !rows ? -1 : 0;
}

/* Sequential assignment: each good row's partition from the user map
 * (outbox_pg_assign.h), the topic grown as needed. 0, -1 Kafka, -2
 * PostgreSQL (logged). */
static int assign_rows(ks_pg_dispatcher *d, row *rows, int n)
{
    const char **topics = calloc((size_t)n + 1, sizeof *topics),
               **users = calloc((size_t)n + 1, sizeof *users);
    int32_t *parts = calloc((size_t)n + 1, sizeof *parts);
    int m = 0, rc = topics && users && parts ? 0 : -2;
    for (int i = 0; rc == 0 && i < n; i++)
        if (!rows[i].bad) {
            topics[m] = rows[i].topic;
            users[m++] = rows[i].aggregate;
        }
    char err[1024] = "out of memory";
    if (rc == 0)
        rc = ks_pg_assign_partitions(d->assign, d->conn, d->prod, topics, users, m, parts, err,
                                     sizeof err);
    if (rc)
        ks_warn(WHERE, "%s", err);
    for (int i = 0, k = 0; rc == 0 && i < n; i++)
        if (!rows[i].bad)
            rows[i].partition = parts[k++];
    free(topics), free(users), free(parts);
    return rc;
}

/* Choose partitions and write them with their probe_from to the rows
 * before anything is produced. 0; -1 Kafka did not answer, -2 PostgreSQL
 * did not (nothing was produced either way). */
static int plan(ks_pg_dispatcher *d, row *rows, int n)
{
    char err[512];
    size_t cap = (size_t)n * 90 + 16;
    char *ids = malloc(cap), *parts = malloc((size_t)n * 12 + 4),
         *froms = malloc((size_t)n * 22 + 4), *atts = malloc((size_t)n * 12 + 4);
    size_t li = 0, lp = 0, lf = 0, la = 0;
    int rc = ids && parts && froms && atts ? 0 : -1;
    if (rc == 0 && d->assign)
        rc = assign_rows(d, rows, n);
    if (rc == 0)
        ids[li++] = parts[lp++] = froms[lf++] = atts[la++] = '{';
    for (int i = 0; rc == 0 && i < n; i++) {
        row *w = &rows[i];
        if (w->bad)
            continue;
        /* one metadata and one watermark request per topic and partition */
        const row *same = NULL;
        for (int j = 0; j < i && !same; j++)
            if (!rows[j].bad && !strcmp(rows[j].topic, w->topic))
                same = &rows[j];
        int count = same ? same->count
                         : ks_kafka_partition_count(d->prod, w->topic, 5000, err, sizeof err);
        if (count <= 0) {
            ks_warn(WHERE, "topic %s: %s", w->topic, err);
            rc = -1;
            break;
        }
        w->count = count;
        const void *k = w->key ? (const void *)w->key : w->aggregate;
        size_t kl = w->key ? w->key_len : strlen(w->aggregate);
        if (!d->assign)
            w->partition = rd_kafka_msg_partitioner_murmur2(NULL, k, kl, count, NULL, NULL);
        int64_t lo, hi = -1;
        for (int j = 0; j < i && hi < 0; j++)
            if (!rows[j].bad && rows[j].partition == w->partition &&
                !strcmp(rows[j].topic, w->topic))
                hi = rows[j].probe_from;
        rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;
        if (hi < 0)
            e = rd_kafka_query_watermark_offsets(d->prod, w->topic, w->partition, &lo, &hi,
                                                 5000);
        if (e) {
            ks_warn(WHERE, "%s [%d]: watermarks: %s", w->topic, (int)w->partition,
                    rd_kafka_err2str(e));
            rc = -1;
            break;
        }
        w->probe_from = hi;
        const char *sep = li > 1 ? "," : "";
        li += (size_t)snprintf(ids + li, cap - li, "%s\"%s\"", sep, w->event_id);
        lp += (size_t)sprintf(parts + lp, "%s%d", sep, (int)w->partition);
        lf += (size_t)sprintf(froms + lf, "%s%lld", sep, (long long)hi);
        la += (size_t)sprintf(atts + la, "%s%d", sep, w->attempts);
    }
    if (rc == 0) {
        strcpy(ids + li, "}"), strcpy(parts + lp, "}"), strcpy(froms + lf, "}"),
            strcpy(atts + la, "}");
        const char *v[] = {ids, parts, froms, atts};
        PGresult *r = pg_exec(d, d->sql.plan, 4, v, PGRES_COMMAND_OK);
        rc = r ? 0 : -2;
        PQclear(r);
    }
    free(ids), free(parts), free(froms), free(atts);
    return rc;
}

/* The row's `headers` (a JSON object of strings) onto the record. */
static void add_headers(rd_kafka_headers_t *h, const char *json)
{
    json_t *o = json ? json_loads(json, 0, NULL) : NULL;
    const char *name;
    json_t *val;
    json_object_foreach(o, name, val)
    {
        if (json_is_string(val) && strcmp(name, EVENT_ID_HEADER) && strcmp(name, USER_HEADER))
            rd_kafka_header_add(h, name, -1, json_string_value(val),
                                (ssize_t)json_string_length(val));
    }
    json_decref(o);
}

static void failed_row(ks_pg_dispatcher *d, row *w, rd_kafka_resp_err_t e)
{
    char why[600];
    snprintf(why, sizeof why, "publish to %s [%d]: %s", w->topic, (int)w->partition,
             rd_kafka_err2str(e));
    if (w->attempts >= d->cfg->max_attempts) {
        char a[16];
        snprintf(a, sizeof a, "%d", w->attempts);
        const char *v[] = {w->event_id, a, why};
        if (pg_move(d, d->sql.fail, 3, v) > 0) {
            d->failed++;
            ks_error(WHERE, "event %s: %s; attempt %d of %d -> FAILURE", w->event_id, why,
                     w->attempts, (int)d->cfg->max_attempts);
        }
    } else {
        requeue(d, w->event_id, w->attempts, why, 0);
    }
}

/* What the schema's CHECK allows (a table made without it may hold more):
 * short enough for the probe, and safe inside an array literal. */
static int event_id_ok(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > KS_PROBE_ID_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)id[i]) || strchr("._:-", id[i])))
            return 0;
    return 1;
}

static void dispatch(ks_pg_dispatcher *d, row *rows, int n)
{
    for (int i = 0; i < n; i++)
        if (!event_id_ok(rows[i].event_id)) {
            char a[16];
            snprintf(a, sizeof a, "%d", rows[i].attempts);
            const char *v[] = {rows[i].event_id, a,
                               "event_id is not [A-Za-z0-9._:-]{1,64}: never published"};
            if (pg_move(d, d->sql.fail, 3, v) > 0)
                d->failed++;
            ks_error(WHERE, "an event id of %zu bytes is not [A-Za-z0-9._:-]{1,64} -> FAILURE",
                     strlen(rows[i].event_id));
            rows[i].bad = 1;
        }
    int planned = plan(d, rows, n);
    if (planned == -2) /* the rows stay DISPATCHING without a partition: the
                        * stale pass requeues them as never produced */
        return;
    if (planned != 0) {
        for (int i = 0; i < n; i++) /* nothing was produced: the attempt is given back */
            if (!rows[i].bad)
                requeue(d, rows[i].event_id, rows[i].attempts, "Kafka unreachable", 1);
        d->kafka_warned = 1;
        sleep_ms(500);
        return;
    }
    for (int i = 0; i < n; i++) {
        row *w = &rows[i];
        if (w->bad)
            continue;
        rd_kafka_headers_t *h = rd_kafka_headers_new(4);
        rd_kafka_header_add(h, EVENT_ID_HEADER, -1, w->event_id, -1);
        rd_kafka_header_add(h, USER_HEADER, -1, w->aggregate, -1);
        add_headers(h, w->headers);
        const void *k = w->key ? (const void *)w->key : w->aggregate;
        size_t kl = w->key ? w->key_len : strlen(w->aggregate);
        rd_kafka_resp_err_t e = rd_kafka_producev(
            d->prod, RD_KAFKA_V_TOPIC(w->topic), RD_KAFKA_V_PARTITION(w->partition),
            RD_KAFKA_V_KEY(k, kl), RD_KAFKA_V_VALUE(w->payload, w->payload_len),
            RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_OPAQUE(w),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        if (e) {
            rd_kafka_headers_destroy(h); /* only on failure: else the record owns it */
            w->err = e;
            w->done = 1;
        }
    }
    ks_fault_point(KS_FAULT_DISPATCH_PRODUCED);
    rd_kafka_flush(d->prod, 30000); /* every report within message.timeout.ms */
    ks_fault_point(KS_FAULT_DISPATCH_ACKED);
    for (int i = 0; i < n; i++) {
        row *w = &rows[i];
        if (w->bad)
            continue;
        if (!w->done || w->err)
            failed_row(d, w, w->done ? w->err : RD_KAFKA_RESP_ERR__TIMED_OUT);
        else if (mark_published(d, w->event_id, w->attempts, w->partition, w->offset) > 0)
            d->published++;
        /* -1: PostgreSQL failed, the row stays DISPATCHING until the probe */
    }
}

/* --- the thread ------------------------------------------------------ */

/* Sleep up to the poll interval, woken early by NOTIFY or stop. */
static void wait_notify(ks_pg_dispatcher *d)
{
    int64_t until = ks_mono_ms() + d->cfg->poll_interval_ms;
    while (!d->stop && ks_mono_ms() < until && pg_ok(d)) {
        struct pollfd pfd = {PQsocket(d->conn), POLLIN, 0};
        if (poll(&pfd, 1, 200) > 0 && PQconsumeInput(d->conn) == 0)
            return; /* the connection broke: the loop reconnects */
        int woke = 0;
        PGnotify *nt;
        while ((nt = PQnotifies(d->conn))) {
            PQfreemem(nt);
            woke = 1;
        }
        if (woke)
            return;
    }
}

static void publish_metrics(ks_pg_dispatcher *d)
{
    /* every 10 s: the count reads the whole table, PUBLISHED rows too */
    if (!d->metrics || ks_mono_ms() - d->metrics_ms < 10000 || !pg_ok(d))
        return;
    d->metrics_ms = ks_mono_ms();
    PGresult *r = pg_exec(d, d->sql.counts, 0, NULL, PGRES_TUPLES_OK);
    char labels[512];
    double backlog = 0, total = 0;
    for (int i = 0; r && i < PQntuples(r); i++) {
        const char *st = PQgetvalue(r, i, 0);
        double c = strtod(PQgetvalue(r, i, 1), NULL);
        total += c;
        snprintf(labels, sizeof labels, "outbox=\"%s\",status=\"%s\"", d->cfg->name, st);
        ks_metrics_set(d->metrics, "kstreams_outbox_status_rows", labels, c);
        if (!strcmp(st, "PENDING") || !strcmp(st, "PREQUEUED") || !strcmp(st, "DISPATCHING"))
            backlog += c;
    }
    PQclear(r);
    snprintf(labels, sizeof labels, "outbox=\"%s\"", d->cfg->name);
    ks_metrics_set(d->metrics, "kstreams_outbox_backlog", labels, backlog);
    ks_metrics_set(d->metrics, "kstreams_outbox_rows", labels, total);
    ks_outbox_probe_metrics(d->metrics, d->cfg->name, d->probe_found, d->probe_absent);
}

/* 1 when some row is PENDING (then Kafka is worth asking). */
static int any_pending(ks_pg_dispatcher *d)
{
    PGresult *r = pg_exec(d, d->sql.pending, 0, NULL, PGRES_TUPLES_OK);
    int any = r && PQntuples(r) > 0;
    PQclear(r);
    return any;
}

static void *run(void *arg)
{
    ks_pg_dispatcher *d = arg;
    long reported = 0;
    int64_t last_report = ks_mono_ms();
    while (!d->stop) {
        if (!pg_ok(d) && pg_connect(d) != 0) {
            for (int i = 0; i < 10 && !d->stop; i++)
                sleep_ms(100);
            continue;
        }
        publish_metrics(d);
        resolve_stale(d);
        if (!any_pending(d)) {
            wait_notify(d);
            continue;
        }
        if (kafka_ok(d) != 0) {
            for (int i = 0; i < 10 && !d->stop; i++)
                sleep_ms(100);
            continue;
        }
        row *rows;
        int n;
        if (claim(d, &rows, &n) == 0 && n)
            dispatch(d, rows, n);
        rows_free(rows, n);
        if (d->published != reported && ks_mono_ms() - last_report > 1000) {
            ks_info(WHERE, "%ld events published so far", d->published);
            reported = d->published;
            last_report = ks_mono_ms();
        }
    }
    return NULL;
}

int ks_pg_dispatcher_start(const ks_pipeline *p, const ks_cfg_outbox *cfg, ks_metrics *metrics,
                           ks_pg_dispatcher **out, char *err, size_t errlen)
{
    *out = NULL;
    int rc = ks_pq_load(err, errlen);
    if (rc)
        return rc;
    const char *dsn = cfg->dsn ? cfg->dsn : getenv(cfg->dsn_env);
    if (!dsn || !*dsn) {
        snprintf(err, errlen, "outbox %s: the environment variable %s (dsn_env) is not set",
                 cfg->name, cfg->dsn_env);
        return KS_ERR_INVALID;
    }
    ks_pg_dispatcher *d = calloc(1, sizeof *d);
    if (!d || !(d->dsn = strdup(dsn))) {
        free(d);
        return KS_ERR_NOMEM;
    }
    d->p = p;
    d->cfg = cfg;
    d->metrics = metrics;
    ks_pg_sql_build(&d->sql, cfg->table);
    if (cfg->max_users_per_partition > 0 &&
        !(d->assign = ks_pg_assign_new((int)cfg->max_users_per_partition)))
        rc = KS_ERR_NOMEM;
    if (rc == 0)
        rc = make_clients(d, err, errlen);
    if (rc == 0 && pthread_create(&d->thread, NULL, run, d) != 0) {
        snprintf(err, errlen, "outbox dispatcher: cannot start a thread");
        rc = KS_ERR_NOMEM;
    }
    if (rc) {
        ks_outbox_kafka_clients_free(d->prod, d->probe, 0);
        ks_pg_assign_free(d->assign);
        free(d->dsn);
        free(d);
        return rc;
    }
    *out = d;
    return 0;
}

void ks_pg_dispatcher_stop(ks_pg_dispatcher *d)
{
    if (!d)
        return;
    d->stop = 1;
    pthread_join(d->thread, NULL);
    ks_outbox_kafka_clients_free(d->prod, d->probe, 1);
    if (d->conn)
        PQfinish(d->conn);
    ks_info(WHERE, "stopped after publishing %ld events (%ld requeued, %ld FAILURE, probe: "
                   "%ld found, %ld absent)",
            d->published, d->requeued, d->failed, d->probe_found, d->probe_absent);
    ks_pg_assign_free(d->assign);
    free(d->dsn);
    free(d);
}
