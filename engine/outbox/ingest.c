/*
 * http.c - see http.h. One libmicrohttpd daemon (httpd.c: limits and
 * deadline) with its own polling thread. The token and the announced
 * Content-Length are checked on the first callback, with the headers
 * only, so a client without the token or with an oversized body is
 * answered (401, 413) before one byte of its body is read. Bodies are then
 * collected up to max_event_bytes, parsed with jansson, and written with
 * ks_outbox_enqueue (durable on return) before the answer is sent.
 */
#include "outbox/ingest.h"

#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/httpd.h"
#include "base/log.h"

struct ks_http {
    ks_httpd *server;
    ks_outbox *ob;
    const ks_cfg_outbox *cfg;
};

/* The body of one request. */
typedef struct body {
    char *data;
    size_t len, cap;
    int too_large;
} body;

/* Answer with obj (taken; NULL when it could not be built). A body that
 * cannot be encoded still leaves a status line (ks_http_send). */
static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, json_t *obj)
{
    char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    return ks_http_send(c, code, "application/json", text, text ? strlen(text) : 0);
}

/* `why` may echo the client's bytes (a URL segment): cleaned to valid
 * UTF-8 first, which JSON needs. */
static const char *key_too_long_reason(void)
{
    static char why[80];
    snprintf(why, sizeof why, "\"key\" must be a non-empty string of at most %d bytes",
             KS_KEY_MAX);
    return why;
}

static enum MHD_Result fail(struct MHD_Connection *c, unsigned code, const char *why)
{
    char clean[1024];
    ks_http_clean_text(why, clean, sizeof clean);
    return reply(c, code, json_pack("{s:s}", "error", clean));
}

static enum MHD_Result post_event(ks_http *h, struct MHD_Connection *c, const body *b)
{
    json_error_t je;
    json_t *root = json_loadb(b->data ? b->data : "", b->len, 0, &je);
    char why[400];
    if (!root) {
        snprintf(why, sizeof why, "malformed JSON at line %d column %d: %s", je.line,
                 je.column, je.text);
        return fail(c, 400, why);
    }
    const char *k;
    json_t *v;
    enum MHD_Result ret;
    json_t *user = json_object_get(root, "user"), *payload = json_object_get(root, "payload"),
           *key = json_object_get(root, "key");
    if (!json_is_object(root))
        ret = fail(c, 400, "expected a JSON object with \"user\" and \"payload\"");
    else if (!json_is_string(user) || json_string_length(user) == 0 ||
             json_string_length(user) > KS_OUTBOX_MAX_USER ||
             strlen(json_string_value(user)) != json_string_length(user))
        ret = fail(c, 400, "\"user\" must be a non-empty string of at most 200 bytes "
                           "(the canonical user id)");
    else if (!payload)
        ret = fail(c, 400, "missing \"payload\"");
    else if (key && (!json_is_string(key) || json_string_length(key) == 0 ||
                     json_string_length(key) > KS_KEY_MAX))
        ret = fail(c, 400, key_too_long_reason());
    else {
        ret = MHD_YES;
        json_object_foreach(root, k, v)
        {
            if (strcmp(k, "user") && strcmp(k, "payload") && strcmp(k, "key")) {
                snprintf(why, sizeof why,
                         "unknown field \"%.100s\"; expected user, payload, key", k);
                ret = fail(c, 400, why);
                json_decref(root);
                return ret;
            }
        }
        char *text = json_dumps(payload, JSON_COMPACT | JSON_ENCODE_ANY);
        char id[KS_OUTBOX_ID_LEN + 1];
        int rc = text ? ks_outbox_enqueue(h->ob, json_string_value(user), h->cfg->topic,
                                          key ? json_string_value(key) : NULL, text,
                                          strlen(text), 0, id)
                      : KS_ERR_NOMEM;
        free(text);
        if (rc == 0)
            ret = reply(c, 201, json_pack("{s:s}", "id", id));
        else {
            ks_error("outbox-http", "enqueue: %s", ks_outbox_last_error(h->ob));
            ret = fail(c, 503, "the outbox cannot store the event; see the engine log");
        }
    }
    json_decref(root);
    return ret;
}

json_t *ks_outbox_event_json(const ks_outbox_event *ev)
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
    return o;
}

static enum MHD_Result get_event(ks_http *h, struct MHD_Connection *c, const char *id)
{
    ks_outbox_event ev;
    int rc = ks_outbox_get(h->ob, id, &ev);
    if (rc == KS_ERR_NOT_FOUND || rc == KS_ERR_INVALID)
        return fail(c, 404, "no such event");
    if (rc) {
        ks_error("outbox-http", "GET %s: %s", id, ks_outbox_last_error(h->ob));
        return fail(c, 503, "the outbox cannot be read; see the engine log");
    }
    json_t *o = ks_outbox_event_json(&ev);
    ks_outbox_event_clear(&ev);
    if (!o) /* a stored text that is not UTF-8: the row is damaged */
        ks_error("outbox-http", "GET %s: the stored event is not valid UTF-8", id);
    return o ? reply(c, 200, o) : fail(c, 500, "the event cannot be shown; see the engine log");
}

