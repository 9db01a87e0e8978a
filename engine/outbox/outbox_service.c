/*
 * outbox_service.c - start and stop the outbox's parts in the order that
 * keeps every accepted event durable: the store first, then the HTTP
 * endpoint; on stop the endpoint first (no new events), then the
 * dispatcher, then the store.
 */
#include "outbox/outbox_service.h"

#include <stdio.h>
#include <jansson.h>
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

int ks_outbox_schema_cli(int argc, char **argv, FILE *out, FILE *err)
{
    (void)argv;
    if (argc != 1) {
        fprintf(err, "usage: kstreams outbox-schema\n");
        return 64;
    }
    fputs(ks_outbox_pg_schema, out);
    return 0;
}

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

/* One row as a JSON object (the same fields as GET /outbox/events/<id>). */
static void print_event(const ks_outbox_event *ev, FILE *out)
{
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:i,s:i,s:I,s:I,s:I}", "id", ev->id, "status",
                          ks_outbox_status_name(ev->status), "user", ev->user, "topic",
                          ev->topic, "attempts", (int)ev->attempts, "partition",
                          (int)ev->partition, "offset", (json_int_t)ev->offset,
                          "created_ms", (json_int_t)ev->created_ms, "updated_ms",
                          (json_int_t)ev->updated_ms);
    if (o && ev->last_error)
        json_object_set_new(o, "last_error", json_string(ev->last_error));
    if (o && ev->result)
        json_object_set_new(o, "result", json_string(ev->result));
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    fprintf(out, "%s\n", text ? text : "{}");
    free(text);
    json_decref(o);
}

int ks_outbox_status_cli(int argc, char **argv, FILE *out, FILE *err)
{
    if (argc < 2 || argc > 3) {
        fprintf(err, "usage: kstreams outbox-status FILE [EVENT-ID]\n");
        return 64;
    }
    char msg[2048];
    ks_pipeline *p = NULL;
    if (ks_pipeline_load(argv[1], &p, msg, sizeof msg) != 0) {
        fprintf(err, "%s\n", msg);
        return 2;
    }
    if (!p->outbox) {
        fprintf(err, "%s: the pipeline has no `outbox:` section\n", argv[1]);
        ks_pipeline_free(p);
        return 2;
    }
    if (p->outbox->backend == KS_OUTBOX_BACKEND_POSTGRES) {
        fprintf(err, "%s: the outbox is in PostgreSQL table %s: query it with SQL "
                     "(SELECT status, count(*) FROM %s GROUP BY status)\n",
                argv[1], p->outbox->table, p->outbox->table);
        ks_pipeline_free(p);
        return 2;
    }
    char dir[4096];
    ks_outbox_dir(p, dir, sizeof dir);
    ks_pipeline_free(p);
    ks_outbox *ob = NULL;
    if (ks_outbox_open_readonly(dir, &ob, msg, sizeof msg) != 0) {
        fprintf(err, "%s (has the engine run yet?)\n", msg);
        return 3;
    }
    int rc = 0;
    if (argc == 3) {
        ks_outbox_event ev;
        int got = ks_outbox_get(ob, argv[2], &ev);
        if (got != 0) {
            fprintf(err, "%s: %s\n", dir, ks_outbox_last_error(ob));
            rc = got == KS_ERR_NOT_FOUND || got == KS_ERR_INVALID ? 3 : 1;
        } else {
            print_event(&ev, out);
            ks_outbox_event_clear(&ev);
        }
    } else {
        uint64_t counts[KS_OUTBOX_STATUS_COUNT];
        if (ks_outbox_counts(ob, counts) != 0) {
            fprintf(err, "%s: cannot read the outbox\n", dir);
            rc = 1;
        }
        for (int i = 0; rc == 0 && i < KS_OUTBOX_STATUS_COUNT; i++)
            fprintf(out, "%-16s %llu\n", ks_outbox_status_name((ks_outbox_status)i),
                    (unsigned long long)counts[i]);
    }
    ks_outbox_close(ob);
    return rc;
}
