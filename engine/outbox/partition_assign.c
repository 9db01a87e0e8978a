/*
 * partition_assign.c - sequential partition assignment (see the header for
 * why the claims log, read in order, is the authority).
 *
 * Kafka handles: one idempotent producer (claims, and admin calls), one
 * consumer assigned to the claims partition (never commits; its position
 * is the "next" offset kept durably in the outbox env).
 */
#include "outbox/partition_assign.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka/kafka.h"
#include "kafka/topic_grow.h"
#include "kafka/topics.h"
#include "base/log.h"

#define CATCHUP_TIMEOUT_MS 15000

struct ks_assigner {
    ks_outbox *ob;
    const ks_pipeline *p;
    char *topic;
    char claims[512];
    int max_users;
    ks_store_db *assign, *meta;
    int64_t next;  /* next claims offset to read */
    int64_t slots; /* distinct users read so far */
    int32_t count; /* partitions of topic as last seen */
    rd_kafka_t *prod, *cons;
    int assigned; /* cons is assigned at `next` */
};

/* --- local cache ------------------------------------------------------ */

static int64_t meta_get(ks_assigner *a, const char *name)
{
    ks_bytes k = {name, strlen(name)}, v;
    if (ks_store_get(a->meta, k, &v) == 0 && v.len == 8)
        return ks_int64_decode(v.data);
    return 0;
}

static int meta_put(ks_assigner *a, const char *name, int64_t x)
{
    unsigned char b[8];
    ks_int64_encode(x, b);
    ks_bytes k = {name, strlen(name)}, v = {b, 8};
    return ks_store_put(a->meta, k, v);
}

int ks_assigner_new(ks_outbox *ob, const ks_pipeline *p, const char *topic,
                    int max_users_per_partition, ks_assigner **out, char *err,
                    size_t errlen)
{
    *out = NULL;
    if (max_users_per_partition < 1)
        return KS_ERR_INVALID;
    ks_assigner *a = calloc(1, sizeof *a);
    if (!a || !(a->topic = strdup(topic))) {
        free(a);
        return KS_ERR_NOMEM;
    }
    a->ob = ob;
    a->p = p;
    a->max_users = max_users_per_partition;
    snprintf(a->claims, sizeof a->claims, "%s-user-partitions", p->application);
    ks_store_env *env = ks_outbox_env(ob);
    ks_outbox_lock(ob);
    int rc = ks_store_db_open(env, "assign", &a->assign);
    if (rc == 0)
        rc = ks_store_db_open(env, "assign_meta", &a->meta);
    if (rc == 0 && (rc = ks_store_begin(env)) == 0) {
        a->next = meta_get(a, "next");
        a->slots = meta_get(a, "slots");
        ks_store_abort(env);
    }
    if (rc)
        snprintf(err, errlen, "partition assignment: %s", ks_store_last_error(env));
    ks_outbox_unlock(ob);
    if (rc) {
        ks_assigner_free(a);
        return rc;
    }
    *out = a;
    return 0;
}

void ks_assigner_free(ks_assigner *a)
{
    if (!a)
        return;
    if (a->cons) {
        rd_kafka_consumer_close(a->cons);
        rd_kafka_destroy(a->cons);
    }
    if (a->prod) {
        rd_kafka_flush(a->prod, 5000);
        rd_kafka_destroy(a->prod);
    }
    free(a->topic);
    free(a);
}

int32_t ks_assigner_partition_count(const ks_assigner *a) { return a->count; }

/* With the outbox lock and a txn held. */
static int lookup_locked(ks_assigner *a, const char *user, int32_t *partition)
{
    ks_bytes k = {user, strlen(user)}, v;
    int rc = ks_store_get(a->assign, k, &v);
    if (rc == 0) {
        if (v.len != 8)
            return KS_ERR_INVALID;
        *partition = (int32_t)ks_int64_decode(v.data);
    }
    return rc;
}

int ks_assigner_lookup(ks_assigner *a, const char *user, int32_t *partition)
{
    ks_store_env *env = ks_outbox_env(a->ob);
    ks_outbox_lock(a->ob);
    int rc = ks_store_begin(env);
    if (rc == 0) {
        rc = lookup_locked(a, user, partition);
        ks_store_abort(env);
    }
    ks_outbox_unlock(a->ob);
    return rc;
}

