/*
 * grow_check.c - see grow_check.h.
 */
#include "kafka/grow_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka/group_members.h"

#define TIMEOUT_MS 10000

int ks_grow_check_group(rd_kafka_t *admin, const char *group, char *err, size_t errlen)
{
    ks_group_member *m = NULL;
    size_t n = 0;
    if (ks_group_describe(admin, group, TIMEOUT_MS, &m, &n, err, errlen) != 0)
        return -1;
    if (n == 0)
        return 0;
    int at = snprintf(err, errlen, "consumer group %s has %zu member%s (", group, n,
                      n == 1 ? "" : "s");
    for (size_t i = 0; i < n && at > 0 && (size_t)at < errlen; i++)
        at += snprintf(err + at, errlen - (size_t)at, "%s%s", i ? ", " : "", m[i].client_id);
    if (at > 0 && (size_t)at < errlen)
        snprintf(err + at, errlen - (size_t)at,
                 "): stop every process of the application first; a static member "
                 "(static_membership: true) stays in the group for session.timeout.ms "
                 "after it stopped");
    ks_group_members_free(m, n);
    return KS_GROW_REFUSED;
}

static rd_kafka_topic_partition_list_t *list_of(const ks_grow_part *parts, size_t n)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)n + 1);
    for (size_t i = 0; i < n; i++)
        rd_kafka_topic_partition_list_add(l, parts[i].topic, parts[i].partition);
    return l;
}

/* ListOffsets "latest" of every partition as `client` sees it: the last
 * stable offset on a read_committed client, the high watermark on a
 * read_uncommitted one. 0 or -1 with err. */
static int list_ends(rd_kafka_t *client, const ks_grow_part *parts, size_t n, int64_t *ends,
                     char *err, size_t errlen)
{
    rd_kafka_topic_partition_list_t *l = list_of(parts, n);
    for (int i = 0; i < l->cnt; i++)
        l->elems[i].offset = RD_KAFKA_OFFSET_END;
    rd_kafka_resp_err_t e = rd_kafka_offsets_for_times(client, l, TIMEOUT_MS);
    for (int i = 0; !e && i < l->cnt; i++) {
        if (l->elems[i].err || l->elems[i].offset < 0) {
            snprintf(err, errlen, "end offset of %s[%d]: %s", l->elems[i].topic,
                     (int)l->elems[i].partition, rd_kafka_err2str(l->elems[i].err));
            rd_kafka_topic_partition_list_destroy(l);
            return -1;
        }
        ends[i] = l->elems[i].offset;
    }
    if (e)
        snprintf(err, errlen, "end offsets: %s", rd_kafka_err2str(e));
    rd_kafka_topic_partition_list_destroy(l);
    return e ? -1 : 0;
}

int ks_grow_check_ends(rd_kafka_t *committed, const ks_grow_part *parts, size_t n,
                       int64_t *ends, char *err, size_t errlen)
{
    return n ? list_ends(committed, parts, n, ends, err, errlen) : 0;
}

/* Where the group would start reading each partition: its committed
 * offset, else the earliest (the engine's auto.offset.reset). 0 or -1. */
static int starts_of(rd_kafka_t *c, const ks_grow_part *parts, size_t n, int64_t *starts,
                     char *err, size_t errlen)
{
    rd_kafka_topic_partition_list_t *l = list_of(parts, n);
    rd_kafka_resp_err_t e = rd_kafka_committed(c, l, TIMEOUT_MS);
    for (int i = 0; !e && i < l->cnt; i++) {
        starts[i] = l->elems[i].offset;
        if (starts[i] >= 0)
            continue;
        int64_t lo, hi;
        e = rd_kafka_query_watermark_offsets(c, parts[i].topic, parts[i].partition, &lo, &hi,
                                             TIMEOUT_MS);
        starts[i] = lo;
    }
    if (e)
        snprintf(err, errlen, "committed offsets of the application's group: %s",
                 rd_kafka_err2str(e));
    rd_kafka_topic_partition_list_destroy(l);
    return e ? -1 : 0;
}

