/*
 * query_server.c - see query_server.h. One libmicrohttpd thread answers
 * (http/httpd.c); a key is read under the task registry's lock
 * (query_tasks.h) through a read snapshot of the task's LMDB environment
 * (ks_store_snap_*: committed data only, the worker's batch never waits);
 * a standby read (`standby=1`) reads a standby's store the same way under
 * the standby thread's lock (standby.h), which keeps it open meanwhile.
 * The map partition -> holder comes from describing the group, done by a
 * thread of its own (the router) so that a slow broker never holds the
 * HTTP thread for more than REFRESH_WAIT_MS. A request asks the router
 * for a new map when the map is older than a second, after this process's
 * tasks changed (a rebalance), and when it finds no holder, or finds this
 * process holding a task it does not run (a rebalance it has not seen
 * yet); the router describes at most every 200 ms.
 */
#include "runtime/query_server.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "http/httpd.h"
#include "kafka/group_members.h"
#include "kafka/kafka.h"
#include "kafka/member_id.h"
#include "kafka/partitioner.h"
#include "query/query_request.h"
#include "query/query_store.h"
#include "runtime/query_tasks.h"
#include "runtime/standby.h"
#include "runtime/topology.h"
#include "window/window_core.h"

#define DESCRIBE_MAX_AGE_MS 1000
#define DESCRIBE_MIN_GAP_MS 200
#define DESCRIBE_TIMEOUT_MS 5000
#define REFRESH_WAIT_MS 1000 /* a request waits this long for a new map at most */

struct ks_query_server {
    ks_engine *eng;
    const ks_pipeline *p;
    int32_t partitions;
    ks_httpd *httpd;
    rd_kafka_t *admin;
    char self[256];  /* our advertised address */
    /* the map, guarded by lock: written by the router, read by requests */
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    pthread_t router;
    int routing, stop, want; /* want: a request asked for a new map */
    uint64_t rounds;         /* describes finished, successful or not */
    char **holder;   /* per partition: host:port of its holder, or NULL */
    int64_t described_ms;
    uint64_t described_gen; /* ks_query_tasks_generation at that describe */
};

const char *ks_query_address(const ks_pipeline *p)
{
    return p->query_advertise ? p->query_advertise : p->query_listen;
}

/* ---- routing -------------------------------------------------------------- */

/* Describe the group (lock not held: it waits on Kafka) and put the new
 * map in place. Members that advertise no query address (another build,
 * `query:` off) hold nothing we can reach. */
static void describe(ks_query_server *s)
{
    uint64_t gen = ks_query_tasks_generation(s->eng->qtasks);
    ks_group_member *m = NULL;
    size_t n = 0;
    char err[512];
    int rc = ks_group_describe(s->admin, s->p->application, DESCRIBE_TIMEOUT_MS, &m, &n, err,
                               sizeof err);
    if (rc != 0)
        ks_warn("query", "%s", err);
    pthread_mutex_lock(&s->lock);
    s->described_ms = ks_mono_ms();
    s->described_gen = gen;
    for (int32_t i = 0; rc == 0 && i < s->partitions; i++) {
        free(s->holder[i]);
        s->holder[i] = NULL;
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const char *addr = ks_member_id_parse(m[i].client_id, NULL, 0);
        if (!addr)
            continue;
        for (size_t j = 0; j < m[i].partition_count; j++) {
            int32_t part = m[i].partitions[j];
            if (part >= 0 && part < s->partitions && !s->holder[part])
                s->holder[part] = strdup(addr);
        }
    }
    s->rounds++;
    pthread_cond_broadcast(&s->done);
    pthread_mutex_unlock(&s->lock);
    ks_group_members_free(m, n);
}

