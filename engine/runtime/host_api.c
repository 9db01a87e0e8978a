/*
 * host_api.c - the ks_host_api table: what a plugin may ask of the engine.
 *
 * Every entry checks its handle's magic and the calling phase before it
 * touches anything (input is checked where it enters), so a plugin bug becomes
 * an error code and a log line, not a corrupted engine.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fault.h"
#include "runtime/host_json.h"
#include "runtime/node_serde.h"
#include "base/log.h"
#include "http/metrics.h"
#include "ledger/ledger_pg.h"
#include "outbox/outbox.h"
#include "outbox/outbox_requests.h"
#include "runtime/task.h"
#include "runtime/task_cache.h"

/* A host-owned buffer for named functions' outputs. */
struct ks_buf {
    unsigned char *data;
    size_t len;
    size_t cap;
};

static int ctx_ok(ks_ctx *ctx)
{
    return ctx && ctx->magic == KS_CTX_MAGIC;
}

static int can_run(ks_ctx *ctx)
{
    return ctx_ok(ctx) && (ctx->phase == KS_PHASE_INIT || ctx->phase == KS_PHASE_PROCESS ||
                           ctx->phase == KS_PHASE_PUNCTUATE);
}

static void api_log(ks_ctx *ctx, ks_log_level level, const char *fmt, ...)
{
    char where[256] = "plugin";
    if (ctx_ok(ctx))
        snprintf(where, sizeof where, "%s %s", ctx->task->where, ctx->node->name);
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ks_log(level, where, "%s", msg);
}

static const char *api_node_name(ks_ctx *ctx)
{
    return ctx_ok(ctx) ? ctx->node->name : NULL;
}

static int32_t api_task_id(ks_ctx *ctx)
{
    return ctx_ok(ctx) ? ctx->task->partition : -1;
}

/* ---- config ----------------------------------------------------------- */

static int config_text(ks_ctx *ctx, const char *key, ks_config_type type,
                       const char **out)
{
    if (!ctx_ok(ctx) || !key)
        return KS_ERR_INVALID;
    const ks_processor_type *pt = ctx->build.ptype; /* this instance's build */
    const ks_config_field *f = NULL;
    for (size_t j = 0; j < pt->config_count; j++)
        if (strcmp(pt->config[j].name, key) == 0)
            f = &pt->config[j];
    if (!f)
        return KS_ERR_NOT_FOUND;
    if (f->type != type && !(type == KS_CONFIG_STRING))
        return KS_ERR_INVALID;
    /* "window.x" fields are written as `window: { x: ... }` (topology.c) */
    const ks_cfg_scalars *c = &ctx->node->cfg->config;
    if (strncmp(key, "window.", 7) == 0) {
        c = &ctx->node->cfg->window;
        key += 7;
    }
    for (size_t i = 0; i < c->count; i++)
        if (strcmp(c->items[i].key, key) == 0) {
            *out = c->items[i].value;
            return 0;
        }
    if (!f->default_value)
        return KS_ERR_NOT_FOUND;
    *out = f->default_value;
    return 0;
}

static int api_config_string(ks_ctx *ctx, const char *key, const char **out)
{
    return config_text(ctx, key, KS_CONFIG_STRING, out);
}

static int api_config_int(ks_ctx *ctx, const char *key, int64_t *out)
{
    const char *v;
    int rc = config_text(ctx, key, KS_CONFIG_INT, &v);
    if (rc == 0)
        *out = strtoll(v, NULL, 10);
    return rc;
}

static int api_config_double(ks_ctx *ctx, const char *key, double *out)
{
    const char *v;
    int rc = config_text(ctx, key, KS_CONFIG_DOUBLE, &v);
    if (rc == 0)
        *out = strtod(v, NULL);
    return rc;
}

static int api_config_bool(ks_ctx *ctx, const char *key, int *out)
{
    const char *v;
    int rc = config_text(ctx, key, KS_CONFIG_BOOL, &v);
    if (rc == 0)
        *out = strcmp(v, "true") == 0;
    return rc;
}

