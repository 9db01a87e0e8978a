/*
 * query_remote.c - see query_remote.h.
 */
#include "cli/query_remote.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_get.h"

#define TIMEOUT_MS 15000
#define MAX_REDIRECTS 3

/* Append "&name=" and `v` (n bytes) percent-encoded, or hex-encoded. */
static void append(char *buf, size_t len, size_t *o, const char *name, const unsigned char *v,
                   size_t n, int hex)
{
    static const char digits[] = "0123456789abcdef";
    *o += (size_t)snprintf(buf + *o, len - *o, "%s%s=", buf[*o - 1] == '?' ? "" : "&", name);
    for (size_t i = 0; i < n && *o + 4 < len; i++) {
        unsigned char c = v[i];
        if (!hex && ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                     c == '-' || c == '_' || c == '.' || c == '~')) {
            buf[(*o)++] = (char)c;
            continue;
        }
        if (!hex)
            buf[(*o)++] = '%';
        buf[(*o)++] = digits[c >> 4];
        buf[(*o)++] = digits[c & 15];
    }
    buf[*o] = '\0';
}

/* The path of the query for `partition` (-1: the key's). */
static void query_path(const ks_query *q, int32_t partition, int standby, char *buf, size_t len)
{
    size_t o = (size_t)snprintf(buf, len, "/v1/query?");
    append(buf, len, &o, "store", (const unsigned char *)q->store, strlen(q->store), 0);
    if (q->key)
        append(buf, len, &o, "key_hex", q->key->data, q->key->len, 1);
    if (q->kfrom && q->kfrom->set)
        append(buf, len, &o, "from_key_hex", q->kfrom->data, q->kfrom->len, 1);
    if (q->kto && q->kto->set)
        append(buf, len, &o, "to_key_hex", q->kto->data, q->kto->len, 1);
    char t[32];
    if (q->kind != KS_WIN_NONE && q->tfrom != INT64_MIN) {
        snprintf(t, sizeof t, "%" PRId64, q->tfrom);
        append(buf, len, &o, "from", (const unsigned char *)t, strlen(t), 0);
    }
    if (q->kind != KS_WIN_NONE && q->tto != INT64_MAX) {
        snprintf(t, sizeof t, "%" PRId64, q->tto);
        append(buf, len, &o, "to", (const unsigned char *)t, strlen(t), 0);
    }
    if (partition >= 0)
        o += (size_t)snprintf(buf + o, len - o, "&partition=%d", (int)partition);
    if (q->int64)
        o += (size_t)snprintf(buf + o, len - o, "&int64=1");
    if (q->hex)
        o += (size_t)snprintf(buf + o, len - o, "&hex=1");
    if (standby)
        snprintf(buf + o, len - o, "&standby=1");
}

/* A stale answer (`--standby`) says so on err: what answered, how far. */
static void note_stale(const ks_http_reply *r, const char *what, FILE *err)
{
    if (!r->stale)
        return;
    fprintf(err, "kstreams query: %s: stale, from a %s copy", what,
            strcmp(r->stale, "restoring") == 0 ? "restoring" : r->stale);
    if (r->changelog_offset)
        fprintf(err, " at changelog offset %s", r->changelog_offset);
    if (r->lag)
        fprintf(err, ", about %s records behind", r->lag);
    fputc('\n', err);
}

/* GET url+path, following up to MAX_REDIRECTS 307s. 0 with *reply (any
 * status but a redirect), or -1 with the reason on err. */
static int get(const char *url, const char *path, const char *token, ks_http_reply *reply,
               FILE *err)
{
    char msg[512], base[512], next[8192];
    snprintf(base, sizeof base, "%s", url);
    snprintf(next, sizeof next, "%s", path);
    for (int hop = 0;; hop++) {
        if (ks_http_get(base, next, token, TIMEOUT_MS, reply, msg, sizeof msg) != 0) {
            fprintf(err, "kstreams query: %s\n", msg);
            return -1;
        }
        if (reply->status != 307)
            return 0;
        /* Location: http://HOST:PORT/v1/query?... */
        const char *loc = reply->location ? reply->location : "";
        const char *slash = strncmp(loc, "http://", 7) == 0 ? strchr(loc + 7, '/') : NULL;
        if (!slash || hop == MAX_REDIRECTS) {
            fprintf(err, "kstreams query: %s: %s\n", base,
                    slash ? "redirected too often (the group is rebalancing?)"
                          : "a redirect without a usable Location");
            ks_http_reply_free(reply);
            return -1;
        }
        snprintf(base, sizeof base, "%.*s", (int)(slash - loc), loc);
        snprintf(next, sizeof next, "%s", slash);
        ks_http_reply_free(reply);
    }
}

