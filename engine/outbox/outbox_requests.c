/*
 * outbox_requests.c - see outbox_requests.h.
 *
 * Whose commit moved the offset. A held row whose request lies below the
 * group's committed offset was committed by someone; if by the process
 * that held it, the row is released, but if another instance took the
 * partition after a crash between hold and commit, that instance read the
 * request again and has the event in its own outbox: releasing ours
 * would publish it twice. So every offset commit carries metadata
 * "ks2:<token>:<start>,<token>:<start>,...": the chain of the processes
 * that held the partition one after the other (oldest first, at most
 * CHAIN_MAX), each with its random token and the offset at which it began
 * reading; the committer is last. A process appends itself to the chain it
 * finds committed when it first commits after an assignment. Settling a
 * held row of holder H at offset o against committed offset c: o >= c:
 * forget (nobody committed it; it is read again); else look at the
 * holders after H's last entry (all of them when H is not in the chain:
 * it fell off the front, so every entry left came after it): one that
 * began reading at or before o read the request itself: forget; none:
 * release (only H could have moved the offset past o). "ks1:<token>:<start>"
 * (one holder, written by 0.1.x) reads as a chain of one.
 */
#include "outbox/outbox_requests.h"

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fault.h"
#include "kafka/kafka.h"
#include "base/log.h"

#define WHERE "outbox-requests"
#define MAX_PARTS 1024
#define BURST 500
#define CHAIN_MAX 8                      /* holders kept in commit metadata */
#define CHAIN_TEXT (4 + CHAIN_MAX * 40)  /* "ks2:" + "<16 hex>:<int64>," each */

struct ks_outbox_requests {
    ks_outbox *ob;
    const ks_pipeline *p;
    char topic[512];
    rd_kafka_t *cons;
    pthread_t thread;
    volatile int stop;
    int started;
    long added, replays, bad, released, forgotten;
    char token[17];          /* this process, in commit metadata (hex) */
    int64_t start[MAX_PARTS]; /* first offset read since the assignment, -1 */
    /* our commit metadata: the holder chain found committed at our first
     * commit since the assignment, then us; NULL while not read yet */
    char *meta[MAX_PARTS];
};

#define HOLDER_KEY "requests_holder" /* outbox meta: token of the holder */

void ks_outbox_requests_topic(const ks_pipeline *p, char *buf, size_t len)
{
    snprintf(buf, len, "%s-outbox-requests", p->application);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- settling held rows ------------------------------------------------- */

/* Committed offsets per partition (-1: none known) and what to do with a
 * held row whose request is not below its partition's offset. */
typedef struct positions {
    int64_t next[MAX_PARTS];
    /* lowest start of the holders after `holder` in the chain, -1 none */
    int64_t others_from[MAX_PARTS];
    const char *holder;         /* token of the process that held the rows */
    int forget_rest;
} positions;

static void positions_reset(positions *pos, const char *holder, int forget_rest)
{
    for (int i = 0; i < MAX_PARTS; i++) {
        pos->next[i] = -1;
        pos->others_from[i] = -1;
    }
    pos->holder = holder;
    pos->forget_rest = forget_rest;
}

static int fate(void *arg, int32_t partition, int64_t offset)
{
    const positions *pos = arg;
    int forget = pos->forget_rest ? KS_HELD_FORGET : KS_HELD_KEEP;
    if (partition < 0 || partition >= MAX_PARTS || offset >= pos->next[partition])
        return forget;
    if (pos->others_from[partition] >= 0 && pos->others_from[partition] <= offset)
        return forget; /* a later holder read it itself before committing */
    return KS_HELD_RELEASE;
}

typedef struct holder_entry {
    char token[17];
    long long start;
} holder_entry;

/* Parse commit metadata (ks2 chain, or ks1 single holder) into at most
 * CHAIN_MAX entries, oldest first. Their count; 0 for other metadata. */
static size_t parse_chain(const void *md, size_t len, holder_entry *out)
{
    char text[CHAIN_TEXT + 1];
    if (!md || len < 4 || len > CHAIN_TEXT)
        return 0;
    memcpy(text, md, len);
    text[len] = '\0';
    if (strncmp(text, "ks1:", 4) != 0 && strncmp(text, "ks2:", 4) != 0)
        return 0;
    size_t n = 0;
    for (char *save = NULL, *e = strtok_r(text + 4, ",", &save); e && n < CHAIN_MAX;
         e = strtok_r(NULL, ",", &save)) {
        int used = 0;
        if (sscanf(e, "%16[0-9a-f]:%lld%n", out[n].token, &out[n].start, &used) == 2 &&
            strlen(out[n].token) == 16 && e[used] == '\0')
            n++;
        else
            return 0; /* not ours: trust none of it */
    }
    return n;
}

/* Where holders other than pos->holder began reading partition p after its
 * last entry in the committed chain (pos->others_from). */
static void read_chain(positions *pos, int32_t p, const void *md, size_t len)
{
    holder_entry e[CHAIN_MAX];
    size_t n = parse_chain(md, len, e), first = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(e[i].token, pos->holder) == 0)
            first = i + 1;
    for (size_t i = first; i < n; i++)
        if (pos->others_from[p] < 0 || e[i].start < pos->others_from[p])
            pos->others_from[p] = e[i].start;
}