static int api_config_duration_ms(ks_ctx *ctx, const char *key, int64_t *out)
{
    const char *v;
    int rc = config_text(ctx, key, KS_CONFIG_DURATION, &v);
    if (rc == 0 && ks_parse_duration_ms(v, out) != 0)
        return KS_ERR_INVALID;
    return rc;
}

/* ---- graph -------------------------------------------------------------- */

static int api_forward(ks_ctx *ctx, const ks_record *rec)
{
    if (!ctx_ok(ctx) || !rec)
        return KS_ERR_INVALID;
    if (ctx->phase != KS_PHASE_PROCESS && ctx->phase != KS_PHASE_PUNCTUATE)
        return KS_ERR_STATE;
    const ks_topo_node *n = ctx->node;
    if (ctx->phase == KS_PHASE_PROCESS && ks_task_cache_on(ctx->task, n))
        return ks_task_cache_forward(ctx->task, n, rec); /* passed on later */
    int rc = 0;
    for (size_t c = 0; c < n->child_count && rc == 0; c++)
        rc = ks_task_dispatch(ctx->task, n, &ctx->task->topo->nodes[n->children[c]], rec);
    return rc;
}

static int api_forward_to(ks_ctx *ctx, const char *child, const ks_record *rec)
{
    if (!ctx_ok(ctx) || !rec || !child)
        return KS_ERR_INVALID;
    if (ctx->phase != KS_PHASE_PROCESS && ctx->phase != KS_PHASE_PUNCTUATE)
        return KS_ERR_STATE;
    const ks_topo_node *n = ctx->node;
    for (size_t c = 0; c < n->child_count; c++) {
        const ks_topo_node *cn = &ctx->task->topo->nodes[n->children[c]];
        /* a repartition sink stands in for the node it feeds (repartition.h) */
        if (strcmp(cn->name, child) == 0 ||
            (cn->kind == KS_NODE_SINK && cn->sink->feeds && strcmp(cn->sink->feeds, child) == 0))
            return ks_task_dispatch(ctx->task, n, cn, rec);
    }
    return KS_ERR_NOT_FOUND;
}

/* ---- stores ------------------------------------------------------------- */

static int api_store(ks_ctx *ctx, const char *name, ks_store **out)
{
    if (!ctx_ok(ctx) || !out)
        return KS_ERR_INVALID;
    const ks_topo_node *n = ctx->node;
    const ks_pipeline *p = ctx->task->topo->pipeline;
    for (int pass = 0; pass < 2; pass++)
        for (size_t s = 0; s < n->store_count; s++) {
            const ks_cfg_store *st = &p->stores[n->stores[s]];
            /* first by store name; then a node read as its table by the
             * node's name (join.tables' `left: counts`) */
            if (!name || strcmp(pass ? (st->node_table ? st->node_table : "") : st->name,
                                name) == 0) {
                if (!ctx->stores[s].db)
                    return KS_ERR_STATE;
                *out = &ctx->stores[s];
                return 0;
            }
        }
    return KS_ERR_NOT_FOUND;
}

static int api_store_values(ks_store *st)
{
    if (!st || !ctx_ok(st->ctx))
        return KS_ERR_INVALID;
    const ks_pipeline *p = st->ctx->task->topo->pipeline;
    const ks_cfg_store *cs = &p->stores[st->index];
    if (cs->table)
        return KS_STORE_VALUES_TABLE;
    const ks_cfg_node *owner = cs->node_table ? ks_pipeline_node(p, cs->node_table) : NULL;
    return owner && ks_cfg_node_is(owner, "count", "count") ? KS_STORE_VALUES_INT64
                                                          : KS_STORE_VALUES_PLAIN;
}

static int store_ok(ks_store *st) { return st && ctx_ok(st->ctx) && st->db; }

/* A global table's store: read from the process's global environment. */
static int is_global(const ks_store *st)
{
    return st->ctx->task->topo->pipeline->stores[st->index].global;
}

