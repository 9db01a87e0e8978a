/*
 * config.c - the pipeline YAML (parsed by yaml_tree.c) mapped onto
 * ks_pipeline, with every check that needs no plugin. This file owns the
 * top level (TOP_KEYS, `kafka:`, `metrics:`, `rollback:`) and the entry points; the
 * sections and checks it calls are in the other config_*.c files
 * (config_internal.h lists which file owns what).
 *
 * Errors are one line "FILE:LINE:COL: message". The messages are part of
 * the interface (tests and docs/yaml-reference.md quote them): change them
 * only together.
 *
 * Order of checks: the top-level mapping, then each top-level key in the
 * order of TOP_KEYS below (inside a mapping: unknown keys first, then the
 * values in schema order, then missing required keys), then names unique,
 * then references (node inputs, sink inputs), then cycles, then stores
 * named by nodes but not declared (created with defaults), then stores
 * declared but named by no node (an error).
 */
#include "config/config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"

/* ------------------------------------------------------------------ */
/* kafka:                                                              */
/* ------------------------------------------------------------------ */

/* `bootstrap:` as a list, or one string "a:1,b:2". */
static int parse_bootstrap(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    ks_pipeline *p = c->p;
    ks_mark *marks = NULL;
    char buf[80];

    if (ks_ynode_is_null(v))
        return FAIL_AT(c, kn, "missing value for 'bootstrap'");
    if (v->kind == KS_Y_SCALAR) {
        /* split at commas; marks are the scalar's plus the offset */
        size_t n = 1, i = 0;
        const char *s = v->text;
        for (const char *q = s; *q; q++)
            n += *q == ',';
        p->bootstrap = calloc(n, sizeof *p->bootstrap);
        if (!p->bootstrap)
            return oom(c, v);
        while (1) {
            size_t start = strspn(s, " \t");
            size_t len = strcspn(s + start, ",");
            size_t end = len;
            int col = v->col + (int)(s + start - v->text) + (v->plain ? 0 : 1);
            while (end > 0 && (s[start + end - 1] == ' ' ||
                               s[start + end - 1] == '\t'))
                end--;
            p->bootstrap[i] = strndup(s + start, end);
            if (!p->bootstrap[i])
                return oom(c, v);
            p->bootstrap_count = ++i;
            if (!is_host_port(p->bootstrap[i - 1]))
                return failf(c, v->line, col,
                             "invalid address '%s' in 'bootstrap'; expected "
                             "host:port",
                             p->bootstrap[i - 1]);
            if (s[start + len] != ',')
                break;
            s += start + len + 1;
        }
        return 0;
    }
    if (v->kind != KS_Y_SEQ)
        return FAIL_AT(c, v, "expected a list of strings for 'bootstrap', "
                             "found %s",
                       found(v, buf, sizeof buf));
    if (want_strings(c, kn, v, "a list of strings", &p->bootstrap, &marks,
                     &p->bootstrap_count) != 0) {
        free(marks);
        return -1;
    }
    for (size_t i = 0; i < p->bootstrap_count; i++) {
        if (!is_host_port(p->bootstrap[i])) {
            int r = FAIL_MARK(c, marks[i],
                              "invalid address '%s' in 'bootstrap'; expected "
                              "host:port",
                              p->bootstrap[i]);
            free(marks);
            return r;
        }
    }
    free(marks);
    if (p->bootstrap_count == 0)
        return FAIL_AT(c, v, "'bootstrap' must list at least one host:port");
    return 0;
}

static int parse_kafka(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    static const char *const keys[] = {"bootstrap", "properties"};
    fields f;
    if (want_map(c, kn, v, 0) != 0)
        return -1;
    if (take_fields(c, v, "kafka", keys, 2, &f) != 0)
        return -1;
    if (f.val[0] && parse_bootstrap(c, f.key[0], f.val[0]) != 0)
        return -1;
    if (f.val[1] &&
        want_scalars(c, f.key[1], f.val[1], &c->p->kafka_properties, 0) != 0)
        return -1;
    if (!f.val[0])
        return missing(c, v, "kafka", "bootstrap");
    return 0;
}

/* ------------------------------------------------------------------ */
/* metrics:                                                            */
/* ------------------------------------------------------------------ */

/* `metrics: HOST:PORT`, or `metrics: { listen, token, max_connections,
 * idle_timeout, connection_deadline }`. */
enum { M_LISTEN, M_TOKEN, M_MAX_CONN, M_IDLE, M_DEADLINE, M_N };
static const char *const METRICS_KEYS[M_N] = {"listen", "token", "max_connections",
                                              "idle_timeout", "connection_deadline"};