/* The metadata of our commit: the chain found committed, without what
 * falls off its front, then us (once: a chain ending with us keeps that
 * entry, whose start is the earlier one). */
static void chain_append(const char *found, const char *token, int64_t start, char *out,
                         size_t outlen)
{
    holder_entry e[CHAIN_MAX + 1];
    size_t n = found ? parse_chain(found, strlen(found), e) : 0;
    if (n == 0 || strcmp(e[n - 1].token, token) != 0) {
        snprintf(e[n].token, sizeof e[n].token, "%s", token);
        e[n++].start = start;
    }
    size_t from = n > CHAIN_MAX ? n - CHAIN_MAX : 0, used = 0;
    used += (size_t)snprintf(out, outlen, "ks2:");
    for (size_t i = from; i < n && used < outlen; i++)
        used += (size_t)snprintf(out + used, outlen - used, "%s%s:%lld", i > from ? "," : "",
                                 e[i].token, e[i].start);
}

static void settle(ks_outbox_requests *r, positions *pos, const char *when)
{
    size_t rel = 0, forg = 0;
    if (ks_outbox_settle_held(r->ob, fate, pos, &rel, &forg) != 0) {
        ks_warn(WHERE, "settling held events %s: %s", when, ks_outbox_last_error(r->ob));
        return;
    }
    r->released += (long)rel;
    r->forgotten += (long)forg;
    if (forg || (rel && strcmp(when, "after commit") != 0))
        ks_info(WHERE, "%s: %zu held event%s released, %zu forgotten (their requests were "
                       "not committed and are read again)",
                when, rel, rel == 1 ? "" : "s", forg);
}

/* Read the group's committed offsets of every partition of the topic.
 * 0, or -1 when Kafka cannot tell (then nothing may be forgotten). */
static int committed_positions(ks_outbox_requests *r, positions *pos)
{
    char err[512];
    int n = ks_kafka_partition_count(r->cons, r->topic, 5000, err, sizeof err);
    if (n <= 0)
        return n == 0 ? 0 : -1; /* no topic yet: nothing was ever committed */
    if (n > MAX_PARTS)
        n = MAX_PARTS;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n);
    for (int32_t p = 0; p < n; p++)
        rd_kafka_topic_partition_list_add(l, r->topic, p);
    rd_kafka_resp_err_t e = rd_kafka_committed(r->cons, l, 10000);
    for (int i = 0; !e && i < l->cnt; i++) {
        if (l->elems[i].err) {
            e = l->elems[i].err;
            break;
        }
        pos->next[l->elems[i].partition] = l->elems[i].offset;
        read_chain(pos, l->elems[i].partition, l->elems[i].metadata,
                   l->elems[i].metadata_size);
    }
    rd_kafka_topic_partition_list_destroy(l);
    if (e) {
        ks_debug(WHERE, "committed offsets of %s: %s", r->topic, rd_kafka_err2str(e));
        return -1;
    }
    return 0;
}

/* Settle every held row of `holder` against the group's committed offsets,
 * forgetting the uncommitted ones. 0 when done. */
static int settle_all(ks_outbox_requests *r, const char *holder, const char *when)
{
    positions *pos = malloc(sizeof *pos);
    if (!pos)
        return -1;
    positions_reset(pos, holder, 1);
    int rc = committed_positions(r, pos);
    if (rc == 0)
        settle(r, pos, when);
    free(pos);
    return rc;
}

