/*
 * topic_plan.c - the topics a pipeline needs, made sure of (topic_plan.h).
 */
#include "runtime/topic_plan.h"

#include <stdio.h>

#include "kafka/kafka.h"
#include "outbox/outbox_requests.h"
#include "kafka/topics.h"

static int sources(rd_kafka_t *rk, const ks_pipeline *p, int32_t *tasks, char *err,
                   size_t errlen)
{
    for (size_t i = 0; i < p->source_count; i++) {
        const ks_cfg_source *s = &p->sources[i];
        if (s->internal)
            continue; /* repartition topics: sized after the sources */
        /* a table's topic is its store's changelog: made compacted */
        static const char *const compact[] = {"cleanup.policy", "compact", NULL};
        ks_topic_spec spec = {.topic = s->topic, .what = s->table ? "table" : "source",
                              .create = s->create, .partitions = s->partitions,
                              .replication = p->replication_factor,
                              .strict_partitions = 1, .configs = s->table ? compact : NULL};
        ks_topic_found f;
        int rc = ks_topic_ensure(rk, &spec, &f, err, errlen);
        if (rc != 0)
            return rc;
        /* tables come after the streams; without streams the first table
         * sets the number of tasks */
        if (s->table && *tasks && f.partitions != *tasks) {
            snprintf(err, errlen,
                     "%s:%d:%d: table '%s' is not co-partitioned with the sources: its "
                     "topic %s has %d partitions, the sources %d; a task looks records up "
                     "in the table partition of its own number, so the table's topic "
                     "needs %d partitions, keyed as the streams that join it",
                     s->mark.file, s->mark.line, s->mark.col, s->name, s->topic,
                     (int)f.partitions, (int)*tasks, (int)*tasks);
            return -1;
        }
        if (*tasks && f.partitions != *tasks) {
            snprintf(err, errlen,
                     "source topics are not co-partitioned: %s has %d partitions, others %d",
                     s->topic, (int)f.partitions, (int)*tasks);
            return -1;
        }
        *tasks = f.partitions;
    }
    return 0;
}

/* Global tables' topics: read whole by every process, so any partition
 * count will do (no co-partitioning); created compacted when missing. */
static int globals(rd_kafka_t *rk, const ks_pipeline *p, char *err, size_t errlen)
{
    static const char *const compact[] = {"cleanup.policy", "compact", NULL};
    for (size_t i = 0; i < p->global_count; i++) {
        const ks_cfg_source *s = &p->globals[i];
        ks_topic_spec spec = {.topic = s->topic, .what = "global table", .create = s->create,
                              .partitions = s->partitions,
                              .replication = p->replication_factor, .configs = compact};
        int rc = ks_topic_ensure(rk, &spec, NULL, err, errlen);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Topics the engine writes to (sinks, dead letters, outbox requests): any
 * partition count will do; created with `partitions` when missing. */
static int output(rd_kafka_t *rk, const ks_pipeline *p, const char *topic, const char *what,
                  int create, int32_t partitions, int internal, char *err, size_t errlen)
{
    ks_topic_spec spec = {.topic = topic, .what = what, .create = create,
                          .partitions = partitions, .replication = p->replication_factor,
                          .internal = internal};
    return ks_topic_ensure(rk, &spec, NULL, err, errlen);
}

/* Repartition topics (repartition.h): the sources' count of partitions; an
 * existing one must have exactly that many, or records would go to other
 * tasks than their key's. Deleted by DeleteRecords after each commit, never
 * by age. A task per partition number runs every sub-topology, with its
 * stores in one state directory: partition p of every topic it reads must
 * be assigned to the same consumer, which the range assignor does only for
 * topics of the same partition count. So `repartition: { partitions: N }`
 * must say the sources' count (docs/repartition.md). */
static int repartitions(rd_kafka_t *rk, const ks_pipeline *p, int32_t tasks, char *err,
                        size_t errlen)
{
    static const char *const configs[] = {"cleanup.policy", "delete", "retention.ms", "-1",
                                          NULL};
    for (size_t i = 0; i < p->source_count; i++) {
        const ks_cfg_source *s = &p->sources[i];
        if (!s->internal)
            continue;
        int32_t want = s->partitions > 0 ? s->partitions : tasks;
        if (want != tasks) {
            snprintf(err, errlen,
                     "%s:%d:%d: repartition topic %s: `repartition: { partitions: %d }` "
                     "differs from the %d partitions of the sources; every sub-topology "
                     "runs in the task of the same partition number, so the topic needs "
                     "%d partitions (drop `partitions:` or set it to %d)",
                     s->mark.file, s->mark.line, s->mark.col, s->topic, (int)want, (int)tasks,
                     (int)tasks, (int)tasks);
            return -1;
        }
        ks_topic_spec spec = {.topic = s->topic, .what = "repartition", .create = 1,
                              .partitions = want, .need_partitions = want,
                              .replication = p->replication_factor, .internal = 1,
                              .configs = configs};
        int rc = ks_topic_ensure(rk, &spec, NULL, err, errlen);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int changelogs(rd_kafka_t *rk, const ks_topology *topo, int32_t tasks, char *err,
                      size_t errlen)
{
    const ks_pipeline *p = topo->pipeline;
    for (size_t i = 0; i < p->store_count; i++) {
        if (!p->stores[i].changelog)
            continue;
        char topic[512];
        ks_changelog_topic(topo, p->stores[i].name, topic, sizeof topic);
        ks_topic_spec spec = {.topic = topic, .what = "changelog", .create = 1,
                              .partitions = tasks, .need_partitions = tasks,
                              .replication = p->replication_factor, .compact = 1,
                              .internal = 1};
        int rc = ks_topic_ensure(rk, &spec, NULL, err, errlen);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int ks_topic_plan_prepare(ks_topology *topo, char *err, size_t errlen)
{
    const ks_pipeline *p = topo->pipeline;
    rd_kafka_t *rk = ks_kafka_admin_client(p, err, errlen);
    if (!rk)
        return -1;
    int32_t tasks = 0;
    int rc;
    if ((rc = sources(rk, p, &tasks, err, errlen)) != 0 || (rc = globals(rk, p, err, errlen)) != 0)
        goto out;
    if ((rc = repartitions(rk, p, tasks, err, errlen)) != 0)
        goto out;
    for (size_t i = 0; i < p->sink_count; i++) {
        const ks_cfg_sink *s = &p->sinks[i];
        if (s->feeds)
            continue; /* a repartition topic, made sure of above */
        rc = output(rk, p, s->topic, "sink", s->create, s->partitions > 0 ? s->partitions : tasks,
                    0, err, errlen);
        if (rc != 0)
            goto out;
    }
    if (p->poison == KS_POISON_DEAD_LETTER &&
        (rc = output(rk, p, p->dead_letter_topic, "dead-letter", 1, tasks, 0, err, errlen)) != 0)
        goto out;
    if (p->outbox) {
        char topic[512];
        ks_outbox_requests_topic(p, topic, sizeof topic);
        if ((rc = output(rk, p, topic, "outbox requests", 1, tasks, 1, err, errlen)) != 0)
            goto out;
    }
    if ((rc = changelogs(rk, topo, tasks, err, errlen)) != 0)
        goto out;
    topo->partitions = tasks;
    rc = 0;
out:
    rd_kafka_destroy(rk);
    return rc;
}
