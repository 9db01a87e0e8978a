/*
 * topics.c - create and verify topics through the admin API (topics.h).
 */
#include "kafka/topics.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"

#define ADMIN_TIMEOUT_MS 30000
/* KS_TOPIC_UNAVAILABLE (topics.h): no answer in time, or the broker said
 * to try again later */
#define TRANSIENT KS_TOPIC_UNAVAILABLE

static int transient(rd_kafka_resp_err_t e)
{
    switch (e) {
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE:
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
    case RD_KAFKA_RESP_ERR__RESOLVE:
    case RD_KAFKA_RESP_ERR__WAIT_COORD:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_BROKER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_CONTROLLER:
    case RD_KAFKA_RESP_ERR_NOT_COORDINATOR:
    case RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS:
    case RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION:
        return 1;
    default:
        return 0;
    }
}

static int metadata_of(rd_kafka_t *rk, const char *topic, int timeout_ms, ks_topic_found *out,
                       char *err, size_t errlen)
{
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, &md, timeout_ms);
    rd_kafka_topic_destroy(rkt);
    if (e) {
        snprintf(err, errlen,
                 "metadata for topic %s: %s (is the broker at the bootstrap address up?)", topic,
                 rd_kafka_err2str(e));
        return transient(e) ? TRANSIENT : -1;
    }
    int rc = 0;
    if (md->topic_cnt == 1) {
        const struct rd_kafka_metadata_topic *t = &md->topics[0];
        if (t->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
            rc = 0;
        else if (t->err) {
            snprintf(err, errlen, "metadata for topic %s: %s", topic, rd_kafka_err2str(t->err));
            rc = transient(t->err) ? TRANSIENT : -1;
        } else if (t->partition_cnt > 0) {
            out->partitions = t->partition_cnt;
            out->replication = INT32_MAX;
            for (int i = 0; i < t->partition_cnt; i++)
                if (t->partitions[i].replica_cnt < out->replication)
                    out->replication = t->partitions[i].replica_cnt;
            rc = 1;
        }
    }
    rd_kafka_metadata_destroy(md);
    return rc;
}

/* cleanup.policy of an existing topic into out->cleanup_policy ("" when the
 * broker does not know the topic's configuration yet, or gave no value:
 * the caller decides whether that matters). 0 or -1 with err. */