static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t e,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    ks_outbox_requests *r = opaque;
    if (e == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        for (int i = 0; i < parts->cnt; i++)
            if (parts->elems[i].partition >= 0 && parts->elems[i].partition < MAX_PARTS) {
                r->start[parts->elems[i].partition] = -1;
                free(r->meta[parts->elems[i].partition]); /* read again */
                r->meta[parts->elems[i].partition] = NULL;
            }
        rd_kafka_assign(rk, parts);
        ks_info(WHERE, "reading %d partition%s of %s", parts->cnt, parts->cnt == 1 ? "" : "s",
                r->topic);
        return;
    }
    /* our commits are done: what is not below the committed offsets now
     * goes to the partition's next owner. When the engine stops, the group
     * is being left and cannot answer; rows still held then (a failed
     * commit) are settled at the next start, by the holder token */
    if (r->stop) {
        rd_kafka_assign(rk, NULL);
        return;
    }
    if (settle_all(r, r->token, "on revocation") != 0)
        ks_warn(WHERE, "cannot read committed offsets on revocation; held events wait");
    rd_kafka_assign(rk, NULL);
}

/* ---- one burst ------------------------------------------------------------ */

static int valid_id(const void *v, size_t len)
{
    if (len != KS_OUTBOX_ID_LEN)
        return 0;
    const char *s = v;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

typedef struct burst {
    rd_kafka_message_t *msgs[BURST];
    size_t n;
    ks_outbox_request reqs[BURST];
    char ids[BURST][KS_OUTBOX_ID_LEN + 1];
    char users[BURST][KS_OUTBOX_MAX_USER + 1];
    size_t nreq;
} burst;

/* Turn message m into a request of b, or log why it is not one. */
static void take(ks_outbox_requests *r, burst *b, const rd_kafka_message_t *m)
{
    rd_kafka_headers_t *h = NULL;
    const void *v = NULL;
    size_t vlen = 0;
    if (rd_kafka_message_headers(m, &h) == 0)
        rd_kafka_header_get_last(h, KS_OUTBOX_ID_HEADER, &v, &vlen);
    if (!valid_id(v, vlen) || !m->key || m->key_len == 0 ||
        m->key_len > KS_OUTBOX_MAX_USER || memchr(m->key, 0, m->key_len)) {
        r->bad++;
        ks_warn(WHERE, "%s [%d] offset %lld: not an outbox request (needs a user id key and "
                       "header %s); skipped",
                r->topic, (int)m->partition, (long long)m->offset, KS_OUTBOX_ID_HEADER);
        return;
    }
    size_t i = b->nreq++;
    memcpy(b->ids[i], v, KS_OUTBOX_ID_LEN);
    b->ids[i][KS_OUTBOX_ID_LEN] = '\0';
    memcpy(b->users[i], m->key, m->key_len);
    b->users[i][m->key_len] = '\0';
    b->reqs[i] = (ks_outbox_request){.id = b->ids[i],
                                     .user = b->users[i],
                                     .topic = r->p->outbox->topic,
                                     .payload = m->payload,
                                     .payload_len = m->len,
                                     .partition = m->partition,
                                     .offset = m->offset};
}

/* Our commit metadata (r->meta) for each partition of l not known since
 * its assignment: the holder chain committed before us, then us. 0, or -1
 * when Kafka cannot tell. */
static int learn_metadata(ks_outbox_requests *r, const rd_kafka_topic_partition_list_t *l)
{
    rd_kafka_topic_partition_list_t *q = rd_kafka_topic_partition_list_new(l->cnt);
    for (int i = 0; i < l->cnt; i++)
        if (!r->meta[l->elems[i].partition])
            rd_kafka_topic_partition_list_add(q, r->topic, l->elems[i].partition);
    rd_kafka_resp_err_t e = q->cnt ? rd_kafka_committed(r->cons, q, 10000) : 0;
    for (int i = 0; !e && i < q->cnt; i++)
        e = q->elems[i].err;
    for (int i = 0; !e && i < q->cnt; i++) {
        const rd_kafka_topic_partition_t *t = &q->elems[i];
        char found[CHAIN_TEXT + 1] = "", md[CHAIN_TEXT + 1];
        if (t->metadata && t->metadata_size <= CHAIN_TEXT) {
            memcpy(found, t->metadata, t->metadata_size);
            found[t->metadata_size] = '\0';
        }
        chain_append(found, r->token, r->start[t->partition], md, sizeof md);
        r->meta[t->partition] = strdup(md); /* NULL (no memory): read again */
    }
    rd_kafka_topic_partition_list_destroy(q);
    return e ? -1 : 0;
}

/* Commit the offsets after the burst's messages; on success release the
 * held rows below them. */
static void commit_and_release(ks_outbox_requests *r, burst *b)
{
    positions *pos = malloc(sizeof *pos);
    if (!pos)
        return;
    positions_reset(pos, r->token, 0);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(4);
    for (size_t i = 0; i < b->n; i++) {
        const rd_kafka_message_t *m = b->msgs[i];
        if (m->partition < 0 || m->partition >= MAX_PARTS)
            continue;
        if (pos->next[m->partition] < 0)
            rd_kafka_topic_partition_list_add(l, r->topic, m->partition);
        if (m->offset + 1 > pos->next[m->partition])
            pos->next[m->partition] = m->offset + 1;
    }
    if (learn_metadata(r, l) != 0)
        ks_warn(WHERE, "cannot read the committed holder chain of %s; committing with this "
                       "process alone in it",
                r->topic);
    /* our own commit: others_from stays -1, the rows below it are ours */
    for (int i = 0; i < l->cnt; i++) {
        rd_kafka_topic_partition_t *t = &l->elems[i];
        t->offset = pos->next[t->partition];
        char alone[CHAIN_TEXT + 1];
        const char *md = r->meta[t->partition];
        if (!md) {
            chain_append(NULL, r->token, r->start[t->partition], alone, sizeof alone);
            md = alone;
        }
        size_t n = strlen(md);
        if ((t->metadata = malloc(n))) /* freed with the list */
            memcpy(t->metadata, md, (t->metadata_size = n));
    }
    ks_fault_point(KS_FAULT_REQUESTS_HELD);
    rd_kafka_resp_err_t e = l->cnt ? rd_kafka_commit(r->cons, l, 0) : 0;
    if (!e && l->cnt)
        ks_fault_point(KS_FAULT_REQUESTS_COMMITTED);
    rd_kafka_topic_partition_list_destroy(l);
    if (e)
        ks_warn(WHERE, "committing %s offsets: %s; the events stay held until settled",
                r->topic, rd_kafka_err2str(e));
    else
        settle(r, pos, "after commit");
    free(pos);
}

/* Seek each partition of the burst back to its first message. */
static void rewind_burst(ks_outbox_requests *r, const burst *b)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(4);
    for (size_t i = 0; i < b->n; i++)
        if (!rd_kafka_topic_partition_list_find(l, r->topic, b->msgs[i]->partition))
            rd_kafka_topic_partition_list_add(l, r->topic, b->msgs[i]->partition)->offset =
                b->msgs[i]->offset;
    rd_kafka_error_t *e = rd_kafka_seek_partitions(r->cons, l, 5000);
    if (e)
        rd_kafka_error_destroy(e);
    rd_kafka_topic_partition_list_destroy(l);
}