/* Apply claims read from the log, in log order, in one txn. */
static int apply_claims(ks_assigner *a, char **users, size_t n, int64_t next)
{
    ks_store_env *env = ks_outbox_env(a->ob);
    ks_outbox_lock(a->ob);
    int rc = ks_store_begin(env);
    int64_t slots = a->slots;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        int32_t p;
        rc = lookup_locked(a, users[i], &p);
        if (rc != KS_ERR_NOT_FOUND)
            continue; /* first claim wins: a repeat changes nothing */
        unsigned char b[8];
        ks_int64_encode(slots / a->max_users, b);
        ks_bytes k = {users[i], strlen(users[i])}, v = {b, 8};
        rc = ks_store_put(a->assign, k, v);
        slots++;
    }
    if (rc == 0 && (rc = meta_put(a, "next", next)) == 0 &&
        (rc = meta_put(a, "slots", slots)) == 0)
        rc = ks_store_commit(env);
    else
        ks_store_abort(env);
    ks_outbox_unlock(a->ob);
    if (rc == 0) {
        a->slots = slots;
        a->next = next;
    }
    return rc;
}

/* --- Kafka ---------------------------------------------------------- */

/* Delivery report of a claim: the opaque points at the batch's error. */
static void on_claim_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    (void)opaque;
    int *failed = m->_private;
    if (m->err && failed)
        *failed = m->err;
}

static int clients(ks_assigner *a, char *err, size_t errlen)
{
    if (!a->prod) {
        static const char *const forced[] = {"enable.idempotence", "true", "acks", "all",
                                             "message.timeout.ms", "10000", NULL};
        rd_kafka_conf_t *c = ks_kafka_conf(a->p, RD_KAFKA_PRODUCER, NULL, forced, err, errlen);
        if (!c)
            return KS_ERR_IO;
        rd_kafka_conf_set_dr_msg_cb(c, on_claim_delivery);
        if (!(a->prod = ks_kafka_new(RD_KAFKA_PRODUCER, c, "partition assignment producer", err,
                                     errlen)))
            return KS_ERR_IO;
    }
    if (!a->cons) {
        char group[600];
        snprintf(group, sizeof group, "%s-assign-reader", a->p->application);
        /* a group id only because librdkafka wants one; nothing is committed */
        const char *const forced[] = {"group.id", group, "enable.auto.commit", "false",
                                      "enable.auto.offset.store", "false", NULL};
        rd_kafka_conf_t *c = ks_kafka_conf(a->p, RD_KAFKA_CONSUMER, NULL, forced, err, errlen);
        if (!c || !(a->cons = ks_kafka_new(RD_KAFKA_CONSUMER, c, "partition assignment consumer",
                                           err, errlen)))
            return KS_ERR_IO;
    }
    return 0;
}

static int ensure(ks_assigner *a, const char *topic, const char *const *configs,
                  int32_t *count, char *err, size_t errlen)
{
    ks_topic_spec spec = {.topic = topic, .what = "outbox", .create = 1, .partitions = 1,
                          .replication = a->p->replication_factor, .configs = configs,
                          .internal = 1};
    ks_topic_found f;
    if (ks_topic_ensure(a->prod, &spec, &f, err, errlen) != 0)
        return KS_ERR_IO;
    if (count)
        *count = f.partitions;
    return 0;
}

