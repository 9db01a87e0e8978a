/*
 * kafka.c - librdkafka configuration and metadata look-ups.
 *
 * Settings every client gets (librdkafka 2.0.2): Nagle off (it is on by
 * default and costs ~40 ms per transactional commit) and no auto-creation
 * of topics (topics.h says why). Producers add a short retry backoff and
 * Java's murmur2 partitioner where they are made.
 */
#include "kafka/kafka.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

int ks_kafka_set(rd_kafka_conf_t *conf, const char *name, const char *value, char *err,
                 size_t errlen)
{
    char why[512];
    if (rd_kafka_conf_set(conf, name, value, why, sizeof why) != RD_KAFKA_CONF_OK) {
        snprintf(err, errlen, "kafka property %s=%s: %s", name, value, why);
        return -1;
    }
    return 0;
}

static int set_pairs(rd_kafka_conf_t *conf, const char *const *pairs, char *err,
                     size_t errlen)
{
    for (size_t i = 0; pairs && pairs[i]; i += 2)
        if (ks_kafka_set(conf, pairs[i], pairs[i + 1], err, errlen) != 0)
            return -1;
    return 0;
}

/* --- which client a property is for --------------------------------- */

/* librdkafka's own table (rd_kafka_conf_properties_show): every property
 * with its "C/P" column, read once. */
static char *scope_table;
static pthread_once_t scope_once = PTHREAD_ONCE_INIT;

static void scope_table_load(void)
{
    size_t len = 0;
    FILE *f = open_memstream(&scope_table, &len);
    if (!f)
        return;
    rd_kafka_conf_properties_show(f);
    fclose(f);
}

/* 'C' (consumer only), 'P' (producer only) or '*' (both, or not in the
 * table: then librdkafka itself decides). */
static char property_scope(const char *name)
{
    pthread_once(&scope_once, scope_table_load);
    size_t n = strlen(name);
    for (const char *line = scope_table; line && *line;) {
        const char *end = strchr(line, '\n');
        if (strncmp(line, name, n) == 0 && line[n] == ' ') {
            const char *bar = strchr(line, '|');
            if (bar && (!end || bar < end)) {
                while (*++bar == ' ')
                    ;
                return *bar == 'C' || *bar == 'P' ? *bar : '*';
            }
        }
        line = end ? end + 1 : NULL;
    }
    return '*';
}

/* A `kafka.properties` entry the other kind of client would warn about
 * (CONFWARN "... will be ignored") is for that kind only. */
static int property_applies(const char *name, rd_kafka_type_t type)
{
    char scope = property_scope(name);
    return scope == '*' || (scope == 'C') == (type == RD_KAFKA_CONSUMER);
}

void ks_kafka_log_line(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    /* syslog levels: 0..3 error, 4 warning, 5..6 notice/info, 7 debug */
    ks_log_level l = level <= 3   ? KS_LOG_ERROR
                     : level == 4 ? KS_LOG_WARN
                     : level <= 6 ? KS_LOG_INFO
                                  : KS_LOG_DEBUG;
    ks_log(l, "librdkafka", "%s %s: %s", rk ? rd_kafka_name(rk) : "-", fac ? fac : "-",
           buf ? buf : "");
}

rd_kafka_conf_t *ks_kafka_conf(const ks_pipeline *p, rd_kafka_type_t type,
                               const char *const *extra, const char *const *forced, char *err,
                               size_t errlen)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    /* librdkafka's lines go through the engine's log (levels, JSON mode) */
    rd_kafka_conf_set_log_cb(conf, ks_kafka_log_line);
    char servers[2048] = "";
    for (size_t i = 0; i < p->bootstrap_count; i++) {
        size_t at = strlen(servers);
        snprintf(servers + at, sizeof servers - at, "%s%s", i ? "," : "", p->bootstrap[i]);
    }
    static const char *const defaults[][2] = {
        {"socket.nagle.disable", "true"},
        {"topic.metadata.refresh.interval.ms", "10000"},
        {"log.connection.close", "false"},
    };
    if (ks_kafka_set(conf, "bootstrap.servers", servers, err, errlen) != 0)
        goto fail;
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        if (ks_kafka_set(conf, defaults[i][0], defaults[i][1], err, errlen) != 0)
            goto fail;
    if (set_pairs(conf, extra, err, errlen) != 0)
        goto fail;
    for (size_t i = 0; i < p->kafka_properties.count; i++) {
        const ks_cfg_scalar *s = &p->kafka_properties.items[i];
        if (!property_applies(s->key, type))
            continue;
        char why[512];
        if (rd_kafka_conf_set(conf, s->key, s->value, why, sizeof why) != RD_KAFKA_CONF_OK) {
            snprintf(err, errlen, "%s:%d:%d: kafka property %s=%s: %s", s->key_mark.file,
                     s->key_mark.line, s->key_mark.col, s->key, s->value, why);
            goto fail;
        }
    }
    /* no client of the engine may create a topic by asking for it: on a
     * broker with auto.create.topics.enable=true (Kafka's default) that
     * would make it with the broker's partition count and cleanup policy,
     * racing the admin request that creates it as it must be (topics.h).
     * librdkafka 2.0.2 producers default to true here. */
    if (ks_kafka_set(conf, "allow.auto.create.topics", "false", err, errlen) != 0 ||
        set_pairs(conf, forced, err, errlen) != 0)
        goto fail;
    return conf;
