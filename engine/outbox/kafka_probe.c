/*
 * kafka_probe.c - see kafka_probe.h.
 */
#include "outbox/kafka_probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kstreams/kstreams.h>

#include "kafka/kafka.h"
#include "base/clock.h"

int ks_probe_read(rd_kafka_t *consumer, const char *topic, int32_t part, int64_t from,
                  int64_t hi, const char *header, ks_probe_hit **out, size_t *nout, char *err,
                  size_t errlen)
{
    *out = NULL;
    *nout = 0;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, topic, part)->offset = from;
    rd_kafka_resp_err_t e = rd_kafka_assign(consumer, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (e) {
        snprintf(err, errlen, "probe %s [%d]: assign: %s", topic, (int)part,
                 rd_kafka_err2str(e));
        return KS_ERR_IO;
    }
    size_t n = 0, cap = 0;
    ks_probe_hit *f = NULL;
    int64_t next = from, deadline = ks_mono_ms() + 30000;
    int rc = 0;
    while (next < hi && rc == 0) {
        if (ks_mono_ms() > deadline) {
            snprintf(err, errlen, "probe %s [%d]: stuck at offset %lld of %lld", topic,
                     (int)part, (long long)next, (long long)hi);
            rc = KS_ERR_IO;
            break;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(consumer, 200);
        if (!m)
            continue;
        rd_kafka_headers_t *h = NULL;
        const void *val;
        size_t len;
        /* records prefetched for an earlier probe's partition may still
         * arrive after the re-assign: only this partition's count */
        if (!m->err && m->partition == part && m->offset >= next &&
            strcmp(rd_kafka_topic_name(m->rkt), topic) == 0) {
            next = m->offset + 1;
            if (rd_kafka_message_headers(m, &h) == 0 &&
                rd_kafka_header_get_last(h, header, &val, &len) == 0 && val &&
                len <= KS_PROBE_ID_MAX) {
                if (n == cap) {
                    cap = cap ? cap * 2 : 256;
                    ks_probe_hit *g = realloc(f, cap * sizeof *g);
                    if (!g)
                        rc = KS_ERR_NOMEM;
                    else
                        f = g;
                }
                if (rc == 0) {
                    memcpy(f[n].id, val, len);
                    f[n].id[len] = '\0';
                    f[n++].offset = m->offset;
                }
            }
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_assign(consumer, NULL);
    if (rc) {
        free(f);
        return rc;
    }
    *out = f;
    *nout = n;
    return 0;
}

int ks_outbox_kafka_clients(const ks_pipeline *p,
                            void (*on_dr)(rd_kafka_t *, const rd_kafka_message_t *, void *),
                            rd_kafka_t **prod, rd_kafka_t **probe, char *err, size_t errlen)
{
    static const char *const prod_cfg[] = {"enable.idempotence", "true", "acks", "all",
                                           "message.timeout.ms", "15000", NULL};
    rd_kafka_conf_t *c = ks_kafka_conf(p, RD_KAFKA_PRODUCER, NULL, prod_cfg, err, errlen);
    if (!c)
        return KS_ERR_INVALID;
    rd_kafka_conf_set_dr_msg_cb(c, on_dr);
    if (!(*prod = ks_kafka_new(RD_KAFKA_PRODUCER, c, "outbox producer", err, errlen)))
        return KS_ERR_IO;
    char group[600];
    snprintf(group, sizeof group, "%s-outbox-probe", p->application);
    const char *const probe_cfg[] = {"group.id", group, "enable.auto.commit", "false",
                                     "enable.auto.offset.store", "false", NULL};
    c = ks_kafka_conf(p, RD_KAFKA_CONSUMER, NULL, probe_cfg, err, errlen);
    if (!c)
        return KS_ERR_INVALID;
    if (!(*probe = ks_kafka_new(RD_KAFKA_CONSUMER, c, "outbox probe consumer", err, errlen)))
        return KS_ERR_IO;
    return 0;
}

void ks_outbox_kafka_clients_free(rd_kafka_t *prod, rd_kafka_t *probe, int drain)
{
    if (prod) {
        if (drain)
            rd_kafka_flush(prod, 5000);
        rd_kafka_destroy(prod);
    }
    if (probe) {
        if (drain)
            rd_kafka_consumer_close(probe);
        rd_kafka_destroy(probe);
    }
}

void ks_outbox_probe_metrics(ks_metrics *m, const char *name, long found, long absent)
{
    const char *decision[] = {"found", "absent"};
    long count[] = {found, absent};
    char labels[512];
    for (int i = 0; i < 2; i++) {
        snprintf(labels, sizeof labels, "outbox=\"%s\",decision=\"%s\"", name, decision[i]);
        ks_metrics_set(m, "kstreams_outbox_probe_total", labels, (double)count[i]);
    }
}
