/*
 * ops_check.c - the ops plugin's nested config, checked at load time
 * (ops_check.h).
 */
#include "ops_check.h"

#include <stdio.h>
#include <string.h>

#include "../plugins/ops_config.h"

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
