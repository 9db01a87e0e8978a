/*
 * topics.h - make sure a topic exists as the engine needs it, through the
 * admin API, and say what it found.
 *
 * Topics are created before any other client of the engine touches them,
 * and every client runs with allow.auto.create.topics=false: on a broker
 * with auto.create.topics.enable=true (Kafka's default) a metadata request
 * for a missing topic would otherwise create it with the broker's
 * num.partitions and cleanup.policy (1 partition, delete), racing our own
 * CreateTopics. "Already exists" is never taken on trust: what exists is
 * described and compared with what the engine needs.
 */
#ifndef KS_TOPICS_H
#define KS_TOPICS_H

#include <stdint.h>

#include <librdkafka/rdkafka.h>

/* ks_topic_ensure's answer when asking again later may succeed. */
#define KS_TOPIC_UNAVAILABLE (-2)

/* What the engine needs of one topic. Strings are borrowed. */
typedef struct ks_topic_spec {
    const char *topic;
    const char *what;          /* "source", "changelog", ...: for messages  */
    int create;                /* create it when missing                    */
    int32_t partitions;        /* to create with (> 0)                      */
    int32_t need_partitions;   /* > 0: an existing topic must have exactly this */
    int32_t replication;       /* to create with; -1: the broker's default  */
    int compact;               /* cleanup.policy must include compact       */
    int internal;              /* the engine's own topic: an existing one must
                                  have at least `replication` replicas      */
    int strict_partitions;     /* one that another client created while this
                                  call created it must have `partitions`
                                  (a source: auto-created with the broker's
                                  count it would break co-partitioning)     */
    const char *const *configs; /* NULL or NULL-terminated name, value pairs
                                   set on a topic this call creates          */
} ks_topic_spec;

/* What a described topic has. */
typedef struct ks_topic_found {
    int32_t partitions;
    int32_t replication;       /* fewest replicas of any partition          */
    char cleanup_policy[64];   /* "" when the broker did not say            */
} ks_topic_found;

/* Describe `topic`: 1 and *out filled when it exists, 0 when it does not,
 * -1 with err on error. Never creates it (the client must have
 * allow.auto.create.topics=false, as ks_kafka_conf sets). */
int ks_topic_describe(rd_kafka_t *rk, const char *topic, int timeout_ms, ks_topic_found *out,
                      char *err, size_t errlen);

/* Make sure `spec->topic` exists as `spec` says: create it when missing
 * and allowed, wait until the metadata shows it, then check partitions,
 * cleanup.policy and (when spec->replication > 0) replication. A mismatch
 * is an error naming the topic, what was expected, what was found and how
 * to fix it. `found` (may be NULL) receives what exists. `rk` is borrowed.
 * Returns 0, -1 with err, or KS_TOPIC_UNAVAILABLE with err when the broker
 * gave no answer in time or said to try later (down, restarting, no
 * controller or coordinator yet, a coordinator still loading): the caller
 * may try again. */
int ks_topic_ensure(rd_kafka_t *rk, const ks_topic_spec *spec, ks_topic_found *found,
                    char *err, size_t errlen);

#endif /* KS_TOPICS_H */
