/*
 * config_model.c - the parsed pipeline as data: lookups by name and
 * ks_pipeline_free (which must know every field config.h gives an owner).
 */
#include "config/config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Lookups                                                             */
/* ------------------------------------------------------------------ */

const ks_cfg_source *ks_pipeline_source(const ks_pipeline *p, const char *name)
{
    if (!p || !name)
        return NULL;
    for (size_t i = 0; i < p->source_count; i++)
        if (p->sources[i].name && strcmp(p->sources[i].name, name) == 0)
            return &p->sources[i];
    return NULL;
}

const ks_cfg_source *ks_pipeline_global(const ks_pipeline *p, const char *name)
{
    for (size_t i = 0; p && name && i < p->global_count; i++)
        if (p->globals[i].name && strcmp(p->globals[i].name, name) == 0)
            return &p->globals[i];
    return NULL;
}

const ks_cfg_node *ks_pipeline_node(const ks_pipeline *p, const char *name)
{
    if (!p || !name)
        return NULL;
    for (size_t i = 0; i < p->node_count; i++)
        if (p->nodes[i].name && strcmp(p->nodes[i].name, name) == 0)
            return &p->nodes[i];
    return NULL;
}

const ks_cfg_store *ks_pipeline_store(const ks_pipeline *p, const char *name)
{
    if (!p || !name)
        return NULL;
    for (size_t i = 0; i < p->store_count; i++)
        if (p->stores[i].name && strcmp(p->stores[i].name, name) == 0)
            return &p->stores[i];
    return NULL;
}

int ks_cfg_store_writable(const ks_pipeline *p, const ks_cfg_node *node, int store)
{
    const ks_cfg_store *st = &p->stores[store];
    if (st->table)
        return 0; /* a table changes only by its topic */
    return !st->node_table || strcmp(st->node_table, node->name) == 0;
}

int ks_cfg_node_is_table(const ks_pipeline *p, const char *name)
{
    for (size_t i = 0; i < p->store_count; i++)
        if (p->stores[i].node_table && strcmp(p->stores[i].node_table, name) == 0)
            return 1;
    return 0;
}

const ks_cfg_scalar *ks_cfg_scalars_find(const ks_cfg_scalars *s, const char *key)
{
    for (size_t i = 0; i < s->count; i++)
        if (s->items[i].key && strcmp(s->items[i].key, key) == 0)
            return &s->items[i];
    return NULL;
}

int ks_cfg_node_is(const ks_cfg_node *n, const char *plugin, const char *processor)
{
    return n->plugin && strcmp(n->plugin, plugin) == 0 && n->processor &&
           strcmp(n->processor, processor) == 0;
}

const ks_cfg_function *ks_cfg_node_function(const ks_cfg_node *n, const char *role)
{
    for (size_t i = 0; i < n->function_count; i++)
        if (n->functions[i].role && strcmp(n->functions[i].role, role) == 0)
            return &n->functions[i];
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Freeing                                                             */
/* ------------------------------------------------------------------ */

static void free_strv(char **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void free_scalars(ks_cfg_scalars *s)
{
    for (size_t i = 0; i < s->count; i++) {
        free(s->items[i].key);
        free(s->items[i].value);
        for (size_t j = 0; j < s->items[i].inner_count; j++)
            free(s->items[i].inner[j].path);
        free(s->items[i].inner);
    }
    free(s->items);
    s->items = NULL;
    s->count = 0;
}

void ks_pipeline_free(ks_pipeline *p)
{
    if (!p)
        return;
    free(p->application);
    free_strv(p->bootstrap, p->bootstrap_count);
    free_scalars(&p->kafka_properties);
    free(p->state_dir);
    free_strv(p->plugins, p->plugin_count);
    free(p->plugin_marks);
    free_strv(p->plugin_path, p->plugin_path_count);
    free(p->dead_letter_topic);
    free(p->metrics_listen);
    free(p->metrics_token);
    free(p->query_listen);
    free(p->query_token);
    free(p->query_advertise);
    for (size_t i = 0; i < p->source_count; i++) {
        free(p->sources[i].name);
        free(p->sources[i].topic);
    }
    free(p->sources);
    for (size_t i = 0; i < p->global_count; i++) {
        free(p->globals[i].name);
        free(p->globals[i].topic);
    }
    free(p->globals);
    for (size_t i = 0; i < p->node_count; i++) {
        ks_cfg_node *n = &p->nodes[i];
        free(n->name);
        free(n->type);
        free(n->plugin);
        free(n->processor);
        free_strv(n->from, n->from_count);
        free(n->from_marks);
        free_strv(n->stores, n->store_count);
        free(n->store_marks);
        free_scalars(&n->config);
        for (size_t f = 0; f < n->function_count; f++) {
            free(n->functions[f].role);
            free(n->functions[f].plugin);
            free(n->functions[f].name);
        }
        free(n->functions);
        free_scalars(&n->window);
        free(n->table);
        free(n->repartition_topic);
    }
    free(p->nodes);
    for (size_t i = 0; i < p->sink_count; i++) {
        free(p->sinks[i].name);
        free(p->sinks[i].from);
        free(p->sinks[i].topic);
        free(p->sinks[i].feeds);
    }
    free(p->sinks);
    for (size_t i = 0; i < p->store_count; i++) {
        free(p->stores[i].name);
        free(p->stores[i].node_table);
    }
    free(p->stores);
    if (p->outbox) {
        free(p->outbox->name);
        free(p->outbox->topic);
        free(p->outbox->listen);
        free(p->outbox->token);
        free(p->outbox->results_topic);
        free(p->outbox->dsn);
        free(p->outbox->dsn_env);
        free(p->outbox->table);
        free(p->outbox);
    }
    free(p->file);
    free(p);
}

/* ------------------------------------------------------------------ */
/* Errors at a mark                                                    */
/* ------------------------------------------------------------------ */

int ks_mark_fail(char *err, size_t errlen, const ks_mark *m, const char *fmt, ...)
{
    int n = snprintf(err, errlen, "%s:%d:%d: ", m->file, m->line, m->col);
    if (n < 0 || (size_t)n >= errlen)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}