static int api_store_get(ks_store *st, ks_bytes key, ks_bytes *value)
{
    if (!store_ok(st) || !value)
        return KS_ERR_INVALID;
    if (is_global(st))
        return st->ctx->task->io.global
                   ? ks_global_get(st->ctx->task->io.global, &st->global, st->index, key, value)
                   : KS_ERR_NOT_FOUND;
    return ks_store_get(st->db, key, value);
}

static int store_write(ks_store *st, ks_bytes key, const ks_bytes *value)
{
    if (!store_ok(st))
        return KS_ERR_INVALID;
    if (!can_run(st->ctx))
        return KS_ERR_STATE;
    ks_task *task = st->ctx->task;
    if (!ks_cfg_store_writable(task->topo->pipeline, st->ctx->node->cfg, st->index))
        return KS_ERR_STATE; /* a table changes only by its topic (table.h), a
                                node's table only by that node */
    if (st->ctx->migrating)
        ks_fault_point(KS_FAULT_MID_MIGRATE);
    int rc = ks_task_begin(task);
    if (rc == 0)
        rc = value ? ks_store_put(st->db, key, *value) : ks_store_del(st->db, key);
    int owed = 0;
    if (rc == 0) {
        owed = ks_task_cache_store(task, st->ctx, (int)(st - st->ctx->stores), key, value);
        if (owed < 0)
            rc = owed;
    }
    if (rc == 0 && !owed && task->io.changelog &&
        task->topo->pipeline->stores[st->index].changelog)
        rc = task->io.changelog(task->io.arg, task, st->index, key, value);
    if (rc != 0)
        task->verdict = task->verdict > KS_RETRY ? task->verdict : KS_RETRY;
    return rc;
}

static int api_store_put(ks_store *st, ks_bytes key, ks_bytes value)
{
    return store_write(st, key, &value);
}

static int api_store_delete(ks_store *st, ks_bytes key)
{
    return store_write(st, key, NULL);
}

static int api_store_range(ks_store *st, ks_bytes from, ks_bytes to, ks_range_cb cb,
                           void *arg)
{
    if (!store_ok(st) || !cb)
        return KS_ERR_INVALID;
    if (is_global(st))
        return st->ctx->task->io.global ? ks_global_range(st->ctx->task->io.global, &st->global,
                                                          st->index, from, to, cb, arg)
                                        : 0;
    return ks_store_range(st->db, from, to, cb, arg);
}

/* ---- time --------------------------------------------------------------- */

static int api_schedule(ks_ctx *ctx, ks_time_kind kind, int64_t interval_ms)
{
    if (!ctx_ok(ctx) || (kind != KS_TIME_STREAM && kind != KS_TIME_WALLCLOCK) ||
        interval_ms <= 0)
        return KS_ERR_INVALID;
    ctx->schedules[kind].interval = interval_ms;
    ctx->schedules[kind].next = 0;
    return 0;
}

static int64_t wallclock_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t api_now(ks_ctx *ctx, ks_time_kind kind)
{
    if (kind == KS_TIME_STREAM)
        return ctx_ok(ctx) ? ctx->task->sub_time[ctx->node->sub] : -1;
    if (ctx_ok(ctx) && ctx->task->wallclock > 0)
        return ctx->task->wallclock; /* the test driver's clock */
    return wallclock_ms();
}

/* ---- functions ---------------------------------------------------------- */

static int api_function(ks_ctx *ctx, const char *role, ks_function_kind kind,
                        void (**fn)(void))
{
    if (!ctx_ok(ctx) || !role || !fn)
        return KS_ERR_INVALID;
    const ks_node_build *n = &ctx->build; /* this instance's build */
    for (size_t i = 0; i < n->fn_count; i++) {
        if (strcmp(n->fns[i].cfg->role, role) != 0)
            continue;
        if (n->fns[i].fn->kind != kind) {
            api_log(ctx, KS_LOG_ERROR,
                    "function '%s.%s' given as '%s' is of kind %d, expected kind %d",
                    n->fns[i].cfg->plugin, n->fns[i].cfg->name, role,
                    (int)n->fns[i].fn->kind, (int)kind);
            return KS_ERR_INVALID;
        }
        *fn = n->fns[i].fn->fn;
        return 0;
    }
    return KS_ERR_NOT_FOUND;
}