static void run_burst(ks_outbox_requests *r, burst *b)
{
    b->n = b->nreq = 0;
    while (b->n < BURST && !r->stop) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(r->cons, b->n ? 0 : 100);
        if (!m)
            break;
        if (m->err) {
            if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                ks_debug(WHERE, "consumer: %s", rd_kafka_message_errstr(m));
            rd_kafka_message_destroy(m);
            continue;
        }
        if (m->partition >= 0 && m->partition < MAX_PARTS && r->start[m->partition] < 0)
            r->start[m->partition] = m->offset;
        b->msgs[b->n++] = m;
        take(r, b, m);
    }
    if (b->n) {
        size_t added = 0;
        if (ks_outbox_hold_requests(r->ob, b->reqs, b->nreq, &added) != 0) {
            /* nothing written and nothing committed: read them again */
            ks_error(WHERE, "cannot write %zu events to the outbox: %s; retrying", b->nreq,
                     ks_outbox_last_error(r->ob));
            rewind_burst(r, b);
            sleep_ms(1000);
        } else {
            r->added += (long)added;
            r->replays += (long)(b->nreq - added);
            commit_and_release(r, b);
        }
    }
    for (size_t i = 0; i < b->n; i++)
        rd_kafka_message_destroy(b->msgs[i]);
}