/* The router: describes when asked, at most every DESCRIBE_MIN_GAP_MS. */
static void *route(void *arg)
{
    ks_query_server *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->stop) {
        if (!s->want) {
            pthread_cond_wait(&s->wake, &s->lock);
            continue;
        }
        int64_t gap = s->described_ms ? s->described_ms + DESCRIBE_MIN_GAP_MS - ks_mono_ms() : 0;
        s->want = 0;
        pthread_mutex_unlock(&s->lock);
        if (gap > 0)
            usleep((useconds_t)gap * 1000);
        describe(s);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* With s->lock held: ask the router for a new map and wait for it, at
 * most REFRESH_WAIT_MS (the old map stays when it comes late). */
static void refresh(ks_query_server *s)
{
    uint64_t before = s->rounds;
    s->want = 1;
    pthread_cond_signal(&s->wake);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += REFRESH_WAIT_MS / 1000;
    until.tv_nsec += (long)(REFRESH_WAIT_MS % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (s->rounds == before)
        if (pthread_cond_timedwait(&s->done, &s->lock, &until) != 0)
            break;
}

/* With s->lock held: is the map too old to trust? */
static int stale(ks_query_server *s)
{
    return !s->rounds || ks_mono_ms() - s->described_ms > DESCRIBE_MAX_AGE_MS ||
           ks_query_tasks_generation(s->eng->qtasks) != s->described_gen;
}

/* The address of the process holding `partition` into buf: 0, or -1 when
 * none other than this one is known even after asking for a new map. */
static int holder_of(ks_query_server *s, int32_t partition, char *buf, size_t len)
{
    pthread_mutex_lock(&s->lock);
    const char *h = s->holder[partition];
    if (!h || strcmp(h, s->self) == 0 || stale(s))
        refresh(s);
    h = s->holder[partition];
    int rc = h && strcmp(h, s->self) != 0 ? 0 : -1;
    if (rc == 0)
        snprintf(buf, len, "%s", h);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* ---- answers -------------------------------------------------------------- */

/* Send `doc` (taken) as JSON with `code` and `headers` (name, value, ...,
 * NULL; NULL for none). */
static enum MHD_Result send_json_with(struct MHD_Connection *c, unsigned code, json_t *doc,
                                      const char *const *headers)
{
    char *body = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    size_t len = body ? strlen(body) : 0;
    if (body) { /* a newline, as the command line prints it */
        char *grown = realloc(body, len + 2);
        if (grown) {
            body = grown;
            body[len++] = '\n';
            body[len] = '\0';
        }
    }
    return ks_http_send_headers(c, code, "application/json", body, len, headers);
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned code, json_t *doc)
{
    return send_json_with(c, code, doc, NULL);
}

static enum MHD_Result send_error_with(struct MHD_Connection *c, unsigned code,
                                       const char *msg, const char *const *headers)
{
    char clean[1024];
    ks_http_clean_text(msg, clean, sizeof clean);
    return send_json_with(c, code, json_pack("{s:s}", "error", clean), headers);
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned code, const char *msg)
{
    return send_error_with(c, code, msg, NULL);
}

/* ---- parameters ----------------------------------------------------------- */

typedef struct params {
    const char *names[KS_QUERY_REQUEST_MAX_PARAMS];
    const char *values[KS_QUERY_REQUEST_MAX_PARAMS];
    size_t n;
    int too_many;
} params;

static enum MHD_Result collect(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *value)
{
    (void)kind;
    params *ps = cls;
    if (ps->n == KS_QUERY_REQUEST_MAX_PARAMS) {
        ps->too_many = 1;
        return MHD_NO;
    }
    ps->names[ps->n] = key;
    ps->values[ps->n++] = value;
    return MHD_YES;
}

/* Append `v` percent-encoded (RFC 3986 unreserved kept) to buf. */
static void append_encoded(char *buf, size_t len, size_t *o, const char *v)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)v; *p && *o + 4 < len; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '_' || *p == '.' || *p == '~') {
            buf[(*o)++] = (char)*p;
        } else {
            buf[(*o)++] = '%';
            buf[(*o)++] = hex[*p >> 4];
            buf[(*o)++] = hex[*p & 15];
        }
    }
    buf[*o] = '\0';
}

/* 307 to the same request at `holder`. */
static enum MHD_Result redirect(struct MHD_Connection *c, const char *holder, const params *ps,
                                int32_t partition)
{
    char url[8192];
    size_t o = (size_t)snprintf(url, sizeof url, "http://%s/v1/query", holder);
    for (size_t i = 0; i < ps->n && o + 8 < sizeof url; i++) {
        url[o++] = i ? '&' : '?';
        append_encoded(url, sizeof url, &o, ps->names[i]);
        if (ps->values[i] && o + 2 < sizeof url) {
            url[o++] = '=';
            append_encoded(url, sizeof url, &o, ps->values[i]);
        }
    }
    json_t *doc = json_pack("{s:s,s:i,s:s}", "redirect", url, "partition", (int)partition,
                            "holder", holder);
    char *body = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    struct MHD_Response *r =
        body ? MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!r) {
        free(body);
        return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, url);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_TEMPORARY_REDIRECT, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- reading -------------------------------------------------------------- */