/* Whether a record (not a transaction marker, not an aborted one) lies in
 * [from, end) of the partition: 1 yes, 0 no, -1 with err. */
static int has_record(rd_kafka_t *c, const ks_grow_part *part, int64_t from, int64_t end,
                      char *err, size_t errlen)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, part->topic, part->partition)->offset = from;
    rd_kafka_resp_err_t e = rd_kafka_assign(c, l);
    rd_kafka_topic_partition_list_destroy(l);
    int rc = -1;
    for (int waited = 0; !e && rc < 0 && waited < 3 * TIMEOUT_MS; waited += 200) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 200);
        if (!m)
            continue;
        if (m->rkt && (m->partition != part->partition ||
                       strcmp(rd_kafka_topic_name(m->rkt), part->topic) != 0))
            ; /* left over from the partition probed before */
        else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
            rc = 0;
        else if (!m->err)
            rc = m->offset < end;
        else if (m->err != RD_KAFKA_RESP_ERR__TRANSPORT)
            e = m->err;
        rd_kafka_message_destroy(m);
    }
    rd_kafka_assign(c, NULL);
    if (rc < 0)
        snprintf(err, errlen, "reading %s[%d] from offset %lld: %s", part->topic,
                 (int)part->partition, (long long)from,
                 e ? rd_kafka_err2str(e) : "no answer");
    return rc;
}

/* Append one line of a refusal to err. */
static void say(char *err, size_t errlen, size_t *at, const char *line)
{
    if (*at < errlen)
        *at += (size_t)snprintf(err + *at, errlen - *at, "%s%s", *at ? "; " : "", line);
}

int ks_grow_check_parts(rd_kafka_t *committed, rd_kafka_t *uncommitted, ks_grow_part *parts,
                        size_t n, char *err, size_t errlen)
{
    if (n == 0)
        return 0;
    int64_t *lso = calloc(n, sizeof *lso), *hw = calloc(n, sizeof *hw),
            *start = calloc(n, sizeof *start);
    int rc = -1;
    if (!lso || !hw || !start) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    if (list_ends(committed, parts, n, lso, err, errlen) != 0 ||
        list_ends(uncommitted, parts, n, hw, err, errlen) != 0 ||
        starts_of(committed, parts, n, start, err, errlen) != 0)
        goto out;
    char why[16384] = "";
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        char line[600];
        parts[i].end = lso[i];
        if (lso[i] < hw[i]) {
            snprintf(line, sizeof line,
                     "%s[%d] has an open transaction (last stable offset %lld, end %lld): a "
                     "producer of it still runs or was killed; stop it, or start the "
                     "application and stop it with SIGTERM, or wait transaction.timeout.ms",
                     parts[i].topic, (int)parts[i].partition, (long long)lso[i],
                     (long long)hw[i]);
            say(why, sizeof why, &at, line);
            continue;
        }
        if (!parts[i].drained || start[i] >= lso[i])
            continue;
        int has = has_record(committed, &parts[i], start[i], lso[i], err, errlen);
        if (has < 0)
            goto out;
        if (has) {
            snprintf(line, sizeof line,
                     "drain first: %s[%d] has %lld unprocessed records (committed offset "
                     "%lld, end %lld): start the application with the producers of its "
                     "sources stopped, let it process them, stop it",
                     parts[i].topic, (int)parts[i].partition, (long long)(lso[i] - start[i]),
                     (long long)start[i], (long long)lso[i]);
            say(why, sizeof why, &at, line);
        }
    }
    rc = at ? KS_GROW_REFUSED : 0;
    if (at)
        snprintf(err, errlen, "%s", why);
out:
    free(lso);
    free(hw);
    free(start);
    return rc;
}
