/*
 * grow_partitions.c - see grow_partitions.h.
 */
#include "runtime/grow_partitions.h"

#include <stdlib.h>
#include <string.h>

#include "base/fault.h"
#include "kafka/kafka.h"
#include "kafka/topic_grow.h"
#include "runtime/grow_move.h"

/* One topic the growth touches. */
typedef struct grown {
    const char *topic; /* borrowed */
    const char *what;  /* "source", "repartition", "changelog" */
    int32_t count;     /* partitions before; 0: the engine's, not made yet */
} grown;

typedef struct run {
    const ks_topology *t;
    const ks_grow_plan *plan;
    int32_t n;
    FILE *out;
    rd_kafka_t *producer, *committed, *uncommitted;
    grown *topics;
    size_t topic_count;
    int32_t old; /* tasks the state was built for */
    ks_grow_part *parts;
    size_t part_count;
    ks_grow_changelog *changelogs;
} run;

static rd_kafka_t *consumer(const ks_pipeline *p, int committed, char *err, size_t errlen)
{
    const char *const forced[] = {"isolation.level",
                                  committed ? "read_committed" : "read_uncommitted",
                                  "enable.auto.commit", "false", "enable.auto.offset.store",
                                  "false", "enable.partition.eof", "true", "auto.offset.reset",
                                  "earliest", "group.id", p->application, NULL};
    /* only the read_committed one needs the group: its committed offsets */
    rd_kafka_conf_t *c = ks_kafka_conf(p, RD_KAFKA_CONSUMER, NULL, forced, err, errlen);
    if (!c)
        return NULL;
    if (!committed && ks_kafka_set(c, "group.id", "", err, errlen) != 0) {
        rd_kafka_conf_destroy(c);
        return NULL;
    }
    return ks_kafka_new(RD_KAFKA_CONSUMER, c, "grow-partitions consumer", err, errlen);
}

static rd_kafka_t *producer(const ks_pipeline *p, char *err, size_t errlen)
{
    char txid[600];
    snprintf(txid, sizeof txid, "%s-grow-partitions", p->application);
    const char *const defaults[] = {"transaction.timeout.ms", "300000", NULL};
    const char *const forced[] = {"transactional.id", txid, "enable.idempotence", "true",
                                  "acks", "all", NULL};
    rd_kafka_conf_t *c = ks_kafka_conf(p, RD_KAFKA_PRODUCER, defaults, forced, err, errlen);
    return c ? ks_kafka_new(RD_KAFKA_PRODUCER, c, "grow-partitions producer", err, errlen)
             : NULL;
}

static int add_topic(run *r, const char *topic, const char *what, char *err, size_t errlen)
{
    grown *g = &r->topics[r->topic_count];
    *g = (grown){topic, what, 0};
    int c = ks_kafka_partition_count(r->producer, topic, 10000, err, errlen);
    if (c < 0)
        return -1;
    /* the engine's own topics are made at its first start, with the count
     * of the sources then */
    if (c == 0 && strcmp(what, "source") == 0) {
        snprintf(err, errlen, "%s topic %s does not exist", what, topic);
        return -1;
    }
    if (c > r->n) {
        snprintf(err, errlen,
                 "%s topic %s has %d partitions, more than %d: Kafka cannot take partitions "
                 "away",
                 what, topic, c, (int)r->n);
        return KS_GROW_REFUSED;
    }
    g->count = c;
    r->topic_count++;
    return 0;
}

/* Every topic and its count now; r->old: the count the state is laid out
 * for (the fewest partitions of a changelog, else of a source). */