/* What the request reads, as a ks_query (filters borrowed from r). 0, or
 * an HTTP status with msg. */
static unsigned make_query(const ks_query_server *s, const ks_query_request *r, ks_query *q,
                           int *store_index, char *msg, size_t len)
{
    const ks_cfg_store *st = ks_pipeline_store(s->p, r->store);
    if (!st) {
        snprintf(msg, len, "no store '%s'", r->store);
        return MHD_HTTP_NOT_FOUND;
    }
    if (st->global) {
        snprintf(msg, len, "store '%s' is a global table's: every process has all of it; "
                           "query it locally (kstreams query FILE %s)", r->store, r->store);
        return MHD_HTTP_BAD_REQUEST;
    }
    *store_index = (int)(st - s->p->stores);
    const ks_cfg_node *wnode = NULL;
    ks_win_spec spec;
    char werr[1024];
    if (ks_topology_store_window(s->p, r->store, &wnode, &spec, werr, sizeof werr) < 0) {
        snprintf(msg, len, "%s", werr);
        return MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (spec.kind == KS_WIN_NONE && (r->from || r->to)) {
        snprintf(msg, len, "store '%s' is not windowed: from/to are window start times; "
                           "use from_key/to_key for a key range", r->store);
        return MHD_HTTP_BAD_REQUEST;
    }
    if (spec.kind == KS_WIN_SLIDING && strcmp(wnode->type, "count") != 0) {
        snprintf(msg, len, "store '%s' holds the records of sliding windows of node '%s' (%s), "
                           "not their values", r->store, wnode->name, wnode->type);
        return MHD_HTTP_BAD_REQUEST;
    }
    memset(q, 0, sizeof *q);
    q->store = r->store;
    q->json = 1;
    q->int64 = r->int64;
    q->hex = r->hex;
    q->single = r->key.set;
    q->key = r->key.set ? &r->key : NULL;
    q->kfrom = &r->kfrom;
    q->kto = &r->kto;
    q->tfrom = r->tfrom;
    q->tto = r->tto;
    q->kind = spec.kind;
    q->size = spec.size;
    q->retention = spec.retention;
    q->array = json_array();
    return q->array ? 0 : MHD_HTTP_INTERNAL_SERVER_ERROR;
}

/* The 503 of a task that is restoring. */
static json_t *restoring_doc(int32_t partition, const ks_qt_status *st)
{
    char msg[256];
    snprintf(msg, sizeof msg, "task %d is restoring its stores: ask again later", (int)partition);
    return json_pack("{s:s,s:i,s:{s:s,s:I,s:I}}", "error", msg, "partition", (int)partition,
                     "restore", "store", st->store, "done", (json_int_t)st->done, "total",
                     (json_int_t)st->total);
}

/* How old an answer may be: what a `standby=1` read was answered from. */
typedef struct staleness {
    const char *kind; /* "standby", "restoring", or NULL: the active task (fresh) */
    int64_t offset;   /* the store's changelog checkpoint in the snapshot read, -1 none */
    int64_t lag;      /* about how many changelog records it lacks, -1 not known */
} staleness;

/* Read q from store `store` of `task` through a read snapshot; *offset:
 * that store's checkpoint in it (-1 none). 0 or a negative ks_err. */
static int read_store(ks_task *task, int32_t partition, int store, ks_query *q,
                      int64_t *offset)
{
    *offset = -1;
    if (!task->env || !task->dbs || !task->dbs[store])
        return 0; /* a task without this store: nothing in it */
    ks_store_snap *snap = NULL;
    int rc = ks_store_snap_begin(task->env, &snap);
    if (rc != 0)
        return rc;
    if (ks_store_snap_checkpoint(snap, task->dbs[store], offset) != 0)
        *offset = -1;
    q->snap = snap;
    q->partition = partition;
    rc = ks_query_read(q, task->dbs[store]);
    ks_store_snap_end(snap);
    q->snap = NULL;
    return rc;
}

/* Read q from the active task of `partition` or, with `stale_ok`, from
 * that task while it restores or from a standby of it here (*how says
 * which). 1 when none of them is here (*st says why), 0 after reading,
 * or a negative ks_err. */
static int read_task(ks_query_server *s, int32_t partition, int store, int stale_ok,
                     ks_query *q, ks_qt_status *st, staleness *how)
{
    const char *name = s->p->stores[store].name;
    ks_task *task = stale_ok ? ks_query_tasks_lock_stale(s->eng->qtasks, partition, name, st)
                             : ks_query_tasks_lock(s->eng->qtasks, partition, name, st);
    int rc = task ? read_store(task, partition, store, q, &how->offset) : 1;
    if (task && st->state == KS_QT_RESTORING) {
        how->kind = "restoring";
        if (strcmp(st->store, name) == 0 && st->total >= 0)
            how->lag = st->total > (int64_t)st->done ? st->total - (int64_t)st->done : 0;
    }
    ks_query_tasks_unlock(s->eng->qtasks);
    if (rc != 1 || !stale_ok)
        return rc;
    /* the standby thread neither closes nor commits it while we read */
    int64_t lag;
    task = ks_standby_lock(s->eng->standby, partition, store, &lag);
    if (task) {
        rc = read_store(task, partition, store, q, &how->offset);
        how->kind = "standby";
        how->lag = lag;
    }
    ks_standby_unlock(s->eng->standby);
    return rc;
}

/* The headers that mark a stale answer into h (name, value, ..., NULL),
 * the numbers printed into num. */
static void stale_headers(const staleness *how, const char *h[7], char num[2][24])
{
    size_t n = 0;
    if (how->kind) {
        h[n++] = "X-Kstreams-Stale";
        h[n++] = how->kind;
    }
    if (how->kind && how->offset >= 0) {
        snprintf(num[0], sizeof num[0], "%lld", (long long)how->offset);
        h[n++] = "X-Kstreams-Changelog-Offset";
        h[n++] = num[0];
    }
    if (how->kind && how->lag >= 0) {
        snprintf(num[1], sizeof num[1], "%lld", (long long)how->lag);
        h[n++] = "X-Kstreams-Lag";
        h[n++] = num[1];
    }
    h[n] = NULL;
}

static enum MHD_Result answer_query(ks_query_server *s, struct MHD_Connection *c)
{
    params ps = {0};
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect, &ps);
    if (ps.too_many)
        return send_error(c, MHD_HTTP_BAD_REQUEST, "too many parameters");
    ks_query_request r;
    char msg[1536];
    if (ks_query_request_parse(&r, ps.names, ps.values, ps.n, msg, sizeof msg) != 0) {
        ks_query_request_free(&r);
        return send_error(c, MHD_HTTP_BAD_REQUEST, msg);
    }
    ks_query q = {0}; /* freed below whatever make_query got to */
    int store = 0;
    unsigned code = make_query(s, &r, &q, &store, msg, sizeof msg);
    int32_t part = r.key.set ? ks_kafka_partition_for(r.key.data, r.key.len, s->partitions)
                             : r.partition;
    if (!code && part >= s->partitions) {
        snprintf(msg, sizeof msg, "partition %d: the application has %d", (int)part,
                 (int)s->partitions);
        code = MHD_HTTP_BAD_REQUEST;
    }
    enum MHD_Result ret;
    ks_qt_status st;
    staleness how = {NULL, -1, -1};
    int rc = code ? 0 : read_task(s, part, store, r.standby, &q, &st, &how);
    const char *marks[7];
    char num[2][24];
    stale_headers(&how, marks, num);
    char holder[256];
    if (code) {
        ret = send_error(c, code, msg);
    } else if (rc < 0) {
        snprintf(msg, sizeof msg, "reading store '%s' of task %d failed (%d)", r.store, (int)part,
                 rc);
        ret = send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, msg);
    } else if (rc == 0 && r.key.set && !q.found) {
        snprintf(msg, sizeof msg, "key not found in store '%s'%s", r.store,
                 how.kind ? " (a stale copy of it)" : "");
        ret = send_error_with(c, MHD_HTTP_NOT_FOUND, msg, marks);
    } else if (rc == 0) { /* as `kstreams query --format json` prints it */
        json_t *doc = r.key.set && q.kind == KS_WIN_NONE ? json_array_get(q.array, 0) : q.array;
        ret = send_json_with(c, MHD_HTTP_OK, json_incref(doc), marks);
    } else if (st.state == KS_QT_RESTORING) {
        ret = send_json(c, MHD_HTTP_SERVICE_UNAVAILABLE, restoring_doc(part, &st));
    } else if (holder_of(s, part, holder, sizeof holder) == 0) {
        ret = redirect(c, holder, &ps, part);
    } else {
        snprintf(msg, sizeof msg, "no process of the group holds task %d now (rebalancing?): "
                                  "ask again later", (int)part);
        ret = send_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, msg);
    }
    json_decref(q.array);
    free(q.ts);
    ks_query_request_free(&r);
    return ret;
}