/* Read the claims log from `next` to its current end. */
static int catch_up(ks_assigner *a, char *err, size_t errlen)
{
    int64_t lo, hi;
    rd_kafka_resp_err_t e =
        rd_kafka_query_watermark_offsets(a->cons, a->claims, 0, &lo, &hi, 5000);
    if (e) {
        snprintf(err, errlen, "%s [0]: watermarks: %s", a->claims, rd_kafka_err2str(e));
        return KS_ERR_IO;
    }
    if (a->next >= hi)
        return 0;
    if (!a->assigned) {
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(l, a->claims, 0)->offset = a->next;
        e = rd_kafka_assign(a->cons, l);
        rd_kafka_topic_partition_list_destroy(l);
        if (e) {
            snprintf(err, errlen, "%s [0]: assign: %s", a->claims, rd_kafka_err2str(e));
            return KS_ERR_IO;
        }
        a->assigned = 1;
    }
    size_t n = 0, cap = 0;
    char **users = NULL;
    int64_t next = a->next, deadline = ks_outbox_now_ms() + CATCHUP_TIMEOUT_MS;
    int rc = 0;
    while (next < hi && rc == 0) {
        if (ks_outbox_now_ms() > deadline) {
            snprintf(err, errlen, "%s [0]: reading claims stuck at offset %lld of %lld",
                     a->claims, (long long)next, (long long)hi);
            rc = KS_ERR_IO;
            break;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(a->cons, 200);
        if (!m)
            continue;
        if (!m->err && m->offset >= next) {
            if (m->key_len > 0 && m->key_len <= KS_OUTBOX_MAX_USER) {
                if (n == cap) {
                    cap = cap ? cap * 2 : 256;
                    char **g = realloc(users, cap * sizeof *g);
                    if (!g)
                        rc = KS_ERR_NOMEM;
                    else
                        users = g;
                }
                if (rc == 0 && !(users[n++] = strndup(m->key, m->key_len)))
                    rc = KS_ERR_NOMEM;
            }
            next = m->offset + 1;
        }
        rd_kafka_message_destroy(m);
    }
    if (rc == 0 && (rc = apply_claims(a, users, n, next)) != 0)
        snprintf(err, errlen, "partition assignment: %s",
                 ks_store_last_error(ks_outbox_env(a->ob)));
    for (size_t i = 0; i < n; i++)
        free(users[i]);
    free(users);
    return rc;
}

int ks_assigner_sync(ks_assigner *a, char *err, size_t errlen)
{
    /* delete policy, kept forever: compaction would drop first claims of
     * users claimed twice and so shift every later user's slot */
    static const char *const claims_cfg[] = {"cleanup.policy", "delete", "retention.ms", "-1",
                                             "retention.bytes", "-1", NULL};
    int rc = clients(a, err, errlen);
    if (rc == 0 && (rc = ensure(a, a->claims, claims_cfg, NULL, err, errlen)) == 0 &&
        (rc = ensure(a, a->topic, NULL, &a->count, err, errlen)) == 0)
        rc = catch_up(a, err, errlen);
    return rc;
}

int ks_assigner_grow(ks_assigner *a, int32_t count, char *err, size_t errlen)
{
    return ks_topic_grow(a->prod, a->topic, count, &a->count, err, errlen) ? KS_ERR_IO : 0;
}

/* Append one claim per user; wait for every delivery. */
static int claim(ks_assigner *a, const char *const *users, size_t n, char *err,
                 size_t errlen)
{
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        rd_kafka_resp_err_t e = rd_kafka_producev(
            a->prod, RD_KAFKA_V_TOPIC(a->claims), RD_KAFKA_V_PARTITION(0),
            RD_KAFKA_V_KEY(users[i], strlen(users[i])), RD_KAFKA_V_OPAQUE(&failed),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        if (e) {
            snprintf(err, errlen, "%s: claim for user %s: %s", a->claims, users[i],
                     rd_kafka_err2str(e));
            rd_kafka_flush(a->prod, 10000);
            return KS_ERR_IO;
        }
    }
    if (rd_kafka_flush(a->prod, 15000) != 0 || failed) {
        snprintf(err, errlen, "%s: claims not delivered: %s", a->claims,
                 failed ? rd_kafka_err2str(failed) : "timed out");
        return KS_ERR_IO;
    }
    return 0;
}

int ks_assigner_assign(ks_assigner *a, const char *const *users, size_t n,
                       int32_t *partitions, char *err, size_t errlen)
{
    const char **missing = calloc(n ? n : 1, sizeof *missing);
    if (!missing)
        return KS_ERR_NOMEM;
    size_t nmiss = 0;
    int rc = 0;
    for (int round = 0; round < 2 && rc == 0; round++) {
        nmiss = 0;
        for (size_t i = 0; i < n && rc == 0; i++) {
            rc = ks_assigner_lookup(a, users[i], &partitions[i]);
            if (rc == KS_ERR_NOT_FOUND) {
                rc = 0;
                partitions[i] = -1;
                missing[nmiss++] = users[i];
            }
        }
        if (rc || nmiss == 0)
            break;
        /* round 0: another instance may have claimed them already */
        if (round == 0)
            rc = ks_assigner_sync(a, err, errlen);
        else if ((rc = claim(a, missing, nmiss, err, errlen)) == 0)
            rc = catch_up(a, err, errlen);
    }
    if (rc == 0 && nmiss) {
        /* round 1 claimed them; read back what the log decided */
        for (size_t i = 0; i < n && rc == 0; i++)
            if (partitions[i] < 0 &&
                (rc = ks_assigner_lookup(a, users[i], &partitions[i])) != 0)
                snprintf(err, errlen, "user %s: claimed but not in the claims log",
                         users[i]);
    }
    free(missing);
    int32_t need = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (partitions[i] + 1 > need)
            need = partitions[i] + 1;
    if (rc == 0 && need > a->count)
        rc = ks_assigner_grow(a, need, err, errlen);
    return rc;
}