static int count_topics(run *r, char *err, size_t errlen)
{
    const ks_grow_plan *g = r->plan;
    r->topics = calloc(g->source_count + g->repartition_count + g->store_count + 1,
                       sizeof *r->topics);
    if (!r->topics) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < g->source_count; i++)
        rc = add_topic(r, g->sources[i], "source", err, errlen);
    for (size_t i = 0; rc == 0 && i < g->repartition_count; i++)
        rc = add_topic(r, g->repartitions[i], "repartition", err, errlen);
    for (size_t i = 0; rc == 0 && i < g->store_count; i++)
        rc = add_topic(r, g->stores[i].changelog, "changelog", err, errlen);
    if (rc != 0)
        return rc;
    int32_t fewest[2] = {0, 0}; /* changelogs, sources */
    for (size_t i = 0; i < r->topic_count; i++) {
        int k = strcmp(r->topics[i].what, "changelog") == 0 ? 0 : 1;
        if (r->topics[i].count > 0 && (!fewest[k] || r->topics[i].count < fewest[k]))
            fewest[k] = r->topics[i].count;
    }
    r->old = fewest[0] ? fewest[0] : fewest[1];
    return 0;
}

/* The partitions to check: a source's below r->old and a repartition
 * topic's must be processed; every partition must have no open
 * transaction. */
static int list_parts(run *r, char *err, size_t errlen)
{
    size_t total = 0;
    for (size_t i = 0; i < r->topic_count; i++)
        total += (size_t)r->topics[i].count;
    r->parts = calloc(total + 1, sizeof *r->parts);
    if (!r->parts) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < r->topic_count; i++) {
        const grown *g = &r->topics[i];
        for (int32_t p = 0; p < g->count; p++) {
            int drained = strcmp(g->what, "repartition") == 0 ||
                          (strcmp(g->what, "source") == 0 && p < r->old);
            r->parts[r->part_count++] = (ks_grow_part){g->topic, p, drained, -1};
        }
    }
    return 0;
}

static int read_state(run *r, char *err, size_t errlen)
{
    const ks_grow_plan *g = r->plan;
    int32_t *counts = calloc(g->store_count + 1, sizeof *counts);
    if (!counts) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < g->store_count; i++)
        counts[i] = r->topics[g->source_count + g->repartition_count + i].count;
    int rc = ks_grow_read(r->committed, g, counts, &r->changelogs, err, errlen);
    free(counts);
    const ks_pipeline *p = r->t->pipeline;
    for (size_t i = 0; rc == 0 && i < g->store_count; i++)
        if (ks_grow_version(&r->changelogs[i], p->stores[g->stores[i].store].name, err,
                            errlen) == -2)
            rc = KS_GROW_REFUSED;
    return rc;
}

static void print_plan(const run *r)
{
    fprintf(r->out, "application %s: %d -> %d partitions\n", r->t->pipeline->application,
            (int)r->old, (int)r->n);
    for (size_t i = 0; i < r->topic_count; i++) {
        const grown *g = &r->topics[i];
        if (g->count == 0)
            fprintf(r->out, "  %s %s: none yet (the engine creates it with %d)\n", g->what,
                    g->topic, (int)r->n);
        else
            fprintf(r->out, "  %s %s: %d -> %d partitions\n", g->what, g->topic,
                    (int)g->count, (int)r->n);
    }
    for (size_t i = 0; i < r->plan->store_count; i++) {
        const ks_grow_changelog *c = &r->changelogs[i];
        fprintf(r->out, "  store %s: %zu keys, %zu to move (partitioner %s)\n",
                r->t->pipeline->stores[c->store->store].name, c->count,
                ks_grow_moves(c, r->n), c->store->partitioner_name);
    }
}

/* Grow the topics of kind `what` to r->n. */
static int grow_kind(run *r, const char *what, char *err, size_t errlen)
{
    for (size_t i = 0; i < r->topic_count; i++) {
        const grown *g = &r->topics[i];
        if (strcmp(g->what, what) != 0 || g->count == 0)
            continue;
        if (ks_topic_grow(r->producer, g->topic, r->n, NULL, err, errlen) != 0)
            return -1;
    }
    return 0;
}

/* Records that reached the sources' old partitions since the check were
 * placed for the old count: say so (the producers should have been
 * stopped), the growth cannot be undone. */