/* GET /v1/tasks: every partition with its holder and its state here. */
static enum MHD_Result answer_tasks(ks_query_server *s, struct MHD_Connection *c)
{
    pthread_mutex_lock(&s->lock);
    if (stale(s))
        refresh(s);
    json_t *tasks = json_array();
    for (int32_t i = 0; tasks && i < s->partitions; i++) {
        ks_qt_status st;
        ks_query_tasks_lock(s->eng->qtasks, i, NULL, &st);
        ks_query_tasks_unlock(s->eng->qtasks);
        const char *state = st.state == KS_QT_ACTIVE      ? "active"
                            : st.state == KS_QT_RESTORING ? "restoring"
                            : s->holder[i]                ? "remote"
                                                          : "unassigned";
        const char *h = st.state != KS_QT_ABSENT ? s->self : s->holder[i];
        int64_t lag;
        int standby = ks_standby_lock(s->eng->standby, i, -1, &lag) != NULL;
        ks_standby_unlock(s->eng->standby);
        json_array_append_new(tasks, json_pack("{s:i,s:s,s:s?,s:b}", "partition", (int)i, "state",
                                               state, "holder", h, "standby", standby));
    }
    pthread_mutex_unlock(&s->lock);
    return send_json(c, MHD_HTTP_OK,
                     json_pack("{s:s,s:s,s:i,s:o}", "application", s->p->application, "self",
                               s->self, "partitions", (int)s->partitions, "tasks", tasks));
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    (void)upload;
    (void)upload_size;
    (void)con_cls;
    ks_query_server *s = cls;
    /* answered on the first callback: a body sent along is never read */
    if (!ks_http_authorized(c, s->p->query_token))
        return send_error(c, MHD_HTTP_UNAUTHORIZED, "missing or wrong bearer token");
    if (strcmp(method, "GET") != 0)
        return send_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET");
    if (strcmp(url, "/v1/query") == 0)
        return answer_query(s, c);
    if (strcmp(url, "/v1/tasks") == 0)
        return answer_tasks(s, c);
    return send_error(c, MHD_HTTP_NOT_FOUND, "not found: GET /v1/query or /v1/tasks");
}

