/*
 * metrics.h - the engine's metrics and their Prometheus text endpoint.
 *
 * A registry of samples (name + label set -> value). Writers (workers, the
 * host API for plugin counters) set or add under one mutex; a worker
 * publishes its counters about once a second rather than on every record,
 * so the hot path takes the lock only for plugin counters. The endpoint
 * (libmicrohttpd, its own thread) renders the registry on each scrape.
 */
#ifndef KS_METRICS_H
#define KS_METRICS_H

#include <stddef.h>

#include "config/config.h"

typedef struct ks_metrics ks_metrics;

/* A new empty registry, or NULL when out of memory. Free with
 * ks_metrics_free (which stops the endpoint first). */
ks_metrics *ks_metrics_new(void);
void ks_metrics_free(ks_metrics *m);

/* Set / add to the sample name{labels}; `labels` is the Prometheus label
 * text without braces (e.g. `task="3",node="count"`), or "" for none, its
 * values already escaped (ks_metrics_escape_label) unless they are known
 * to hold no backslash, quote or newline. Both strings are copied.
 * Thread-safe. A NULL registry is ignored. */
void ks_metrics_set(ks_metrics *m, const char *name, const char *labels, double value);
void ks_metrics_add(ks_metrics *m, const char *name, const char *labels, double delta);

/* Current value of a sample; 0 when absent. Thread-safe. */
double ks_metrics_get(ks_metrics *m, const char *name, const char *labels);

/* Render everything in Prometheus text format 0.0.4. On success *text is a
 * malloc'd NUL-terminated string owned by the caller; returns 0, or
 * KS_ERR_NOMEM. */
int ks_metrics_render(ks_metrics *m, char **text, size_t *len);

/* A label value escaped for the text format: \ as \\, " as \", newline
 * as \n. Writes at most outlen - 1 characters and the NUL (cutting only
 * between whole escapes); returns the length written. */
size_t ks_metrics_escape_label(const char *value, char *out, size_t outlen);

/* kstreams_plugin_info{plugin,version,build_id} = 1; the three are a
 * plugin's own strings, escaped here. */
void ks_metrics_plugin_info(ks_metrics *m, const char *plugin, const char *version,
                            const char *build_id);

/* Serve GET /metrics on `listen` (ks_parse_listen) within `limits`; with
 * a `token` (copied; NULL: none) every request needs "Authorization:
 * Bearer <token>" (401 otherwise, checked before anything else). 0, or a
 * negative ks_err with err set ("metrics endpoint ..."). */
int ks_metrics_serve(ks_metrics *m, const char *listen, const char *token,
                     const ks_cfg_http_limits *limits, char *err, size_t errlen);

#endif /* KS_METRICS_H */