static int api_buf_set(ks_buf *buf, const void *data, size_t len)
{
    if (!buf || (!data && len))
        return KS_ERR_INVALID;
    if (len > buf->cap) {
        unsigned char *grown = realloc(buf->data, len);
        if (!grown)
            return KS_ERR_NOMEM;
        buf->data = grown;
        buf->cap = len;
    }
    if (len)
        memcpy(buf->data, data, len);
    buf->len = len;
    return 0;
}

static ks_buf *api_buf_new(void) { return calloc(1, sizeof(ks_buf)); }

static void api_buf_free(ks_buf *buf)
{
    if (buf)
        free(buf->data);
    free(buf);
}

static ks_bytes api_buf_get(const ks_buf *buf)
{
    return buf ? (ks_bytes){buf->data, buf->len} : (ks_bytes){NULL, 0};
}

static int api_metric_add(ks_ctx *ctx, const char *name, double delta)
{
    if (!ctx_ok(ctx) || !name || !*name)
        return KS_ERR_INVALID;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
            return KS_ERR_INVALID;
    if (!ctx->task->io.metrics)
        return 0;
    char family[160], labels[256];
    snprintf(family, sizeof family, "kstreams_plugin_%s_total", name);
    snprintf(labels, sizeof labels, "task=\"%d\",node=\"%s\"", (int)ctx->task->partition,
             ctx->node->name);
    ks_metrics_add(ctx->task->io.metrics, family, labels, delta);
    return 0;
}

static const char *api_application_id(ks_ctx *ctx)
{
    return ctx_ok(ctx) ? ctx->task->topo->pipeline->application : NULL;
}

static const char *api_input_name(ks_ctx *ctx)
{
    return ctx_ok(ctx) && ctx->phase == KS_PHASE_PROCESS ? ctx->input : NULL;
}

/* ---- serdes (1.6) --------------------------------------------------------- */

static int api_input_serde(ks_ctx *ctx, ks_serde_kind *key, ks_serde_kind *value)
{
    if (!ctx_ok(ctx))
        return KS_ERR_INVALID;
    ks_node_input_serde(ctx->task->topo, ctx->node->index, key, value);
    return 0;
}

static int api_child_serde(ks_ctx *ctx, const char *child, ks_serde_kind *key,
                           ks_serde_kind *value)
{
    if (!ctx_ok(ctx))
        return KS_ERR_INVALID;
    const ks_topo_node *n = ctx->node;
    const ks_topology *t = ctx->task->topo;
    int k = -1, v = -1; /* -1: no child seen yet */
    for (size_t c = 0; c < n->child_count; c++) {
        const ks_topo_node *cn = &t->nodes[n->children[c]];
        /* a repartition sink stands in for the node it feeds, as in forward_to */
        if (child && strcmp(cn->name, child) != 0 &&
            !(cn->kind == KS_NODE_SINK && cn->sink->feeds && strcmp(cn->sink->feeds, child) == 0))
            continue;
        ks_serde_kind ck, cv;
        ks_node_child_serde(t, cn->index, &ck, &cv);
        k = k < 0 || k == (int)ck ? (int)ck : KS_SERDE_KIND_UNKNOWN;
        v = v < 0 || v == (int)cv ? (int)cv : KS_SERDE_KIND_UNKNOWN;
    }
    if (k < 0 && child)
        return KS_ERR_NOT_FOUND;
    if (key)
        *key = k < 0 ? KS_SERDE_KIND_UNKNOWN : (ks_serde_kind)k;
    if (value)
        *value = v < 0 ? KS_SERDE_KIND_UNKNOWN : (ks_serde_kind)v;
    return 0;
}