static int cleanup_policy_of(rd_kafka_t *rk, const char *topic, ks_topic_found *out,
                             char *err, size_t errlen)
{
    char why[512];
    out->cleanup_policy[0] = '\0';
    rd_kafka_ConfigResource_t *cr = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *opt =
        rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
    rd_kafka_AdminOptions_set_request_timeout(opt, ADMIN_TIMEOUT_MS, why, sizeof why);
    rd_kafka_DescribeConfigs(rk, &cr, 1, opt, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, ADMIN_TIMEOUT_MS + 5000);
    int rc = -1;
    if (!ev) {
        snprintf(err, errlen, "describing the configuration of topic %s: no answer", topic);
        rc = TRANSIENT;
    } else if (rd_kafka_event_error(ev)) {
        snprintf(err, errlen, "describing the configuration of topic %s: %s", topic,
                 rd_kafka_event_error_string(ev));
        rc = transient(rd_kafka_event_error(ev)) ? TRANSIENT : -1;
    } else {
        size_t n = 0, m = 0;
        const rd_kafka_ConfigResource_t **rs = rd_kafka_DescribeConfigs_result_resources(
            rd_kafka_event_DescribeConfigs_result(ev), &n);
        rd_kafka_resp_err_t re = n == 1 ? rd_kafka_ConfigResource_error(rs[0]) : 0;
        if (re == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
            /* in the metadata of one broker, not yet in the configuration
             * of the one answering (seen on a three-broker 4.4.0 cluster
             * right after the create): the caller looks again */
            rc = 0;
        } else if (re) {
            snprintf(err, errlen, "describing the configuration of topic %s: %s", topic,
                     rd_kafka_ConfigResource_error_string(rs[0]));
            rc = transient(re) ? TRANSIENT : -1;
        } else {
            const rd_kafka_ConfigEntry_t **ce = n == 1 ? rd_kafka_ConfigResource_configs(rs[0], &m)
                                                       : NULL;
            for (size_t i = 0; i < m; i++) {
                const char *v = rd_kafka_ConfigEntry_value(ce[i]);
                if (strcmp(rd_kafka_ConfigEntry_name(ce[i]), "cleanup.policy") == 0 && v)
                    snprintf(out->cleanup_policy, sizeof out->cleanup_policy, "%s", v);
            }
            rc = 0;
        }
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(opt);
    rd_kafka_queue_destroy(q);
    rd_kafka_ConfigResource_destroy(cr);
    return rc;
}

/* ks_topic_describe, but TRANSIENT when it may answer if asked again. */
static int describe(rd_kafka_t *rk, const char *topic, int timeout_ms, ks_topic_found *out,
                    char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    int rc = metadata_of(rk, topic, timeout_ms, out, err, errlen);
    if (rc == 1) {
        int c = cleanup_policy_of(rk, topic, out, err, errlen);
        if (c != 0)
            return c;
    }
    return rc;
}

int ks_topic_describe(rd_kafka_t *rk, const char *topic, int timeout_ms, ks_topic_found *out,
                      char *err, size_t errlen)
{
    int rc = describe(rk, topic, timeout_ms, out, err, errlen);
    return rc == TRANSIENT ? -1 : rc;
}

/* CreateTopics: 1 created, 0 it already existed, -1 error. */
static int create(rd_kafka_t *rk, const ks_topic_spec *s, char *err, size_t errlen)
{
    char why[512];
    rd_kafka_NewTopic_t *nt =
        rd_kafka_NewTopic_new(s->topic, s->partitions, s->replication, why, sizeof why);
    if (!nt) {
        snprintf(err, errlen, "topic %s: %s", s->topic, why);
        return -1;
    }
    if (s->compact)
        rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "compact");
    for (size_t i = 0; s->configs && s->configs[i]; i += 2)
        rd_kafka_NewTopic_set_config(nt, s->configs[i], s->configs[i + 1]);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *opt = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_AdminOptions_set_operation_timeout(opt, ADMIN_TIMEOUT_MS, why, sizeof why);
    rd_kafka_CreateTopics(rk, &nt, 1, opt, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 2 * ADMIN_TIMEOUT_MS);
    int rc = -1;
    if (!ev) {
        snprintf(err, errlen, "creating topic %s: no answer from the broker in %d s", s->topic,
                 2 * ADMIN_TIMEOUT_MS / 1000);
        rc = TRANSIENT;
    } else if (rd_kafka_event_error(ev)) {
        snprintf(err, errlen, "creating topic %s: %s", s->topic, rd_kafka_event_error_string(ev));
        rc = transient(rd_kafka_event_error(ev)) ? TRANSIENT : -1;
    } else {
        size_t n;
        const rd_kafka_topic_result_t **tr = rd_kafka_CreateTopics_result_topics(
            rd_kafka_event_CreateTopics_result(ev), &n);
        rd_kafka_resp_err_t te = n ? rd_kafka_topic_result_error(tr[0]) : 0;
        if (!te)
            rc = 1;
        else if (te == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
            rc = 0;
        else if (transient(te)) {
            snprintf(err, errlen, "creating topic %s: %s", s->topic,
                     rd_kafka_topic_result_error_string(tr[0]));
            rc = TRANSIENT;
        } else if (s->replication > 0)
            snprintf(err, errlen, "creating topic %s (%d partitions, replication %d): %s",
                     s->topic, (int)s->partitions, (int)s->replication,
                     rd_kafka_topic_result_error_string(tr[0]));
        else
            snprintf(err, errlen,
                     "creating topic %s (%d partitions, the broker's default replication): %s",
                     s->topic, (int)s->partitions, rd_kafka_topic_result_error_string(tr[0]));
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(opt);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
    return rc;
}

/* A created topic may take a moment to show in the metadata of the broker
 * we ask (seen on Kafka 3.9), and its configuration on another broker of a
 * cluster (seen on 4.4.0): look again for up to ~10 s. */
static int describe_settled(rd_kafka_t *rk, const char *topic, ks_topic_found *f, char *err,
                            size_t errlen)
{
    int rc = 0;
    for (int i = 0; i < 50 && (rc == 0 || (rc == 1 && !f->cleanup_policy[0])); i++) {
        if (i)
            rd_kafka_poll(rk, 200);
        rc = describe(rk, topic, 5000, f, err, errlen);
    }
    if (rc == 0)
        snprintf(err, errlen, "topic %s created but not visible in metadata after 10 s", topic);
    return rc == 1 ? 0 : rc == TRANSIENT ? TRANSIENT : -1;
}

static int has_compact(const char *policy)
{
    return strstr(policy, "compact") != NULL;
}

/* An existing engine topic of the state (a compacted changelog, a
 * repartition topic) whose count differs from the sources' because they
 * were grown, or a grow-partitions run did not finish: the message points
 * at grow-partitions, since deleting the topic would lose the state. 1
 * with err written, 0 when that is not the case. */
static int grown_count(const ks_topic_spec *s, const ks_topic_found *f, char *err,
                       size_t errlen)
{
    int state = s->compact ? has_compact(f->cleanup_policy) : s->internal;
    if (s->need_partitions <= 0 || !state || f->partitions == s->need_partitions)
        return 0;
    if (f->partitions < s->need_partitions && s->compact)
        snprintf(err, errlen,
                 "%s topic %s has %d partitions, expected %d: if the sources gained "
                 "partitions, stop every process of the application and run `kstreams "
                 "grow-partitions FILE --partitions %d`, which grows the changelogs and "
                 "moves each key's state to its new partition (docs/operations.md)",
                 s->what, s->topic, (int)f->partitions, (int)s->need_partitions,
                 (int)s->need_partitions);
    else if (f->partitions > s->need_partitions)
        snprintf(err, errlen,
                 "%s topic %s has %d partitions, expected %d (the sources' count): if a "
                 "`kstreams grow-partitions FILE --partitions %d` run did not finish, run "
                 "it again (docs/operations.md); if the sources were re-created with fewer "
                 "partitions, delete it",
                 s->what, s->topic, (int)f->partitions, (int)s->need_partitions,
                 (int)f->partitions);
    else
        return 0;
    return 1;
}

/* Compare what exists with what `s` needs; 0 or -1 with err. `ours`: the
 * engine created it just now (a mismatch then means someone raced us). */
static int check_found(const ks_topic_spec *s, const ks_topic_found *f, int ours, char *err,
                       size_t errlen)
{
    const char *who = ours ? "" : " (it existed before this start; if nothing else created "
                                  "it, a client auto-created it: auto.create.topics.enable "
                                  "is on at the broker)";
    if (!ours && grown_count(s, f, err, errlen))
        return -1;
    if (s->need_partitions > 0 && f->partitions != s->need_partitions) {
        snprintf(err, errlen,
                 "%s topic %s has %d partitions, expected %d%s: delete it%s, or create it "
                 "with %d partitions before the start",
                 s->what, s->topic, (int)f->partitions, (int)s->need_partitions, who,
                 s->compact ? " (the state is rebuilt from the sources' history only if "
                              "they still hold it)"
                            : "",
                 (int)s->need_partitions);
        return -1;
    }
    if (s->compact && f->cleanup_policy[0] && !has_compact(f->cleanup_policy)) {
        snprintf(err, errlen,
                 "%s topic %s has cleanup.policy=%s, expected compact%s: retention would "
                 "delete state a restore needs; set cleanup.policy=compact on it "
                 "(kafka-configs --alter --add-config cleanup.policy=compact)",
                 s->what, s->topic, f->cleanup_policy, who);
        return -1;
    }
    if (s->internal && s->replication > 0 && f->replication < s->replication) {
        snprintf(err, errlen,
                 "%s topic %s has replication factor %d, expected %d (replication_factor)%s: "
                 "reassign its partitions or recreate it",
                 s->what, s->topic, (int)f->replication, (int)s->replication, who);
        return -1;
    }
    return 0;
}

int ks_topic_ensure(rd_kafka_t *rk, const ks_topic_spec *s, ks_topic_found *found, char *err,
                    size_t errlen)
{
    ks_topic_found f;
    int rc = describe(rk, s->topic, 10000, &f, err, errlen);
    /* a topic created a moment ago by someone else may not be in this
     * broker's metadata yet: look again before calling it missing */
    for (int i = 0; rc == 0 && !s->create && i < 25; i++) {
        rd_kafka_poll(rk, 200);
        rc = describe(rk, s->topic, 10000, &f, err, errlen);
    }
    if (rc < 0)
        return rc;
    int created = 0, raced = 0;
    if (rc == 0) {
        if (!s->create) {
            snprintf(err, errlen,
                     "%s topic '%s' does not exist: create it, or set `create: true` "
                     "(with `partitions:`) in the pipeline",
                     s->what, s->topic);
            return -1;
        }
        int c = create(rk, s, err, errlen);
        if (c < 0)
            return c;
        int settled = describe_settled(rk, s->topic, &f, err, errlen);
        if (settled != 0)
            return settled;
        created = c == 1;
        raced = c == 0;
        ks_info("kafka", "%s %s topic %s: %d partition%s, replication %d, cleanup.policy=%s",
                created ? "created" : "another client created", s->what, s->topic,
                (int)f.partitions, f.partitions == 1 ? "" : "s", (int)f.replication,
                f.cleanup_policy[0] ? f.cleanup_policy : "(not reported)");
    }
    if (check_found(s, &f, created, err, errlen) != 0)
        return -1;
    if (raced && s->strict_partitions && f.partitions != s->partitions) {
        snprintf(err, errlen,
                 "%s topic %s appeared while the engine was creating it, with %d partitions "
                 "instead of %d: a client auto-created it (auto.create.topics.enable=true at "
                 "the broker); delete it, or create it with %d partitions before the start",
                 s->what, s->topic, (int)f.partitions, (int)s->partitions, (int)s->partitions);
        return -1;
    }
    if (found)
        *found = f;
    return 0;
}
