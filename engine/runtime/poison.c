/*
 * poison.c - the poison policy and the records set aside for it
 * (poison.h).
 */
#include "runtime/poison.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"

void ks_poison_init(ks_poison *p, ks_engine *eng, const char *where, ks_collector *out,
                    ks_committer *commit)
{
    p->eng = eng;
    p->where = where;
    p->out = out;
    p->commit = commit;
}

int ks_poison_apply(ks_poison *p, const rd_kafka_message_t *m, const char *why)
{
    return ks_poison_apply_reason(p, m, why, NULL);
}

int ks_poison_apply_reason(ks_poison *p, const rd_kafka_message_t *m, const char *why,
                           const char *reason)
{
    const char *sep = reason ? ": " : "";
    if (!reason)
        reason = "";
    const ks_pipeline *pl = p->commit->a->p;
    const char *topic = rd_kafka_topic_name(m->rkt);
    p->records++;
    switch (pl->poison) {
    case KS_POISON_SKIP:
        ks_warn(p->where, "skipping poison record %s/%d/%lld: %s%s%s", topic,
                (int)m->partition, (long long)m->offset, why, sep, reason);
        return 0;
    case KS_POISON_DEAD_LETTER: {
        const char *dlq = pl->dead_letter_topic;
        ks_warn(p->where, "poison record %s/%d/%lld to dead-letter topic %s: %s%s%s", topic,
                (int)m->partition, (long long)m->offset, dlq, why, sep, reason);
        /* in the batch's transaction: the dead letter and the offset commit
         * go together */
        int rc = ks_collector_dead_letter(p->out, dlq, m, why, *reason ? reason : NULL);
        if (rc != 0)
            ks_committer_abort(p->commit, "cannot write to the dead-letter topic");
        return rc;
    }
    case KS_POISON_FAIL:
        break;
    }
    ks_engine_fail(p->eng, p->where,
                   "poison record at %s/%d/%lld: %s%s%s (set `poison: skip` or `poison: "
                   "dead-letter` to go on)",
                   topic, (int)m->partition, (long long)m->offset, why, sep, reason);
    return KS_ERR_INVALID;
}

int ks_poison_set_aside(ks_poison *p, const ks_record *rec, const char *why)
{
    if (p->set_aside_count == KS_MAX_BAD_OUTPUTS)
        return KS_ERR_TOO_LARGE;
    struct ks_set_aside *b = &p->set_aside[p->set_aside_count++];
    b->partition = rec->partition;
    b->offset = rec->offset;
    snprintf(b->topic, sizeof b->topic, "%s", rec->topic);
    snprintf(b->why, sizeof b->why, "%s", why);
    return 0;
}

int ks_poison_is_set_aside(const ks_poison *p, const rd_kafka_message_t *m, const char **why)
{
    for (size_t i = 0; i < p->set_aside_count; i++) {
        const struct ks_set_aside *b = &p->set_aside[i];
        if (m->partition == b->partition && m->offset == b->offset &&
            strcmp(rd_kafka_topic_name(m->rkt), b->topic) == 0) {
            *why = b->why;
            return 1;
        }
    }
    return 0;
}

void ks_poison_forget(ks_poison *p)
{
    p->set_aside_count = 0;
}