static void warn_late(run *r)
{
    int64_t *now = calloc(r->part_count + 1, sizeof *now);
    char err[512];
    if (!now || ks_grow_check_ends(r->committed, r->parts, r->part_count, now, err,
                                   sizeof err) != 0) {
        free(now);
        return;
    }
    for (size_t i = 0; i < r->part_count; i++)
        if (r->parts[i].drained && now[i] > r->parts[i].end)
            fprintf(r->out,
                    "WARNING: %lld records reached %s[%d] during grow-partitions: their "
                    "producer placed them for %d partitions, so a moved key's record among "
                    "them is counted in the task it left (stop the producers before "
                    "growing)\n",
                    (long long)(now[i] - r->parts[i].end), r->parts[i].topic,
                    (int)r->parts[i].partition, (int)r->old);
    free(now);
}

static int apply(run *r, char *err, size_t errlen)
{
    if (grow_kind(r, "changelog", err, errlen) != 0 ||
        grow_kind(r, "repartition", err, errlen) != 0)
        return -1;
    size_t moved = 0;
    if (ks_grow_write(r->producer, r->changelogs, r->plan->store_count, r->n, &moved, err,
                      errlen) != 0)
        return -1;
    fprintf(r->out, "moved %zu keys in one transaction\n", moved);
    fflush(r->out);
    ks_fault_point(KS_FAULT_GROW_BEFORE_SOURCES);
    if (grow_kind(r, "source", err, errlen) != 0)
        return -1;
    warn_late(r);
    fprintf(r->out,
            "done: restart the producers of the sources (so that they place records for %d "
            "partitions), then the application\n",
            (int)r->n);
    return 0;
}

static int steps(run *r, int dry_run, char *err, size_t errlen)
{
    const ks_pipeline *p = r->t->pipeline;
    int rc;
    if (!(r->producer = producer(p, err, errlen)) ||
        !(r->committed = consumer(p, 1, err, errlen)) ||
        !(r->uncommitted = consumer(p, 0, err, errlen)))
        return -1;
    if ((rc = ks_grow_check_group(r->producer, p->application, err, errlen)) != 0)
        return rc;
    /* before the checks: it aborts the open transaction of an earlier run
     * that died (the only one with this transactional.id), which would
     * otherwise hold the changelogs' last stable offsets back */
    rd_kafka_error_t *te = rd_kafka_init_transactions(r->producer, 60000);
    if (te) {
        snprintf(err, errlen, "init_transactions: %s", rd_kafka_error_string(te));
        rd_kafka_error_destroy(te);
        return -1;
    }
    if ((rc = count_topics(r, err, errlen)) != 0 || (rc = list_parts(r, err, errlen)) != 0 ||
        (rc = ks_grow_check_parts(r->committed, r->uncommitted, r->parts, r->part_count, err,
                                  errlen)) != 0 ||
        (rc = read_state(r, err, errlen)) != 0)
        return rc;
    print_plan(r);
    if (dry_run) {
        fprintf(r->out, "dry run: nothing changed\n");
        return 0;
    }
    return apply(r, err, errlen);
}

int ks_grow_partitions(const ks_topology *t, const ks_grow_plan *plan, int32_t partitions,
                       int dry_run, FILE *out, char *err, size_t errlen)
{
    run r = {.t = t, .plan = plan, .n = partitions, .out = out};
    int rc = steps(&r, dry_run, err, errlen);
    if (r.committed) {
        rd_kafka_consumer_close(r.committed);
        rd_kafka_destroy(r.committed);
    }
    if (r.uncommitted) {
        rd_kafka_consumer_close(r.uncommitted);
        rd_kafka_destroy(r.uncommitted);
    }
    if (r.producer)
        rd_kafka_destroy(r.producer);
    ks_grow_changelogs_free(r.changelogs, r.changelogs ? plan->store_count : 0);
    free(r.topics);
    free(r.parts);
    return rc;
}
