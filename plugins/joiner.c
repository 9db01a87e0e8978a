/*
 * joiner.c - the joiners of the shipped `join` plugin (joiner.h): `pair`
 * writes {"left": ..., "right": ...}, `merge` the left object's members and
 * then the right one's the left lacks, or a KS_FN_JOINER function.
 */
#include "joiner.h"

#include <stdlib.h>
#include <string.h>

int ks_join_config_choice(const ks_host_api *host, ks_ctx *ctx, const char *key,
                          const char *const *choices)
{
    const char *v = NULL;
    if (host->config_string(ctx, key, &v) != 0 || !v)
        return 0;
    for (int i = 0; choices[i]; i++)
        if (strcmp(v, choices[i]) == 0)
            return i;
    host->log(ctx, KS_LOG_ERROR, "join: node '%s': %s '%s' is not one of %s, %s%s%s",
              host->node_name(ctx), key, v, choices[0], choices[1], choices[2] ? ", " : "",
              choices[2] ? choices[2] : "");
    return -1;
}

ks_verdict ks_joiner_init(ks_joiner *j, const ks_host_api *host, ks_ctx *ctx)
{
    static const char *const joiners[] = {"pair", "merge", NULL};
    memset(j, 0, sizeof *j);
    j->host = host;
    int merge = ks_join_config_choice(host, ctx, "joiner", joiners);
    if (merge < 0)
        return KS_FATAL;
    j->kind = merge ? KS_JOIN_MERGE : KS_JOIN_PAIR;
    void (*fn)(void) = NULL;
    int rc = host->function(ctx, "joiner", KS_FN_JOINER, &fn);
    if (rc == KS_ERR_NOT_FOUND)
        return KS_OK;
    if (rc != 0)
        return KS_FATAL; /* logged by the host: not a joiner */
    j->fn = (ks_joiner_fn)fn;
    j->kind = KS_JOIN_FUNCTION;
    return (j->out = host->buf_new()) ? KS_OK : KS_FATAL;
}

void ks_joiner_free(ks_joiner *j)
{
    if (j && j->host)
        j->host->buf_free(j->out);
}

/* The decoded name of member key `k` into buf (NUL-terminated); NULL when
 * it does not fit or is not a string. */
static const char *member_name(const ks_host_api *host, const ks_json_span *k, char *buf,
                               size_t cap)
{
    size_t len;
    if (host->json_string(k, buf, cap - 1, &len) != 0 || len >= cap - 1)
        return NULL;
    buf[len] = '\0';
    return buf;
}

static int has_member(const ks_host_api *host, const ks_json_span *obj, const char *name)
{
    ks_json_iter it;
    ks_json_span k, v;
    char buf[512];
    if (host->json_iter_init(&it, obj) != KS_JSON_FOUND)
        return 0;
    while (host->json_iter_next(&it, &k, &v) == 1) {
        const char *n = member_name(host, &k, buf, sizeof buf);
        if (n && strcmp(n, name) == 0)
            return 1;
    }
    return 0;
}

/* Add every member of object `obj` to w, or those `skip` (an object, may
 * be NULL) lacks. 0, or -1 when a text is not a JSON object. */
static int put_members(const ks_host_api *host, ks_json_writer *w, const ks_json_span *obj,
                       const ks_json_span *skip)
{
    ks_json_iter it;
    ks_json_span k, v;
    char buf[512];
    if (obj->type != KS_JSON_OBJECT || host->json_iter_init(&it, obj) != KS_JSON_FOUND)
        return -1;
    int r;
    while ((r = host->json_iter_next(&it, &k, &v)) == 1) {
        const char *n = member_name(host, &k, buf, sizeof buf);
        if (!n)
            return -1; /* a name over 510 bytes: not worth a second path */
        if (skip && has_member(host, skip, n))
            continue;
        if (host->json_put_raw(w, n, &v) != 0)
            return -1;
    }
    return r == 0 ? 0 : -1;
}

/* The whole text as a span (its type read from the text). */
static int whole(const ks_host_api *host, const void *data, size_t len, ks_json_span *out)
{
    return host->json_find(data, len, "", out) == KS_JSON_FOUND ? 0 : -1;
}

/* The built-in joiners: the joined JSON of `left` and `right` (either
 * NULL: none) into *json (owned by the host until the next json_writer
 * call). 0, or -1 when the values are not what the joiner needs. */
static int json_join(const ks_joiner *j, ks_ctx *ctx, const ks_bytes *left,
                     const ks_bytes *right, const void **json, size_t *len)
{
    const ks_host_api *host = j->host;
    ks_json_writer *w = host->json_writer(ctx);
    ks_json_span l, r;
    if (!w || (left && whole(host, left->data, left->len, &l) != 0) ||
        (right && whole(host, right->data, right->len, &r) != 0))
        return -1;
    int rc;
    if (j->kind == KS_JOIN_PAIR) {
        rc = left ? host->json_put_raw(w, "left", &l) : host->json_put_null(w, "left");
        if (rc == 0)
            rc = right ? host->json_put_raw(w, "right", &r) : host->json_put_null(w, "right");
    } else {
        rc = left ? put_members(host, w, &l, NULL) : 0;
        if (rc == 0 && right)
            rc = put_members(host, w, &r, left ? &l : NULL);
    }
    return rc == 0 && host->json_finish(w, json, len) == 0 ? 0 : -1;
}

ks_verdict ks_joiner_emit(ks_joiner *j, ks_ctx *ctx, const ks_record *tmpl,
                          const ks_bytes *left, const ks_bytes *right, int64_t ts)
{
    const ks_host_api *host = j->host;
    ks_record out = *tmpl;
    out.timestamp = ts;
    if (j->kind == KS_JOIN_FUNCTION) {
        host->buf_set(j->out, NULL, 0);
        ks_bytes key = {tmpl->key, tmpl->key_len};
        ks_bytes l = left ? *left : (ks_bytes){NULL, 0};
        ks_verdict v = j->fn(host, key, l, right, j->out);
        if (v != KS_OK)
            return v;
        ks_bytes b = host->buf_get(j->out);
        out.value = b.len ? b.data : NULL; /* left empty: a tombstone */
        out.value_len = b.len;
    } else if (json_join(j, ctx, left, right, &out.value, &out.value_len) != 0) {
        const char *kind = j->kind == KS_JOIN_PAIR ? "pair" : "merge";
        const char *what = j->kind == KS_JOIN_PAIR ? "values" : "objects";
        if (tmpl->offset >= 0)
            host->log(ctx, KS_LOG_WARN,
                      "join: node '%s': the %s joiner needs JSON %s on both sides; record "
                      "at offset %lld is poison",
                      host->node_name(ctx), kind, what, (long long)tmpl->offset);
        else /* not the input record: a buffered one (join_streams.c) */
            host->log(ctx, KS_LOG_WARN,
                      "join: node '%s': the %s joiner needs JSON %s on both sides; the "
                      "result of a buffered record is dropped",
                      host->node_name(ctx), kind, what);
        return KS_SKIP;
    }
    return host->forward(ctx, &out) == 0 ? KS_OK : KS_RETRY;
}