static enum MHD_Result route(ks_http *h, struct MHD_Connection *c, const char *url,
                             const char *method, const body *b)
{
    static const char ev_prefix[] = "/outbox/events/";
    if (strncmp(url, ev_prefix, sizeof ev_prefix - 1) == 0) {
        if (strcmp(method, "GET") != 0)
            return fail(c, 405, "use GET for an event's status");
        return get_event(h, c, url + sizeof ev_prefix - 1);
    }
    static const char ob_prefix[] = "/outbox/";
    const char *name = url + sizeof ob_prefix - 1, *slash;
    if (strncmp(url, ob_prefix, sizeof ob_prefix - 1) != 0 || !(slash = strchr(name, '/')) ||
        strcmp(slash, "/events") != 0)
        return fail(c, 404, "unknown path; expected POST /outbox/<name>/events or GET "
                            "/outbox/events/<id>");
    if (strcmp(method, "POST") != 0)
        return fail(c, 405, "use POST to add an event");
    if ((size_t)(slash - name) != strlen(h->cfg->name) ||
        strncmp(name, h->cfg->name, (size_t)(slash - name)) != 0) {
        char why[300];
        snprintf(why, sizeof why, "unknown outbox '%.*s'; this engine has '%s'",
                 (int)(slash - name > 100 ? 100 : slash - name), name, h->cfg->name);
        return fail(c, 404, why);
    }
    if (b->too_large) {
        char why[200];
        snprintf(why, sizeof why, "event larger than max_event_bytes (%lld bytes)",
                 (long long)h->cfg->max_event_bytes);
        return fail(c, 413, why);
    }
    return post_event(h, c, b);
}

/* The first callback, headers only: 0 to go on reading the body, or 1
 * with the answer already queued in *ret. */
static int refuse_early(ks_http *h, struct MHD_Connection *c, enum MHD_Result *ret)
{
    if (!ks_http_authorized(c, h->cfg->token)) {
        *ret = fail(c, 401, "missing or wrong bearer token");
        return 1;
    }
    const char *cl =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        char *end;
        errno = 0;
        unsigned long long n = strtoull(cl, &end, 10);
        if (errno == ERANGE || n > (unsigned long long)h->cfg->max_event_bytes) {
            char why[200];
            snprintf(why, sizeof why, "event larger than max_event_bytes (%lld bytes)",
                     (long long)h->cfg->max_event_bytes);
            *ret = fail(c, 413, why);
            return 1;
        }
    }
    return 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)version;
    ks_http *h = cls;
    body *b = *con_cls;
    if (!b) { /* first call: headers only */
        enum MHD_Result ret;
        if (refuse_early(h, c, &ret))
            return ret; /* libmicrohttpd reads no body after an answer */
        if (!(b = calloc(1, sizeof *b)))
            return MHD_NO;
        *con_cls = b;
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        size_t max = (size_t)h->cfg->max_event_bytes;
        *upload_data_size = 0;
        /* a chunked body announces no length: drop what is over the limit
         * (nothing is kept) and answer 413 at its end, within the deadline */
        if (b->too_large || n > max - b->len) {
            b->too_large = 1;
            return MHD_YES;
        }
        if (b->len + n + 1 > b->cap) {
            size_t cap = (b->len + n + 1) * 2;
            if (cap > max + 1)
                cap = max + 1;
            char *d = realloc(b->data, cap);
            if (!d)
                return MHD_NO;
            b->data = d;
            b->cap = cap;
        }
        memcpy(b->data + b->len, upload_data, n);
        b->len += n;
        return MHD_YES;
    }
    return route(h, c, url, method, b);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c, (void)toe;
    body *b = *con_cls;
    if (b) {
        free(b->data);
        free(b);
        *con_cls = NULL;
    }
}

int ks_http_start(ks_outbox *ob, const ks_cfg_outbox *cfg, ks_http **out, char *err,
                  size_t errlen)
{
    *out = NULL;
    ks_http *h = calloc(1, sizeof *h);
    if (!h)
        return KS_ERR_NOMEM;
    h->ob = ob;
    h->cfg = cfg;
    int rc = ks_httpd_start("outbox HTTP endpoint", cfg->listen, &cfg->limits, on_request, h,
                            on_completed, h, &h->server, err, errlen);
    if (rc) {
        free(h);
        return rc;
    }
    ks_info("outbox-http",
            "outbox '%s' accepting events on http://%s/outbox/%s/events (at most %lld "
            "connections, idle timeout %lld ms, deadline %lld ms)",
            cfg->name, cfg->listen, cfg->name, (long long)cfg->limits.max_connections,
            (long long)cfg->limits.idle_timeout_ms,
            (long long)cfg->limits.connection_deadline_ms);
    *out = h;
    return 0;
}

void ks_http_stop(ks_http *h)
{
    if (!h)
        return;
    ks_httpd_stop(h->server);
    free(h);
}