static int parse_metrics(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    ks_pipeline *p = c->p;
    const ks_ynode *at = v;
    p->metrics_limits = (ks_cfg_http_limits){16, 10000, 10000};
    if (v->kind == KS_Y_MAP) {
        fields f;
        if (take_fields(c, v, "metrics", METRICS_KEYS, M_N, &f) != 0)
            return -1;
        if (!f.val[M_LISTEN])
            return missing(c, v, "metrics", "listen");
        if (want_listen(c, f.key[M_LISTEN], f.val[M_LISTEN], &p->metrics_listen) != 0)
            return -1;
        if (f.val[M_TOKEN] &&
            want_string(c, f.key[M_TOKEN], f.val[M_TOKEN], &p->metrics_token) != 0)
            return -1;
        if (want_limits(c, &f.key[M_MAX_CONN], &f.val[M_MAX_CONN], &p->metrics_limits) != 0)
            return -1;
        at = f.val[M_LISTEN];
    } else if (want_listen(c, kn, v, &p->metrics_listen) != 0) {
        return -1;
    }
    /* topic names, build ids and backlogs are not for the network at large */
    if (!ks_listen_is_loopback(p->metrics_listen) && !p->metrics_token)
        return FAIL_AT(c, at,
                       "metrics listen on '%s', which is not a loopback address: write "
                       "metrics: { listen: %s, token: ... } (scrapers then send "
                       "Authorization: Bearer <token>)",
                       p->metrics_listen, p->metrics_listen);
    return 0;
}

/* ------------------------------------------------------------------ */
/* query:                                                              */
/* ------------------------------------------------------------------ */

/* `query: { listen, token, advertise, max_connections, idle_timeout,
 * connection_deadline }`: the query server (docs/scaling.md). The token
 * rule is the metrics' and the outbox's: stores are data. */
enum { Q_LISTEN, Q_TOKEN, Q_ADVERTISE, Q_MAX_CONN, Q_IDLE, Q_DEADLINE, Q_N };
static const char *const QUERY_KEYS[Q_N] = {"listen",          "token",       "advertise",
                                            "max_connections", "idle_timeout",
                                            "connection_deadline"};

static int parse_query(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    ks_pipeline *p = c->p;
    fields f;
    p->query_limits = (ks_cfg_http_limits){32, 10000, 10000};
    if (want_map(c, kn, v, 0) != 0 || take_fields(c, v, "query", QUERY_KEYS, Q_N, &f) != 0)
        return -1;
    if (!f.val[Q_LISTEN])
        return missing(c, v, "query", "listen");
    if (want_listen(c, f.key[Q_LISTEN], f.val[Q_LISTEN], &p->query_listen) != 0)
        return -1;
    if (f.val[Q_TOKEN] && want_string(c, f.key[Q_TOKEN], f.val[Q_TOKEN], &p->query_token) != 0)
        return -1;
    if (f.val[Q_ADVERTISE] &&
        want_listen(c, f.key[Q_ADVERTISE], f.val[Q_ADVERTISE], &p->query_advertise) != 0)
        return -1;
    if (want_limits(c, &f.key[Q_MAX_CONN], &f.val[Q_MAX_CONN], &p->query_limits) != 0)
        return -1;
    if (!ks_listen_is_loopback(p->query_listen) && !p->query_token)
        return FAIL_AT(c, f.val[Q_LISTEN],
                       "query listens on '%s', which is not a loopback address: write "
                       "query: { listen: %s, token: ... } (clients then send "
                       "Authorization: Bearer <token>)",
                       p->query_listen, p->query_listen);
    /* the other processes are redirected to the advertised address */
    unsigned char a[4];
    uint16_t port;
    if (!p->query_advertise && ks_parse_listen(p->query_listen, a, &port) == 0 &&
        (a[0] | a[1] | a[2] | a[3]) == 0)
        return FAIL_AT(c, f.val[Q_LISTEN],
                       "query listens on '%s', which no other process can reach by that "
                       "name: set advertise: HOST:PORT, the address they reach this one at",
                       p->query_listen);
    return 0;
}

/* ------------------------------------------------------------------ */
/* The top level                                                       */
/* ------------------------------------------------------------------ */

static int want_positive_duration(pctx *c, const ks_ynode *k, const ks_ynode *v, int64_t *out);

