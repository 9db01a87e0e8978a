/*
 * http_get.h - the client side of the query server (`kstreams query
 * --remote`): one GET over HTTP/1.0 to http://HOST:PORT, the answer read
 * to the end (the server closes). No TLS, no chunked bodies (libmicrohttpd
 * sends an HTTP/1.0 client a plain body).
 */
#ifndef KS_HTTP_GET_H
#define KS_HTTP_GET_H

#include <stddef.h>

typedef struct ks_http_reply {
    int status;     /* e.g. 200, 307 */
    char *location; /* the Location header, or NULL (owned) */
    /* a stale answer's marks (docs/scaling.md "Standby reads"), or NULL
     * (owned): X-Kstreams-Stale, -Changelog-Offset, -Lag */
    char *stale, *changelog_offset, *lag;
    char *body;     /* NUL-terminated (owned) */
    size_t len;
} ks_http_reply;

/*
 * GET `path` (starting with '/', already percent-encoded) from `url`
 * ("http://HOST:PORT", anything after the port ignored), with
 * "Authorization: Bearer <token>" when token is not NULL, giving up after
 * timeout_ms of silence. 0 with *reply (free with ks_http_reply_free), or
 * -1 with err ("cannot connect to ...", "malformed answer ...").
 */
int ks_http_get(const char *url, const char *path, const char *token, int timeout_ms,
                ks_http_reply *reply, char *err, size_t errlen);

/* Parse a whole HTTP answer (status line, headers, body) of len bytes into
 * *reply: 0, or -1 when it is not one. For ks_http_get and the fuzz
 * harness. */
int ks_http_parse_reply(const char *data, size_t len, ks_http_reply *reply);

void ks_http_reply_free(ks_http_reply *reply);

#endif /* KS_HTTP_GET_H */
