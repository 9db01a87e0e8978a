/*
 * grow_move.c - see grow_move.h.
 */
#include "runtime/grow_move.h"
#include "base/grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault.h"
#include "runtime/restore_fold.h"
#include "runtime/task.h"

#define IDLE_MS 30000 /* no record and no end from the broker: give up */

static int add_entry(ks_grow_changelog *c, ks_bytes key, const ks_bytes *value, int32_t p)
{
    ks_grow_entry *grown = ks_grow(c->entries, &c->cap, c->count, sizeof *grown, 256);
    if (!grown)
        return KS_ERR_NOMEM;
    c->entries = grown;
    ks_grow_entry *e = &c->entries[c->count];
    e->key = malloc(key.len ? key.len : 1);
    e->value = malloc(value->len ? value->len : 1);
    if (!e->key || !e->value) {
        free(e->key);
        free(e->value);
        return KS_ERR_NOMEM;
    }
    memcpy(e->key, key.data, key.len);
    if (value->len)
        memcpy(e->value, value->data, value->len);
    e->key_len = key.len;
    e->value_len = value->len;
    e->partition = p;
    c->count++;
    return 0;
}

typedef struct drain_arg {
    ks_grow_changelog *c;
    int32_t partition;
} drain_arg;

/* A key's latest record: kept when it holds a value (a deleted key has
 * nothing to move). */
static int keep_live(void *arg, ks_bytes key, const ks_bytes *value, int64_t offset)
{
    (void)offset;
    drain_arg *d = arg;
    return value ? add_entry(d->c, key, value, d->partition) : 0;
}

/* One message of a changelog: into its partition's fold, or its version. */
static int take(ks_grow_changelog *c, ks_fold **folds, const rd_kafka_message_t *m)
{
    ks_bytes key = {m->key, m->key_len};
    ks_bytes value = {m->payload, m->len};
    if (m->partition < 0 || m->partition >= c->partitions || !m->key)
        return 0;
    if (ks_task_is_version_key(key)) {
        const unsigned char *v = m->payload;
        if (v && m->len == 4)
            c->versions[m->partition] = (int64_t)((uint32_t)v[0] << 24 | (uint32_t)v[1] << 16 |
                                                  (uint32_t)v[2] << 8 | v[3]);
        return 0;
    }
    return ks_fold_put(folds[m->partition], key, m->payload ? &value : NULL, m->offset);
}

/* Read every partition of c's changelog to its end. 0 or -1 with err. */
static int read_one(rd_kafka_t *consumer, ks_grow_changelog *c, char *err, size_t errlen)
{
    int32_t n = c->partitions;
    ks_fold **folds = calloc((size_t)n, sizeof *folds);
    char *ended = calloc((size_t)n, 1);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n);
    int rc = -1, left = n;
    if (!folds || !ended) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    for (int32_t p = 0; p < n; p++) {
        if (!(folds[p] = ks_fold_new())) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
        rd_kafka_topic_partition_list_add(l, c->store->changelog, p)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
    }
    rd_kafka_resp_err_t e = rd_kafka_assign(consumer, l);
    for (int idle = 0; !e && left > 0 && idle < IDLE_MS;) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(consumer, 200);
        if (!m) {
            idle += 200;
            continue;
        }
        idle = 0;
        if (m->rkt && strcmp(rd_kafka_topic_name(m->rkt), c->store->changelog) != 0)
            ; /* left over from the changelog read before */
        else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            if (m->partition >= 0 && m->partition < n && !ended[m->partition]) {
                ended[m->partition] = 1;
                left--;
            }
        } else if (!m->err) {
            if (take(c, folds, m) != 0)
                e = RD_KAFKA_RESP_ERR__NOENT; /* below: out of memory */
        } else if (m->err != RD_KAFKA_RESP_ERR__TRANSPORT) {
            e = m->err;
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_assign(consumer, NULL);
    if (e || left > 0) {
        snprintf(err, errlen, "reading changelog %s: %s", c->store->changelog,
                 e == RD_KAFKA_RESP_ERR__NOENT ? "out of memory"
                 : e                          ? rd_kafka_err2str(e)
                                              : "no end reached in 30 s");
        goto out;
    }
    rc = 0;
    for (int32_t p = 0; rc == 0 && p < n; p++) {
        drain_arg d = {c, p};
        if (ks_fold_drain(folds[p], keep_live, &d) != 0) {
            snprintf(err, errlen, "reading changelog %s: out of memory", c->store->changelog);
            rc = -1;
        }
    }
out:
    for (int32_t p = 0; folds && p < n; p++)
        ks_fold_free(folds[p]);
    free(folds);
    free(ended);
    rd_kafka_topic_partition_list_destroy(l);
    return rc;
}

