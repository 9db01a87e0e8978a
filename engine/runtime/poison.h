/*
 * poison.h - the pipeline's poison policy (`poison: fail | skip |
 * dead-letter`) for one worker, and the input records it set aside
 * because a sink refused their outputs: those are known across the
 * batch's aborts until a commit covers them, and on replay the policy
 * applies to each.
 *
 * Errors as worker.h says. One thread: the worker's.
 */
#ifndef KS_POISON_H
#define KS_POISON_H

#include <librdkafka/rdkafka.h>
#include <stdint.h>

#include "runtime/collector.h"
#include "runtime/committer.h"

#define KS_MAX_BAD_OUTPUTS 32 /* refused outputs set aside in one batch */

typedef struct ks_poison {
    ks_engine *eng;       /* borrowed */
    const char *where;    /* borrowed: the worker's name for logs */
    ks_collector *out;    /* borrowed: dead letters go through it */
    ks_committer *commit; /* borrowed: the batch a failure aborts */
    uint64_t records;     /* poison records met (a metric) */
    struct ks_set_aside {
        int32_t partition;
        int64_t offset;
        char topic[256];
        char why[600];
    } set_aside[KS_MAX_BAD_OUTPUTS];
    size_t set_aside_count;
} ks_poison;

/* Set up `p` (every pointer borrowed, and must outlive it). */
void ks_poison_init(ks_poison *p, ks_engine *eng, const char *where, ks_collector *out,
                    ks_committer *commit);

/* Apply the policy to record m, for `why`. 0 when the record is dealt
 * with (skipped, or dead-lettered in the batch), else a negative ks_err:
 * the batch was aborted or the engine is stopping (the record must not
 * count as done). */
int ks_poison_apply(ks_poison *p, const rd_kafka_message_t *m, const char *why);

/* The same with the details of `why` (NULL: none), e.g. "expected ',' or
 * '}' at byte 17" for a value that is not JSON: logged after `why` and
 * written as the dead letter's header ks.error.reason. */
int ks_poison_apply_reason(ks_poison *p, const rd_kafka_message_t *m, const char *why,
                           const char *reason);

/* Remember that `rec` produced an output a sink refused, for `why`.
 * 0, or KS_ERR_TOO_LARGE when KS_MAX_BAD_OUTPUTS are set aside already. */
int ks_poison_set_aside(ks_poison *p, const ks_record *rec, const char *why);

/* 1 (with *why, borrowed from `p`) when m is a record set aside, else 0. */
int ks_poison_is_set_aside(const ks_poison *p, const rd_kafka_message_t *m, const char **why);

/* A commit covered every record set aside: forget them. */
void ks_poison_forget(ks_poison *p);

#endif /* KS_POISON_H */