static int api_input_checked(ks_ctx *ctx)
{
    if (!ctx_ok(ctx))
        return KS_ERR_INVALID;
    return ks_node_input_checked(ctx->task->topo, ctx->node->index);
}

static int api_skip_reason(ks_ctx *ctx, const char *reason)
{
    if (!ctx_ok(ctx) || !reason)
        return KS_ERR_INVALID;
    if (ctx->phase != KS_PHASE_PROCESS)
        return KS_ERR_STATE;
    snprintf(ctx->task->skip_reason, sizeof ctx->task->skip_reason, "%s", reason);
    return 0;
}

/* ---- outbox (1.2) --------------------------------------------------------- */

static int user_ok(ks_bytes user)
{
    return user.data && user.len > 0 && user.len <= KS_OUTBOX_MAX_USER &&
           !memchr(user.data, '\0', user.len);
}

static int api_outbox_enqueue(ks_ctx *ctx, const char *outbox, ks_bytes user,
                              ks_bytes payload, char *id_out, size_t id_len)
{
    if (!ctx_ok(ctx) || !outbox || !id_out || id_len < KS_OUTBOX_ID_LEN + 1 ||
        !user_ok(user) || (payload.len && !payload.data))
        return KS_ERR_INVALID;
    ks_task *task = ctx->task;
    const ks_record *in = task->current;
    if (ctx->phase != KS_PHASE_PROCESS || !in || !in->topic || in->offset < 0 ||
        task->in_cache_flush)
        return KS_ERR_STATE; /* below a record cache: docs/stores.md */
    const ks_pipeline *p = task->topo->pipeline;
    if (!p->outbox || strcmp(p->outbox->name, outbox) != 0)
        return KS_ERR_NOT_FOUND;
    /* the postgres backend has no requests consumer yet: refuse rather
     * than queue events nothing will ever dispatch */
    if (p->outbox->backend == KS_OUTBOX_BACKEND_POSTGRES)
        return KS_ERR_UNSUPPORTED;
    if ((int64_t)payload.len > p->outbox->max_event_bytes)
        return KS_ERR_TOO_LARGE;
    if (!task->io.emit_topic)
        return KS_ERR_UNSUPPORTED;
    char id[KS_OUTBOX_ID_LEN + 1];
    if (ks_outbox_derive_id(p->application, in->topic, in->partition, in->offset,
                            task->outbox_calls, id) != 0)
        return KS_ERR_TOO_LARGE; /* over KS_OUTBOX_MAX_RANK events for one record */
    char topic[512];
    ks_outbox_requests_topic(p, topic, sizeof topic);
    ks_header h = {KS_OUTBOX_ID_HEADER, id, KS_OUTBOX_ID_LEN};
    ks_record r = {.key = user.data,
                   .key_len = user.len,
                   .value = payload.data,
                   .value_len = payload.len,
                   .timestamp = in->timestamp,
                   .partition = -1,
                   .offset = -1,
                   .headers = &h,
                   .header_count = 1};
    int rc = task->io.emit_topic(task->io.arg, task, topic, &r);
    if (rc)
        return rc;
    task->outbox_calls++;
    memcpy(id_out, id, sizeof id);
    return 0;
}

/* ---- the ledger and SQL in PostgreSQL (1.7; ledger/ledger_pg.h) ---------- */

static int api_ledger_open(ks_ctx *ctx, const char *dsn_env)
{
    if (!ctx_ok(ctx))
        return KS_ERR_INVALID;
    if (ctx->phase != KS_PHASE_INIT)
        return KS_ERR_STATE;
    const ks_cfg_outbox *o = ctx->task->topo->pipeline->outbox;
    const char *dsn;
    if (dsn_env)
        dsn = getenv(dsn_env);
    else if (o && o->backend == KS_OUTBOX_BACKEND_POSTGRES)
        dsn = o->dsn ? o->dsn : getenv(o->dsn_env);
    else
        dsn = NULL;
    if (!dsn || !*dsn)
        return KS_ERR_NOT_FOUND;
    char where[200];
    snprintf(where, sizeof where, "%s %s", ctx->task->where, ctx->node->name);
    return ks_ledger_open(ctx, dsn, where);
}

