/*
 * kafka.h - librdkafka set-up shared by workers and tools: the base
 * configuration every client gets, metadata look-ups, and topic creation
 * through the admin API.
 */
#ifndef KS_KAFKA_H
#define KS_KAFKA_H

#include <librdkafka/rdkafka.h>

#include "config/config.h"

/* librdkafka's log callback, set on every conf ks_kafka_conf makes: one
 * line of the engine's log ("[librdkafka] rdkafka#producer-1 FAC: text"),
 * syslog level 0..3 as ERROR, 4 WARN, 5..6 INFO, 7 DEBUG; so KS_LOG_LEVEL
 * and KS_LOG_JSON apply to librdkafka's lines too. Any thread. */
void ks_kafka_log_line(const rd_kafka_t *rk, int level, const char *fac, const char *buf);

/* Base config for a client of `type`: bootstrap servers, the settings that
 * matter for speed and correctness (kafka.c says which), then `defaults`
 * (NULL-terminated name, value pairs; may be NULL), then the pipeline's
 * `kafka.properties` that apply to `type` (librdkafka's C/P scope: a
 * consumer-only property is not given to producers and the other way
 * round), then `forced` (pairs the engine's guarantees depend on; may be
 * NULL). Returns a new conf owned by the caller, or NULL with err set. */
rd_kafka_conf_t *ks_kafka_conf(const ks_pipeline *p, rd_kafka_type_t type,
                               const char *const *defaults, const char *const *forced,
                               char *err, size_t errlen);

/* rd_kafka_new of `type` with `conf`, which it takes in every case
 * (librdkafka keeps a conf only when it succeeds; on failure it is
 * destroyed here). A new client owned by the caller, or NULL with err
 * "WHAT: reason". */
rd_kafka_t *ks_kafka_new(rd_kafka_type_t type, rd_kafka_conf_t *conf, const char *what,
                         char *err, size_t errlen);

/* Set one property; returns 0 or -1 with err "name=value: reason". */
int ks_kafka_set(rd_kafka_conf_t *conf, const char *name, const char *value,
                 char *err, size_t errlen);

/* A producer for admin and metadata calls. NULL with err on failure. */
rd_kafka_t *ks_kafka_admin_client(const ks_pipeline *p, char *err, size_t errlen);

/* A read_committed consumer in group `<application>-<suffix>` that commits
 * nothing by itself (no auto commit, no auto offset store) and starts at
 * the earliest offset: the outbox's side consumers and the standby
 * thread's assign-only one. `on_rebalance` may be
 * NULL (assign-only use); `opaque` is passed to it. Returns a new client
 * owned by the caller, or NULL with err naming `what`. */
rd_kafka_t *ks_kafka_side_consumer(const ks_pipeline *p, const char *suffix,
                                   void (*on_rebalance)(rd_kafka_t *, rd_kafka_resp_err_t,
                                                        rd_kafka_topic_partition_list_t *,
                                                        void *),
                                   void *opaque, const char *what, char *err,
                                   size_t errlen);

/* An assign-only consumer (it never joins a group: the group.id
 * `<application>-<suffix>` only keeps librdkafka 2.0.2 from looping on
 * _UNKNOWN_GROUP) that commits nothing, starts at the earliest offset and
 * reports the end of each partition (enable.partition.eof): the restorer's
 * and the global tables' readers. `isolation` is "read_committed" or
 * "read_uncommitted"; `defaults` (NULL-terminated key/value pairs, NULL for
 * a 50 ms fetch wait) yield to the user's kafka settings. Returns a new
 * client owned by the caller, or NULL with err naming `what`. */
rd_kafka_t *ks_kafka_assign_consumer(const ks_pipeline *p, const char *suffix,
                                     const char *isolation, const char *const *defaults,
                                     const char *what, char *err, size_t errlen);

/* Partition count of `topic`: > 0, 0 when the topic does not exist, -1 on
 * error (err set). */
int ks_kafka_partition_count(rd_kafka_t *rk, const char *topic, int timeout_ms,
                             char *err, size_t errlen);

/* Where a copy of a partition (a store, a global table) that would go on
 * reading at `next` stands against the partition's log start `lo` and
 * high watermark `hi` (< 0: unknown). */
typedef struct ks_offset_gone {
    const char *side; /* "below the log start" or "past the end" */
    int64_t bound;    /* lo or hi */
    const char *why;  /* "records deleted" (DeleteRecords, retention) or "the
                       * topic created again, or records lost" */
} ks_offset_gone;

/* 1 (and *out, its strings static) when `next` (>= 0) is outside
 * [lo, hi]: the records it would go on from are gone and the copy must be
 * rebuilt from the log start, as Kafka Streams does; 0 when it is inside,
 * or when next < 0 (no position). Past hi is no leader change: until a new
 * leader's high watermark reaches the start offset of its epoch (which
 * holds every record an acks=all producer had acknowledged), ListOffsets
 * answers OFFSET_NOT_AVAILABLE rather than a lower end. */
int ks_kafka_offset_gone(int64_t next, int64_t lo, int64_t hi, ks_offset_gone *out);

#endif /* KS_KAFKA_H */
