/*
 * metrics.c - see metrics.h. Samples live in one array guarded by a mutex;
 * names are grouped at render time so HELP/TYPE appear once per family.
 */
#include "http/metrics.h"
#include "base/grow.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/httpd.h"
#include "kstreams/kstreams.h"
#include "base/log.h"

typedef struct sample {
    char *name;
    char *labels;
    double value;
} sample;

struct ks_metrics {
    pthread_mutex_t lock;
    sample *samples;
    size_t count, cap;
    ks_httpd *server;
    char *token; /* NULL: none needed */
};

/* HELP and TYPE of the engine's own families; others are plugin counters. */
static const struct {
    const char *name, *type, *help;
} families[] = {
    {"kstreams_records_in_total", "counter", "Records consumed and processed, per task."},
    {"kstreams_records_out_total", "counter", "Records produced to sink topics, per task."},
    {"kstreams_process_seconds_sum", "counter", "Time spent processing records, per worker."},
    {"kstreams_process_seconds_count", "counter", "Records processed, per worker."},
    {"kstreams_commits_total", "counter", "Batches committed, per worker."},
    {"kstreams_commit_seconds_sum", "counter", "Time spent committing batches, per worker."},
    {"kstreams_commit_seconds_count", "counter", "Commits timed, per worker."},
    {"kstreams_aborts_total", "counter", "Batches aborted and replayed, per worker."},
    {"kstreams_poison_records_total", "counter", "Poison records, per worker and policy."},
    {"kstreams_consumer_lag", "gauge", "Records behind the end of the input partition."},
    {"kstreams_restore_records_total", "counter", "Changelog records replayed by restores."},
    {"kstreams_global_lag", "gauge",
     "Records of a global table's topic the global thread has yet to apply."},
    {"kstreams_restore_remaining", "gauge", "Changelog records left to replay (0: done)."},
    {"kstreams_standby_lag", "gauge",
     "Changelog records a standby store has not applied yet (0 when caught up or no longer a standby here)."},
    {"kstreams_standby_tasks", "gauge", "Standby tasks this process holds."},
    {"kstreams_tasks", "gauge", "Tasks assigned to each worker."},
    {"kstreams_cache_folds_total", "counter",
     "Updates folded into an earlier one of the same key by a record cache, per task."},
    {"kstreams_cache_flushed_total", "counter",
     "Keys passed on by record cache flushes before commits, per task."},
    {"kstreams_cache_evictions_total", "counter",
     "Keys passed on during a batch by a record cache (unchanged for 4096 updates, or the "
     "cache full), per task."},
    {"kstreams_plugin_info", "gauge", "Loaded plugin builds (value 1)."},
    {"kstreams_reloads_total", "counter", "Hot reloads of plugin builds that succeeded."},
    {"kstreams_reload_failures_total", "counter", "Hot reloads refused or failed."},
    {"kstreams_outbox_backlog", "gauge",
     "Outbox events not yet published (PREQUEUED, PENDING, DISPATCHING)."},
    {"kstreams_outbox_rows", "gauge", "Outbox events stored, in every status."},
    {"kstreams_outbox_status_rows", "gauge",
     "Rows of a PostgreSQL outbox table per status (counted every 10 s)."},
    {"kstreams_outbox_entered_total", "counter",
     "Outbox events that entered each status since the engine started."},
    {"kstreams_outbox_probe_total", "counter",
     "Stale DISPATCHING events decided by the probe: found (PUBLISHED) or absent (PENDING)."},
};

ks_metrics *ks_metrics_new(void)
{
    ks_metrics *m = calloc(1, sizeof *m);
    if (m)
        pthread_mutex_init(&m->lock, NULL);
    return m;
}

void ks_metrics_free(ks_metrics *m)
{
    if (!m)
        return;
    ks_httpd_stop(m->server);
    free(m->token);
    for (size_t i = 0; i < m->count; i++) {
        free(m->samples[i].name);
        free(m->samples[i].labels);
    }
    free(m->samples);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

/* The sample name{labels}, created when missing; NULL when out of memory.
 * Caller holds the lock. */
static sample *find(ks_metrics *m, const char *name, const char *labels)
{
    for (size_t i = 0; i < m->count; i++)
        if (strcmp(m->samples[i].name, name) == 0 && strcmp(m->samples[i].labels, labels) == 0)
            return &m->samples[i];
    sample *grown = ks_grow(m->samples, &m->cap, m->count, sizeof *grown, 64);
    if (!grown)
        return NULL;
    m->samples = grown;
    sample *s = &m->samples[m->count];
    s->name = strdup(name);
    s->labels = strdup(labels ? labels : "");
    s->value = 0;
    if (!s->name || !s->labels) {
        free(s->name);
        free(s->labels);
        return NULL;
    }
    m->count++;
    return s;
}

static void update(ks_metrics *m, const char *name, const char *labels, double v, int add)
{
    if (!m || !name)
        return;
    pthread_mutex_lock(&m->lock);
    sample *s = find(m, name, labels ? labels : "");
    if (s)
        s->value = add ? s->value + v : v;
    pthread_mutex_unlock(&m->lock);
}

void ks_metrics_set(ks_metrics *m, const char *name, const char *labels, double value)
{
    update(m, name, labels, value, 0);
}

void ks_metrics_add(ks_metrics *m, const char *name, const char *labels, double delta)
{
    update(m, name, labels, delta, 1);
}

double ks_metrics_get(ks_metrics *m, const char *name, const char *labels)
{
    double v = 0;
    if (!m)
        return 0;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < m->count; i++)
        if (strcmp(m->samples[i].name, name) == 0 &&
            strcmp(m->samples[i].labels, labels ? labels : "") == 0)
            v = m->samples[i].value;
    pthread_mutex_unlock(&m->lock);
    return v;
}