/* `rollback: { crashes: 3, within: 10m }`: both optional. */
static int parse_rollback(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    static const char *const keys[] = {"crashes", "within"};
    fields f;
    int64_t x;
    if (want_map(c, kn, v, 0) != 0 || take_fields(c, v, "rollback", keys, 2, &f) != 0)
        return -1;
    if (f.val[0]) {
        if (want_int(c, f.key[0], f.val[0], 0, 1000, &x) != 0)
            return -1;
        c->p->rollback_crashes = (int)x;
    }
    if (f.val[1] && want_positive_duration(c, f.key[1], f.val[1], &c->p->rollback_within_ms) != 0)
        return -1;
    return 0;
}

enum {
    T_APPLICATION, T_KAFKA, T_GUARANTEE, T_COMMIT_INTERVAL, T_STATE_DIR,
    T_WORKERS, T_REPLICATION, T_PLUGINS, T_PLUGIN_PATH, T_POISON,
    T_DEAD_LETTER, T_METRICS, T_STORES, T_SOURCES, T_NODES, T_SINKS, T_OUTBOX,
    T_STALL_WARNING, T_TABLES, T_ROLLBACK, T_GLOBAL_TABLES, T_STATIC_MEMBERSHIP, T_STANDBY_REPLICAS,
    T_QUERY, T_N
};
static const char *const TOP_KEYS[T_N] = {
    "application", "kafka",          "guarantee",        "commit_interval_ms",
    "state_dir",   "workers",        "replication_factor", "plugins",
    "plugin_path", "poison",         "dead_letter_topic", "metrics",
    "stores",      "sources",        "nodes",            "sinks",
    "outbox",      "stall_warning_ms", "tables",           "rollback",
    "global_tables", "static_membership", "standby_replicas", "query"};

/* A duration > 0: an integer of milliseconds or "100ms", "30s", ... */
static int want_positive_duration(pctx *c, const ks_ynode *k, const ks_ynode *v, int64_t *out)
{
    char buf[80];
    if (want_scalar(c, k, v, "an integer or a duration (e.g. 100ms)"))
        return -1;
    if (ks_parse_duration_ms(v->text, out) != 0)
        return FAIL_AT(c, v, "expected an integer or a duration (e.g. 100ms) for '%s', found %s",
                       k->text, found(v, buf, sizeof buf));
    if (*out <= 0)
        return FAIL_AT(c, v, "'%s' must be greater than 0, found '%s'", k->text, v->text);
    return 0;
}

/* `guarantee: exactly-once | at-least-once` */
static int parse_guarantee(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    ks_pipeline *p = c->p;
    if (want_scalar(c, kn, v, "a guarantee") != 0)
        return -1;
    if (strcmp(v->text, "exactly-once") == 0)
        p->guarantee = KS_GUARANTEE_EXACTLY_ONCE;
    else if (strcmp(v->text, "at-least-once") == 0)
        p->guarantee = KS_GUARANTEE_AT_LEAST_ONCE;
    else
        return FAIL_AT(c, v,
                       "unknown guarantee '%s'; expected exactly-once or "
                       "at-least-once",
                       v->text);
    return 0;
}

/* `poison: fail | skip | dead-letter` */
static int parse_poison(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    ks_pipeline *p = c->p;
    if (want_scalar(c, kn, v, "a poison policy") != 0)
        return -1;
    if (strcmp(v->text, "fail") == 0)
        p->poison = KS_POISON_FAIL;
    else if (strcmp(v->text, "skip") == 0)
        p->poison = KS_POISON_SKIP;
    else if (strcmp(v->text, "dead-letter") == 0)
        p->poison = KS_POISON_DEAD_LETTER;
    else
        return FAIL_AT(c, v,
                       "unknown poison policy '%s'; expected fail, skip or "
                       "dead-letter",
                       v->text);
    return 0;
}

/* No `dead_letter_topic`: "<application>-dlq", which must be a valid topic
 * name (reported at the application's value `app`). */
static int default_dead_letter(pctx *c, const ks_ynode *root, const ks_ynode *app)
{
    ks_pipeline *p = c->p;
    size_t len = strlen(p->application) + sizeof "-dlq";
    p->dead_letter_topic = malloc(len);
    if (!p->dead_letter_topic)
        return oom(c, root);
    snprintf(p->dead_letter_topic, len, "%s-dlq", p->application);
    if (!is_topic(p->dead_letter_topic))
        return FAIL_AT(c, app,
                       "dead letter topic '%s' (from 'application') is "
                       "not a valid topic name; set 'dead_letter_topic'",
                       p->dead_letter_topic);
    return 0;
}