/* An answer that is not 200: its message, and the exit code. */
static ks_exit refused(const ks_http_reply *r, FILE *err)
{
    json_t *doc = json_loads(r->body, 0, NULL);
    const char *msg = json_string_value(json_object_get(doc, "error"));
    if (r->status == 503 && json_object_get(doc, "restore"))
        fprintf(err, "kstreams query: %s", r->body); /* the progress, as JSON */
    else
        fprintf(err, "kstreams query: HTTP %d: %s\n", r->status, msg ? msg : r->body);
    json_decref(doc);
    return r->status == 404 ? KS_EXIT_NOT_FOUND
           : r->status == 400 ? KS_EXIT_USAGE
                              : KS_EXIT_FAILURE;
}

/* The partition count, from GET /v1/tasks. -1 after a message. */
static int partitions_of(const char *url, const char *token, FILE *err)
{
    ks_http_reply r;
    if (get(url, "/v1/tasks", token, &r, err) != 0)
        return -1;
    int n = -1;
    if (r.status != 200) {
        refused(&r, err);
    } else {
        json_t *doc = json_loads(r.body, 0, NULL);
        n = (int)json_integer_value(json_object_get(doc, "partitions"));
        json_decref(doc);
        if (n <= 0) {
            fprintf(err, "kstreams query: %s/v1/tasks: no partition count in the answer\n", url);
            n = -1;
        }
    }
    ks_http_reply_free(&r);
    return n;
}

ks_exit ks_query_remote(const char *url, const char *token, const ks_query *q, long partition,
                        int standby, FILE *out, FILE *err)
{
    char path[8192];
    ks_http_reply r;
    if (q->key) {
        query_path(q, -1, standby, path, sizeof path);
        if (get(url, path, token, &r, err) != 0)
            return KS_EXIT_FAILURE;
        note_stale(&r, "the key", err);
        ks_exit rc = r.status == 200 ? KS_EXIT_OK : refused(&r, err);
        if (rc == KS_EXIT_OK)
            fputs(r.body, out);
        ks_http_reply_free(&r);
        return rc;
    }
    int n = partition >= 0 ? 1 : partitions_of(url, token, err);
    if (n < 0)
        return KS_EXIT_FAILURE;
    json_t *all = json_array();
    ks_exit rc = all ? KS_EXIT_OK : KS_EXIT_FAILURE;
    for (int i = 0; i < n && rc == KS_EXIT_OK; i++) {
        int32_t part = partition >= 0 ? (int32_t)partition : i;
        char what[32];
        snprintf(what, sizeof what, "partition %d", (int)part);
        query_path(q, part, standby, path, sizeof path);
        if (get(url, path, token, &r, err) != 0)
            rc = KS_EXIT_FAILURE;
        else if (note_stale(&r, what, err), r.status != 200)
            rc = refused(&r, err);
        else {
            json_t *part = json_loads(r.body, 0, NULL);
            if (!json_is_array(part) || json_array_extend(all, part) != 0) {
                fprintf(err, "kstreams query: partition %d: not a JSON array\n", i);
                rc = KS_EXIT_FAILURE;
            }
            json_decref(part);
        }
        ks_http_reply_free(&r);
    }
    char *s = rc == KS_EXIT_OK ? json_dumps(all, JSON_COMPACT) : NULL;
    if (s)
        fprintf(out, "%s\n", s);
    else if (rc == KS_EXIT_OK)
        rc = KS_EXIT_FAILURE;
    free(s);
    json_decref(all);
    return rc;
}