/* 16 random hex digits. */
static int new_token(char out[17])
{
    unsigned char b[8];
    FILE *f = fopen("/dev/urandom", "rb");
    size_t got = f ? fread(b, 1, sizeof b, f) : 0;
    if (f)
        fclose(f);
    if (got != sizeof b)
        return -1;
    for (int i = 0; i < 8; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    return 0;
}

static void *requests_main(void *arg)
{
    ks_outbox_requests *r = arg;
    /* held rows of an earlier life first: until they are settled a later
     * request could not tell a replay from a new event */
    char holder[17] = "";
    size_t len = 0;
    if (ks_outbox_meta_get(r->ob, HOLDER_KEY, holder, sizeof holder - 1, &len) != 0 ||
        len != 16)
        holder[0] = '\0';
    holder[16] = '\0';
    for (int warned = 0; !r->stop && settle_all(r, holder, "at start") != 0;) {
        if (!warned++)
            ks_warn(WHERE, "cannot read the committed offsets of %s yet; retrying", r->topic);
        for (int i = 0; i < 20 && !r->stop; i++)
            sleep_ms(50);
    }
    /* rows held from now on are this process's */
    if (!r->stop && ks_outbox_meta_put(r->ob, HOLDER_KEY, r->token, 16) != 0) {
        ks_error(WHERE, "cannot record this process's token: %s", ks_outbox_last_error(r->ob));
        return NULL;
    }
    rd_kafka_topic_partition_list_t *sub = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(sub, r->topic, RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t e = r->stop ? 0 : rd_kafka_subscribe(r->cons, sub);
    rd_kafka_topic_partition_list_destroy(sub);
    if (e)
        ks_error(WHERE, "subscribe to %s: %s", r->topic, rd_kafka_err2str(e));
    burst *b = malloc(sizeof *b);
    long reported = 0;
    while (!r->stop && !e && b) {
        run_burst(r, b);
        if (r->added != reported) {
            reported = r->added;
            ks_debug(WHERE, "events from processors: %ld added, %ld replays left alone",
                     r->added, r->replays);
        }
    }
    free(b);
    return NULL;
}

int ks_outbox_requests_start(ks_outbox *ob, const ks_pipeline *p, ks_outbox_requests **out,
                             char *err, size_t errlen)
{
    *out = NULL;
    ks_outbox_requests *r = calloc(1, sizeof *r);
    if (!r)
        return KS_ERR_NOMEM;
    r->ob = ob;
    r->p = p;
    ks_outbox_requests_topic(p, r->topic, sizeof r->topic);
    for (int i = 0; i < MAX_PARTS; i++)
        r->start[i] = -1;
    if (new_token(r->token) != 0) {
        snprintf(err, errlen, "outbox requests: cannot read /dev/urandom");
        free(r);
        return KS_ERR_IO;
    }
    r->cons = ks_kafka_side_consumer(p, "outbox-requests", on_rebalance, r,
                                     "outbox requests", err, errlen);
    if (!r->cons || pthread_create(&r->thread, NULL, requests_main, r) != 0) {
        if (r->cons)
            snprintf(err, errlen, "outbox requests: cannot start its thread");
        ks_outbox_requests_stop(r);
        return KS_ERR_IO;
    }
    r->started = 1;
    *out = r;
    return 0;
}

void ks_outbox_requests_stop(ks_outbox_requests *r)
{
    if (!r)
        return;
    r->stop = 1;
    if (r->started)
        pthread_join(r->thread, NULL);
    if (r->cons) {
        rd_kafka_consumer_close(r->cons); /* revokes: settles held rows */
        rd_kafka_destroy(r->cons);
    }
    if (r->started)
        ks_info(WHERE, "stopped: %ld events from processors added, %ld replays left alone, "
                       "%ld not requests",
                r->added, r->replays, r->bad);
    for (int i = 0; i < MAX_PARTS; i++)
        free(r->meta[i]);
    free(r);
}