static int parse_top(pctx *c, const ks_ynode *root)
{
    ks_pipeline *p = c->p;
    fields f;
    const ks_ynode *v;
    int64_t x;

    if (take_fields(c, root, "pipeline", TOP_KEYS, T_N, &f) != 0)
        return -1;

    if ((v = f.val[T_APPLICATION])) {
        if (want_string(c, f.key[T_APPLICATION], v, &p->application) != 0)
            return -1;
        if (!is_app(p->application))
            return FAIL_AT(c, v,
                           "invalid application id '%s'; expected "
                           "[A-Za-z0-9._-]+",
                           p->application);
    }
    if ((v = f.val[T_KAFKA]) && parse_kafka(c, f.key[T_KAFKA], v) != 0)
        return -1;
    if ((v = f.val[T_GUARANTEE]) && parse_guarantee(c, f.key[T_GUARANTEE], v) != 0)
        return -1;
    if ((v = f.val[T_COMMIT_INTERVAL]) &&
        want_positive_duration(c, f.key[T_COMMIT_INTERVAL], v, &p->commit_interval_ms) != 0)
        return -1;
    if ((v = f.val[T_STALL_WARNING]) &&
        want_positive_duration(c, f.key[T_STALL_WARNING], v, &p->stall_warning_ms) != 0)
        return -1;
    if ((v = f.val[T_ROLLBACK]) && parse_rollback(c, f.key[T_ROLLBACK], v) != 0)
        return -1;
    if ((v = f.val[T_STATIC_MEMBERSHIP]) &&
        want_bool(c, f.key[T_STATIC_MEMBERSHIP], v, &p->static_membership) != 0)
        return -1;
    if ((v = f.val[T_STANDBY_REPLICAS])) {
        if (want_int(c, f.key[T_STANDBY_REPLICAS], v, 0, 16, &x) != 0)
            return -1;
        p->standby_replicas = (int)x;
    }
    if ((v = f.val[T_STATE_DIR]) &&
        want_string(c, f.key[T_STATE_DIR], v, &p->state_dir) != 0)
        return -1;
    if ((v = f.val[T_WORKERS])) {
        if (want_int(c, f.key[T_WORKERS], v, 1, 64, &x) != 0)
            return -1;
        p->workers = (int)x;
    }
    if ((v = f.val[T_REPLICATION])) {
        if (want_int(c, f.key[T_REPLICATION], v, -1, INT16_MAX, &x) != 0)
            return -1;
        if (x == 0)
            return FAIL_AT(c, v, "'replication_factor' must be -1 (the broker's "
                                 "default.replication.factor) or at least 1, found '0'");
        p->replication_factor = (int32_t)x;
    }
    if ((v = f.val[T_PLUGINS]) &&
        want_strings(c, f.key[T_PLUGINS], v, "a list of strings", &p->plugins,
                     &p->plugin_marks, &p->plugin_count) != 0)
        return -1;
    if ((v = f.val[T_PLUGIN_PATH]) &&
        want_strings(c, f.key[T_PLUGIN_PATH], v, "a list of strings",
                     &p->plugin_path, NULL, &p->plugin_path_count) != 0)
        return -1;
    if ((v = f.val[T_POISON]) && parse_poison(c, f.key[T_POISON], v) != 0)
        return -1;
    if ((v = f.val[T_DEAD_LETTER]) &&
        want_topic(c, f.key[T_DEAD_LETTER], v, &p->dead_letter_topic) != 0)
        return -1;
    if ((v = f.val[T_QUERY]) && parse_query(c, f.key[T_QUERY], v) != 0)
        return -1;
    if ((v = f.val[T_METRICS]) && parse_metrics(c, f.key[T_METRICS], v) != 0)
        return -1;
    if ((v = f.val[T_STORES]) && parse_stores(c, f.key[T_STORES], v) != 0)
        return -1;
    if ((v = f.val[T_SOURCES]) && parse_sources(c, f.key[T_SOURCES], v) != 0)
        return -1;
    if ((v = f.val[T_TABLES]) && parse_tables(c, f.key[T_TABLES], v) != 0)
        return -1;
    if ((v = f.val[T_GLOBAL_TABLES]) && parse_global_tables(c, f.key[T_GLOBAL_TABLES], v) != 0)
        return -1;
    if ((v = f.val[T_NODES]) && parse_nodes(c, f.key[T_NODES], v) != 0)
        return -1;
    if ((v = f.val[T_SINKS]) && parse_sinks(c, f.key[T_SINKS], v) != 0)
        return -1;
    if ((v = f.val[T_OUTBOX]) && parse_outbox(c, f.key[T_OUTBOX], v) != 0)
        return -1;

    static const int required[] = {T_APPLICATION, T_KAFKA, T_SINKS};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!f.val[required[i]])
            return missing(c, root, "pipeline", TOP_KEYS[required[i]]);
    /* the inputs: streams, tables or both (a join of two tables needs no
     * stream); global tables alone feed no task */
    if (!f.val[T_SOURCES] && !f.val[T_TABLES])
        return FAIL_AT(c, root, "pipeline is missing its inputs: 'sources' (streams), "
                                "'tables', or both");

    if (!p->dead_letter_topic &&
        default_dead_letter(c, root, f.val[T_APPLICATION]) != 0)
        return -1;

    if (expand_fk_joins(c) != 0 || check_names(c) != 0 || check_refs(c) != 0 || check_cycles(c) != 0 ||
        link_tables(c) != 0 || add_used_stores(c) != 0 || check_unused_stores(c) != 0)
        return -1;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Entry points                                                        */
