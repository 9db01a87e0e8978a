/*
 * ops_check.c - the ops plugin's nested config, checked at load time
 * (ops_check.h).
 */
#include "config/ops_check.h"

#include <stdio.h>
#include <string.h>

#include "ops/ops_config.h"

/* The mark of the part of config value s at `at` (ks_cfg_inner paths): of
 * the longest path that starts it, else of the value. */
static const ks_mark *inner_mark(const ks_cfg_scalar *s, const char *at)
{
    const ks_mark *best = &s->mark;
    size_t best_len = 0;
    for (size_t i = 0; i < s->inner_count; i++) {
        size_t len = strlen(s->inner[i].path);
        if (len >= best_len && strncmp(at, s->inner[i].path, len) == 0 &&
            (at[len] == '\0' || at[len] == '/')) {
            best = &s->inner[i].mark;
            best_len = len;
        }
    }
    return best;
}

int ks_ops_check_node(const ks_cfg_node *n, char *err, size_t errlen)
{
    if (!n->plugin || strcmp(n->plugin, "ops") != 0)
        return 0;
    for (size_t i = 0; i < n->config.count; i++) {
        const ks_cfg_scalar *s = &n->config.items[i];
        ks_cfg_err e;
        if (ks_ops_config_check(n->processor, s->key, s->value, &e) != 0) {
            const ks_mark *m = inner_mark(s, e.at);
            snprintf(err, errlen, "%s:%d:%d: node '%s' (%s) config '%s'%s%s: %s", m->file,
                     m->line, m->col, n->name, n->type, s->key, e.at[0] ? " at " : "", e.at,
                     e.what);
            return -1;
        }
    }
    return 0;
}

static int is_child(const ks_pipeline *p, const char *parent, const char *name)
{
    for (size_t i = 0; i < p->node_count; i++) {
        if (strcmp(p->nodes[i].name, name) != 0)
            continue;
        for (size_t f = 0; f < p->nodes[i].from_count; f++)
            if (strcmp(p->nodes[i].from[f], parent) == 0)
                return 1;
    }
    /* a repartition sink stands in for the node it feeds (repartition.h) */
    for (size_t i = 0; i < p->sink_count; i++)
        if ((strcmp(p->sinks[i].name, name) == 0 ||
             (p->sinks[i].feeds && strcmp(p->sinks[i].feeds, name) == 0)) &&
            strcmp(p->sinks[i].from, parent) == 0)
            return 1;
    return 0;
}

static int no_child(const ks_cfg_node *n, const ks_mark *m, const char *name, char *err,
                    size_t errlen)
{
    snprintf(err, errlen,
             "%s:%d:%d: node '%s' (%s) routes to '%s', which is not one of its children: "
             "give a node or sink `from: %s` and `name: %s`",
             m->file, m->line, m->col, n->name, n->type, name, n->name, name);
    return -1;
}

int ks_ops_check_children(const ks_pipeline *p, const ks_cfg_node *n, char *err, size_t errlen)
{
    if (!n->plugin || strcmp(n->plugin, "ops") != 0 || strcmp(n->processor, "branch") != 0)
        return 0;
    for (size_t i = 0; i < n->config.count; i++) {
        const ks_cfg_scalar *s = &n->config.items[i];
        if (strcmp(s->key, "default") == 0 && s->value[0] && !is_child(p, n->name, s->value))
            return no_child(n, &s->mark, s->value, err, errlen);
        if (strcmp(s->key, "routes") != 0)
            continue;
        ks_routes r;
        ks_cfg_err e;
        if (ks_routes_compile(s->value, &r, &e) != 0)
            return 0; /* ks_ops_check_node reports it */
        for (size_t k = 0; k < r.n; k++) {
            if (is_child(p, n->name, r.r[k].to))
                continue;
            char at[48];
            snprintf(at, sizeof at, "/%zu/to", k);
            int rc = no_child(n, inner_mark(s, at), r.r[k].to, err, errlen);
            ks_routes_free(&r);
            return rc;
        }
        ks_routes_free(&r);
    }
    return 0;
}