int ks_grow_read(rd_kafka_t *committed, const ks_grow_plan *plan, const int32_t *partitions,
                 ks_grow_changelog **out, char *err, size_t errlen)
{
    ks_grow_changelog *c = calloc(plan->store_count + 1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < plan->store_count; i++) {
        c[i].store = &plan->stores[i];
        c[i].partitions = partitions[i];
        c[i].versions = malloc(((size_t)partitions[i] + 1) * sizeof *c[i].versions);
        if (!c[i].versions) {
            snprintf(err, errlen, "out of memory");
            ks_grow_changelogs_free(c, plan->store_count);
            return -1;
        }
        for (int32_t p = 0; p < partitions[i]; p++)
            c[i].versions[p] = -1;
        if (partitions[i] > 0 && read_one(committed, &c[i], err, errlen) != 0) {
            ks_grow_changelogs_free(c, plan->store_count);
            return -1;
        }
    }
    *out = c;
    return 0;
}

int64_t ks_grow_version(const ks_grow_changelog *c, const char *store, char *err,
                        size_t errlen)
{
    int64_t v = -1;
    for (int32_t p = 0; p < c->partitions; p++) {
        if (c->versions[p] < 0)
            continue;
        if (v >= 0 && c->versions[p] != v) {
            snprintf(err, errlen,
                     "store '%s' holds state version %lld in one partition and %lld in "
                     "another: start the application once with its current build (every "
                     "task then migrates), stop it, and run grow-partitions again",
                     store, (long long)v, (long long)c->versions[p]);
            return -2;
        }
        v = c->versions[p];
    }
    return v;
}

size_t ks_grow_moves(const ks_grow_changelog *c, int32_t partitions)
{
    size_t n = 0;
    for (size_t i = 0; i < c->count; i++) {
        const ks_grow_entry *e = &c->entries[i];
        n += c->store->partitioner(e->key, e->key_len, partitions) != e->partition;
    }
    return n;
}

/* Queue one record (value NULL: a tombstone) for partition p of topic. */
static rd_kafka_resp_err_t put(rd_kafka_t *rk, const char *topic, int32_t p, const void *key,
                               size_t key_len, const void *value, size_t value_len)
{
    rd_kafka_resp_err_t e;
    while ((e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(p),
                                  RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                  RD_KAFKA_V_KEY(key, key_len),
                                  RD_KAFKA_V_VALUE((void *)value, value_len),
                                  RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
        rd_kafka_poll(rk, 100);
    return e;
}

/* The moves and version records of one changelog. */
static rd_kafka_resp_err_t write_one(rd_kafka_t *rk, const ks_grow_changelog *c,
                                     int32_t partitions, size_t *moved)
{
    const char *topic = c->store->changelog;
    rd_kafka_resp_err_t e = 0;
    for (size_t i = 0; !e && i < c->count; i++) {
        const ks_grow_entry *x = &c->entries[i];
        int32_t to = c->store->partitioner(x->key, x->key_len, partitions);
        if (to == x->partition)
            continue;
        e = put(rk, topic, to, x->key, x->key_len, x->value, x->value_len);
        if (!e)
            e = put(rk, topic, x->partition, x->key, x->key_len, NULL, 0);
        (*moved)++;
    }
    int64_t v = ks_grow_version(c, "", NULL, 0);
    for (int32_t p = 0; !e && v >= 0 && p < partitions; p++) {
        if (p < c->partitions && c->versions[p] >= 0)
            continue;
        unsigned char enc[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                                (unsigned char)(v >> 8), (unsigned char)v};
        ks_bytes k = ks_task_version_key();
        e = put(rk, topic, p, k.data, k.len, enc, sizeof enc);
    }
    return e;
}

int ks_grow_write(rd_kafka_t *producer, const ks_grow_changelog *c, size_t n,
                  int32_t partitions, size_t *moved, char *err, size_t errlen)
{
    size_t count = 0;
    rd_kafka_error_t *txe = rd_kafka_begin_transaction(producer);
    rd_kafka_resp_err_t e = 0;
    for (size_t i = 0; !txe && !e && i < n; i++)
        if (c[i].partitions > 0)
            e = write_one(producer, &c[i], partitions, &count);
    if (!txe && !e) {
        e = rd_kafka_flush(producer, 300000); /* at the broker, in the open transaction */
        ks_fault_point(KS_FAULT_GROW_BEFORE_COMMIT);
    }
    if (!txe && !e)
        txe = rd_kafka_commit_transaction(producer, 300000);
    if (txe || e) {
        snprintf(err, errlen, "moving keys in a transaction: %s; nothing was moved",
                 txe ? rd_kafka_error_string(txe) : rd_kafka_err2str(e));
        if (txe)
            rd_kafka_error_destroy(txe);
        rd_kafka_error_t *ae = rd_kafka_abort_transaction(producer, 60000);
        if (ae)
            rd_kafka_error_destroy(ae);
        return -1;
    }
    if (moved)
        *moved = count;
    return 0;
}

void ks_grow_changelogs_free(ks_grow_changelog *c, size_t n)
{
    for (size_t i = 0; c && i < n; i++) {
        for (size_t k = 0; k < c[i].count; k++) {
            free(c[i].entries[k].key);
            free(c[i].entries[k].value);
        }
        free(c[i].entries);
        free(c[i].versions);
    }
    free(c);
}