/* ------------------------------------------------------------------ */

int ks_pipeline_parse(const char *name, const char *text, size_t len,
                      ks_pipeline **out, char *err, size_t errlen)
{
    pctx c = {NULL, err, errlen, 0};
    ks_ydoc doc;
    ks_yerr yerr;
    int rc;

    if (err && errlen)
        err[0] = '\0';
    if (out)
        *out = NULL;
    if (!name)
        name = "<string>";
    c.p = calloc(1, sizeof *c.p);
    if (!c.p) {
        if (err && errlen)
            snprintf(err, errlen, "%s:1:1: out of memory", name);
        return -1;
    }
    c.p->file = strdup(name);
    if (!c.p->file) {
        if (err && errlen)
            snprintf(err, errlen, "%s:1:1: out of memory", name);
        free(c.p);
        return -1;
    }
    if (!out || (!text && len)) {
        failf(&c, 1, 1, "no text or no result given");
        ks_pipeline_free(c.p);
        return -1;
    }
    c.p->guarantee = KS_GUARANTEE_EXACTLY_ONCE;
    c.p->commit_interval_ms = 100;
    c.p->stall_warning_ms = 60000;
    c.p->rollback_crashes = 3;
    c.p->rollback_within_ms = 10 * 60 * 1000;
    c.p->workers = 1;
    c.p->replication_factor = -1; /* the broker's default, as Kafka Streams 3.0+ */
    c.p->poison = KS_POISON_FAIL;
    c.p->state_dir = strdup("./state");
    if (!c.p->state_dir) {
        failf(&c, 1, 1, "out of memory");
        ks_pipeline_free(c.p);
        return -1;
    }

    if (ks_ydoc_parse(text ? text : "", len, &doc, &yerr) != 0) {
        failf(&c, yerr.line, yerr.col, "%s", yerr.msg);
        ks_pipeline_free(c.p);
        return -1;
    }
    if (!doc.root || ks_ynode_is_null(doc.root)) {
        failf(&c, 1, 1,
              "empty pipeline; expected a mapping with application, kafka, "
              "sources and sinks");
        rc = -1;
    } else if (doc.root->kind != KS_Y_MAP) {
        char buf[80];
        rc = FAIL_AT(&c, doc.root, "expected a mapping at the top level, "
                                   "found %s",
                     found(doc.root, buf, sizeof buf));
    } else {
        rc = parse_top(&c, doc.root);
    }
    ks_ydoc_free(&doc);
    if (rc != 0) {
        ks_pipeline_free(c.p);
        return -1;
    }
    *out = c.p;
    return 0;
}

int ks_pipeline_load(const char *path, ks_pipeline **out, char *err,
                     size_t errlen)
{
    FILE *fp;
    char *text = NULL;
    size_t len = 0, cap = 0;
    int rc;

    if (out)
        *out = NULL;
    if (!path) {
        if (err && errlen)
            snprintf(err, errlen, "(null): no file given");
        return -1;
    }
    fp = fopen(path, "rb");
    if (!fp) {
        if (err && errlen)
            snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    for (;;) {
        size_t got;
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 8192;
            char *n = realloc(text, ncap);
            if (!n) {
                free(text);
                fclose(fp);
                if (err && errlen)
                    snprintf(err, errlen, "%s: out of memory", path);
                return -1;
            }
            text = n;
            cap = ncap;
        }
        got = fread(text + len, 1, cap - len, fp);
        len += got;
        if (got == 0)
            break;
    }
    if (ferror(fp)) {
        int e = errno;
        free(text);
        fclose(fp);
        if (err && errlen)
            snprintf(err, errlen, "%s: cannot read: %s", path, strerror(e));
        return -1;
    }
    fclose(fp);
    rc = ks_pipeline_parse(path, text, len, out, err, errlen);
    free(text);
    return rc;
}