fail:
    rd_kafka_conf_destroy(conf);
    return NULL;
}

rd_kafka_t *ks_kafka_new(rd_kafka_type_t type, rd_kafka_conf_t *conf, const char *what,
                         char *err, size_t errlen)
{
    char why[512];
    rd_kafka_t *rk = rd_kafka_new(type, conf, why, sizeof why);
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        snprintf(err, errlen, "%s: %s", what, why);
    }
    return rk;
}

rd_kafka_t *ks_kafka_admin_client(const ks_pipeline *p, char *err, size_t errlen)
{
    rd_kafka_conf_t *conf = ks_kafka_conf(p, RD_KAFKA_PRODUCER, NULL, NULL, err, errlen);
    if (!conf)
        return NULL;
    return ks_kafka_new(RD_KAFKA_PRODUCER, conf, "cannot create Kafka client", err, errlen);
}

/* The configuration shared by every consumer outside the main group: group
 * `<application>-<suffix>`, nothing committed by itself, earliest start.
 * `defaults` (NULL: a 50 ms fetch wait) may be overridden by the user's
 * kafka settings; the forced keys may not. */
static rd_kafka_conf_t *side_conf(const ks_pipeline *p, const char *suffix,
                                  const char *isolation, int partition_eof,
                                  const char *const *defaults, char *err, size_t errlen)
{
    char group[600];
    snprintf(group, sizeof group, "%s-%s", p->application, suffix);
    const char *const forced[] = {"group.id", group, "enable.auto.commit", "false",
                                  "enable.auto.offset.store", "false", "isolation.level",
                                  isolation, "auto.offset.reset", "earliest",
                                  "enable.partition.eof", partition_eof ? "true" : "false",
                                  NULL};
    /* small batches arrive at once: these consumers feed the outbox */
    static const char *const fast_fetch[] = {"fetch.wait.max.ms", "50", NULL};
    return ks_kafka_conf(p, RD_KAFKA_CONSUMER, defaults ? defaults : fast_fetch, forced, err,
                         errlen);
}

static rd_kafka_t *new_consumer(rd_kafka_conf_t *c, const char *what, char *err,
                                size_t errlen)
{
    if (!c)
        return NULL;
    char label[256];
    snprintf(label, sizeof label, "cannot create the %s consumer", what);
    return ks_kafka_new(RD_KAFKA_CONSUMER, c, label, err, errlen);
}

rd_kafka_t *ks_kafka_side_consumer(const ks_pipeline *p, const char *suffix,
                                   void (*on_rebalance)(rd_kafka_t *, rd_kafka_resp_err_t,
                                                        rd_kafka_topic_partition_list_t *,
                                                        void *),
                                   void *opaque, const char *what, char *err,
                                   size_t errlen)
{
    rd_kafka_conf_t *c = side_conf(p, suffix, "read_committed", 0, NULL, err, errlen);
    if (c && on_rebalance)
        rd_kafka_conf_set_rebalance_cb(c, on_rebalance);
    if (c)
        rd_kafka_conf_set_opaque(c, opaque);
    return new_consumer(c, what, err, errlen);
}

rd_kafka_t *ks_kafka_assign_consumer(const ks_pipeline *p, const char *suffix,
                                     const char *isolation, const char *const *defaults,
                                     const char *what, char *err, size_t errlen)
{
    return new_consumer(side_conf(p, suffix, isolation, 1, defaults, err, errlen), what, err,
                        errlen);
}

int ks_kafka_partition_count(rd_kafka_t *rk, const char *topic, int timeout_ms, char *err,
                             size_t errlen)
{
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, &md, timeout_ms);
    rd_kafka_topic_destroy(rkt);
    if (e) {
        snprintf(err, errlen, "metadata for topic %s: %s (is the broker at the bootstrap "
                              "address up?)",
                 topic, rd_kafka_err2str(e));
        return -1;
    }
    int count = 0;
    if (md->topic_cnt == 1) {
        rd_kafka_resp_err_t te = md->topics[0].err;
        if (te == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
            count = 0;
        else if (te) {
            snprintf(err, errlen, "metadata for topic %s: %s", topic, rd_kafka_err2str(te));
            count = -1;
        } else
            count = md->topics[0].partition_cnt;
    }
    rd_kafka_metadata_destroy(md);
    return count;
}

int ks_kafka_offset_gone(int64_t next, int64_t lo, int64_t hi, ks_offset_gone *out)
{
    if (next < 0 || (next >= lo && (hi < 0 || next <= hi)))
        return 0;
    *out = next < lo ? (ks_offset_gone){"below the log start", lo, "records deleted"}
                     : (ks_offset_gone){"past the end", hi,
                                        "the topic created again, or records lost"};
    return 1;
}