/* ---- start and stop ------------------------------------------------------- */

int ks_query_server_start(ks_engine *eng, ks_query_server **out, char *err, size_t errlen)
{
    *out = NULL;
    const ks_pipeline *p = eng->topo->pipeline;
    ks_query_server *s = calloc(1, sizeof *s);
    if (!s || !(s->holder = calloc((size_t)eng->topo->partitions + 1, sizeof *s->holder))) {
        free(s);
        return KS_ERR_NOMEM;
    }
    s->eng = eng;
    s->p = p;
    s->partitions = eng->topo->partitions;
    snprintf(s->self, sizeof s->self, "%s", ks_query_address(p));
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    pthread_cond_init(&s->done, NULL);
    if (!(s->admin = ks_kafka_admin_client(p, err, errlen))) {
        ks_query_server_stop(s);
        return KS_ERR_IO;
    }
    if (pthread_create(&s->router, NULL, route, s) != 0) {
        snprintf(err, errlen, "query endpoint: cannot start its router thread");
        ks_query_server_stop(s);
        return KS_ERR_NOMEM;
    }
    s->routing = 1;
    int rc = ks_httpd_start("query endpoint", p->query_listen, &p->query_limits, on_request, s,
                            NULL, NULL, &s->httpd, err, errlen);
    if (rc) {
        ks_query_server_stop(s);
        return rc;
    }
    ks_info("query", "remote queries on http://%s/v1/query (advertised as %s)%s",
            p->query_listen, s->self, p->query_token ? " (bearer token required)" : "");
    *out = s;
    return 0;
}

void ks_query_server_stop(ks_query_server *s)
{
    if (!s)
        return;
    ks_httpd_stop(s->httpd); /* first: a request in flight uses the rest */
    if (s->routing) { /* then the router: it uses the admin client */
        pthread_mutex_lock(&s->lock);
        s->stop = 1;
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->router, NULL);
    }
    if (s->admin)
        rd_kafka_destroy(s->admin);
    for (int32_t i = 0; s->holder && i < s->partitions; i++)
        free(s->holder[i]);
    free(s->holder);
    if (s->eng) { /* the sync objects exist once eng is set */
        pthread_cond_destroy(&s->done);
        pthread_cond_destroy(&s->wake);
        pthread_mutex_destroy(&s->lock);
    }
    free(s);
}