typedef struct text {
    char *buf;
    size_t len, cap;
    int oom;
} text;

static void put(text *t, const char *fmt, ...) KS_PRINTF(2, 3);

static void put(text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? t->cap - t->len : 0, fmt,
                          ap);
        va_end(ap);
        if (n < 0)
            return;
        if (t->buf && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = (t->cap + (size_t)n + 1) * 2;
        char *grown = realloc(t->buf, cap);
        if (!grown) {
            t->oom = 1;
            return;
        }
        t->buf = grown;
        t->cap = cap;
    }
}

static const char *family_help(const char *name, const char **type)
{
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (strcmp(families[i].name, name) == 0) {
            *type = families[i].type;
            return families[i].help;
        }
    *type = "counter";
    return "Counter of a plugin (api->metric_add).";
}

static int by_name(const void *a, const void *b)
{
    const sample *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->labels, y->labels);
}

int ks_metrics_render(ks_metrics *m, char **out, size_t *len)
{
    text t = {0};
    pthread_mutex_lock(&m->lock);
    qsort(m->samples, m->count, sizeof *m->samples, by_name);
    for (size_t i = 0; i < m->count; i++) {
        const sample *s = &m->samples[i];
        if (i == 0 || strcmp(m->samples[i - 1].name, s->name) != 0) {
            const char *type;
            const char *help = family_help(s->name, &type);
            put(&t, "# HELP %s %s\n# TYPE %s %s\n", s->name, help, s->name, type);
        }
        if (s->labels[0])
            put(&t, "%s{%s} %.17g\n", s->name, s->labels, s->value);
        else
            put(&t, "%s %.17g\n", s->name, s->value);
    }
    pthread_mutex_unlock(&m->lock);
    put(&t, "%s", "");
    if (t.oom) {
        free(t.buf);
        return KS_ERR_NOMEM;
    }
    *out = t.buf;
    *len = t.len;
    return 0;
}

size_t ks_metrics_escape_label(const char *value, char *out, size_t outlen)
{
    size_t o = 0;
    for (const char *v = value ? value : ""; *v; v++) {
        const char *esc = *v == '\\' ? "\\\\" : *v == '"' ? "\\\"" : *v == '\n' ? "\\n" : NULL;
        size_t n = esc ? 2 : 1;
        if (o + n >= outlen) /* never half an escape */
            break;
        if (esc)
            memcpy(out + o, esc, 2);
        else
            out[o] = *v;
        o += n;
    }
    if (outlen)
        out[o] = '\0';
    return o;
}

void ks_metrics_plugin_info(ks_metrics *m, const char *plugin, const char *version,
                            const char *build_id)
{
    char p[200], v[200], b[200], labels[700];
    ks_metrics_escape_label(plugin, p, sizeof p);
    ks_metrics_escape_label(version, v, sizeof v);
    ks_metrics_escape_label(build_id, b, sizeof b);
    snprintf(labels, sizeof labels, "plugin=\"%s\",version=\"%s\",build_id=\"%s\"", p, v, b);
    ks_metrics_set(m, "kstreams_plugin_info", labels, 1);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    (void)upload;
    (void)upload_size;
    (void)con_cls;
    ks_metrics *m = cls;
    char *body = NULL;
    size_t len = 0;
    unsigned status = MHD_HTTP_OK;
    /* answered on the first callback: a body sent along is never read */
    if (!ks_http_authorized(c, m->token)) {
        status = MHD_HTTP_UNAUTHORIZED;
        body = strdup("missing or wrong bearer token\n");
    } else if (strcmp(method, "GET") != 0 ||
               (strcmp(url, "/metrics") != 0 && strcmp(url, "/") != 0)) {
        status = MHD_HTTP_NOT_FOUND;
        body = strdup("not found: GET /metrics\n");
    } else if (ks_metrics_render(m, &body, &len) != 0) {
        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        body = NULL;
    }
    if (body && status != MHD_HTTP_OK)
        len = strlen(body);
    return ks_http_send(c, status, "text/plain; version=0.0.4", body, len);
}

int ks_metrics_serve(ks_metrics *m, const char *listen, const char *token,
                     const ks_cfg_http_limits *limits, char *err, size_t errlen)
{
    if (token && !(m->token = strdup(token)))
        return KS_ERR_NOMEM;
    int rc = ks_httpd_start("metrics endpoint", listen, limits, on_request, m, NULL, NULL,
                            &m->server, err, errlen);
    if (rc)
        return rc;
    ks_info("metrics", "Prometheus metrics on http://%s/metrics%s", listen,
            token ? " (bearer token required)" : "");
    return 0;
}