static int api_ledger_begin(ks_ctx *ctx, const char *group, const char *topic,
                            int32_t partition, int64_t offset, ks_bytes *stored)
{
    if (!ctx_ok(ctx))
        return KS_ERR_INVALID;
    ks_ledger_pg *l = ks_ledger_of(ctx);
    if (ctx->phase != KS_PHASE_PROCESS || !l)
        return KS_ERR_STATE;
    return ks_ledger_begin(l, group, topic, partition, offset, stored);
}

static int api_ledger_commit(ks_ctx *ctx, const char *event_id, int pushed_failure,
                             ks_bytes result)
{
    if (!ctx_ok(ctx))
        return KS_ERR_INVALID;
    return ks_ledger_commit(ks_ledger_of(ctx), event_id, pushed_failure, result);
}

static void api_ledger_rollback(ks_ctx *ctx)
{
    if (ctx_ok(ctx))
        ks_ledger_rollback(ks_ledger_of(ctx));
}

static void api_ledger_close(ks_ctx *ctx)
{
    if (ctx_ok(ctx))
        ks_ledger_close(ctx);
}

static ks_verdict api_sql_exec(ks_ctx *ctx, const char *sql, int nparams,
                               const char *const *params, const int *lengths,
                               ks_sql_result **out)
{
    if (!ctx_ok(ctx) || ctx->phase != KS_PHASE_PROCESS) {
        if (out)
            *out = NULL;
        ks_error("plugin", "sql_exec: only from a mailbox handler, in process()");
        return KS_FATAL;
    }
    return ks_ledger_exec(ks_ledger_of(ctx), sql, nparams, params, lengths, out);
}

static ks_host_api host_api = {
    .struct_size = sizeof(ks_host_api),
    .abi_major = KS_ABI_MAJOR,
    .abi_minor = KS_ABI_MINOR,
    .log = api_log,
    .node_name = api_node_name,
    .task_id = api_task_id,
    .config_string = api_config_string,
    .config_int = api_config_int,
    .config_double = api_config_double,
    .config_bool = api_config_bool,
    .config_duration_ms = api_config_duration_ms,
    .forward = api_forward,
    .forward_to = api_forward_to,
    .store = api_store,
    .store_get = api_store_get,
    .store_put = api_store_put,
    .store_delete = api_store_delete,
    .store_range = api_store_range,
    .schedule = api_schedule,
    .now = api_now,
    .function = api_function,
    .buf_set = api_buf_set,
    .buf_new = api_buf_new,
    .buf_free = api_buf_free,
    .buf_get = api_buf_get,
    .metric_add = api_metric_add,
    .application_id = api_application_id,
    .outbox_enqueue = api_outbox_enqueue,
    .input_name = api_input_name,
    .store_values = api_store_values,
    .input_serde = api_input_serde,
    .child_serde = api_child_serde,
    .skip_reason = api_skip_reason,
    .input_checked = api_input_checked,
    .ledger_open = api_ledger_open,
    .ledger_begin = api_ledger_begin,
    .ledger_commit = api_ledger_commit,
    .ledger_rollback = api_ledger_rollback,
    .ledger_close = api_ledger_close,
    .sql_exec = api_sql_exec,
    .sql_rows = ks_sql_rows,
    .sql_cols = ks_sql_cols,
    .sql_value = ks_sql_value,
    .sql_free = ks_sql_free,
};

static pthread_once_t json_once = PTHREAD_ONCE_INIT;

static void add_json_calls(void) { ks_host_json_fill(&host_api); }

const ks_host_api *ks_host_api_table(void)
{
    pthread_once(&json_once, add_json_calls);
    return &host_api;
}

