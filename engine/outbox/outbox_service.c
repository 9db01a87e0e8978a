/*
 * outbox_service.c - start and stop the outbox's parts in the order that
 * keeps every accepted event durable: the store first, then the HTTP
 * endpoint; on stop the endpoint first (no new events), then the
 * dispatcher, then the store.
 */
#include "outbox/outbox_service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/dispatcher.h"
#include "outbox/ingest.h"
#include "base/log.h"
#include "outbox/outbox.h"
#include "outbox/outbox_pg.h"
#include "outbox/outbox_requests.h"
#include "outbox/outbox_results.h"
#include "state/layout.h"

struct ks_outbox_service {
    ks_outbox *ob;
    ks_http *http;
    ks_dispatcher *disp;
    ks_outbox_results *results; /* mailbox results -> rows */
    ks_outbox_requests *requests; /* processors' events -> rows */
    ks_pg_dispatcher *pg;         /* backend postgres: all of the above unused */
};

#ifndef KS_HAVE_POSTGRES
int ks_pg_dispatcher_start(const ks_pipeline *p, const ks_cfg_outbox *cfg, ks_metrics *metrics,
                           ks_pg_dispatcher **out, char *err, size_t errlen)
{
    (void)p, (void)cfg, (void)metrics;
    *out = NULL;
    snprintf(err, errlen, "outbox %s: this kstreams was built without PostgreSQL", cfg->name);
    return KS_ERR_UNSUPPORTED;
}

void ks_pg_dispatcher_stop(ks_pg_dispatcher *d)
{
    (void)d;
}
#endif

void ks_outbox_dir(const ks_pipeline *p, char *buf, size_t len)
{
    ks_layout_outbox_dir(p->state_dir, p->application, buf, len);
}

int ks_outbox_service_start(const ks_pipeline *p, ks_metrics *metrics, ks_outbox_service **out,
                            char *err, size_t errlen)
{
    *out = NULL;
    ks_outbox_service *s = calloc(1, sizeof *s);
    if (!s)
        return KS_ERR_NOMEM;
    if (p->outbox->backend == KS_OUTBOX_BACKEND_POSTGRES) {
        int rc = ks_pg_dispatcher_start(p, p->outbox, metrics, &s->pg, err, errlen);
        if (rc) {
            free(s);
            return rc;
        }
        *out = s;
        return 0;
    }
    char dir[4096];
    ks_outbox_dir(p, dir, sizeof dir);
    int rc = ks_outbox_open(dir, 0, &s->ob, err, errlen);
    if (rc == 0)
        rc = ks_dispatcher_start(s->ob, p, p->outbox, metrics, &s->disp, err, errlen);
    if (rc == 0)
        rc = ks_outbox_results_start(s->ob, p, &s->results, err, errlen);
    if (rc == 0)
        rc = ks_outbox_requests_start(s->ob, p, &s->requests, err, errlen);
    if (rc == 0)
        rc = ks_http_start(s->ob, p->outbox, &s->http, err, errlen);
    if (rc) {
        ks_outbox_service_stop(s);
        return rc;
    }
    uint64_t counts[KS_OUTBOX_STATUS_COUNT];
    if (ks_outbox_counts(s->ob, counts) == 0)
        ks_info("outbox", "outbox %s in %s: %llu pending, %llu dispatching, %llu published",
                p->outbox->name, dir,
                (unsigned long long)(counts[KS_OUTBOX_PENDING] + counts[KS_OUTBOX_PREQUEUED]),
                (unsigned long long)counts[KS_OUTBOX_DISPATCHING],
                (unsigned long long)counts[KS_OUTBOX_PUBLISHED]);
    *out = s;
    return 0;
}

void ks_outbox_service_stop(ks_outbox_service *s)
{
    if (!s)
        return;
    ks_pg_dispatcher_stop(s->pg);
    ks_http_stop(s->http);
    ks_outbox_requests_stop(s->requests); /* before the dispatcher: it settles */
    ks_dispatcher_stop(s->disp);
    ks_outbox_results_stop(s->results);
    ks_outbox_close(s->ob);
    free(s);
}
