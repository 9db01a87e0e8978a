/*
 * http_get.c - see http_get.h.
 */
#include "http/http_get.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define REPLY_MAX (64u << 20) /* a store's partition as JSON; more is refused */

/* "http://HOST:PORT..." into host and port. 0 or -1. */
static int split_url(const char *url, char *host, size_t hlen, char *port, size_t plen)
{
    if (strncmp(url, "http://", 7) != 0)
        return -1;
    const char *h = url + 7, *end = h + strcspn(h, "/?#");
    const char *colon = memchr(h, ':', (size_t)(end - h));
    if (!colon || colon == h || (size_t)(colon - h) >= hlen || (size_t)(end - colon - 1) >= plen ||
        end == colon + 1)
        return -1;
    memcpy(host, h, (size_t)(colon - h));
    host[colon - h] = '\0';
    memcpy(port, colon + 1, (size_t)(end - colon - 1));
    port[end - colon - 1] = '\0';
    return 0;
}

static int connect_to(const char *host, const char *port, int timeout_ms)
{
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &res) != 0)
        return -1;
    int fd = -1;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0)
            continue;
        struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    return fd;
}

/* When the header line [line, eol) is `name` (with its colon; the first
 * such line only): its value into *out. 0, or -1 out of memory. */
static int header(const char *line, const char *eol, const char *name, char **out)
{
    size_t n = strlen(name);
    if (*out || (size_t)(eol - line) < n || strncasecmp(line, name, n) != 0)
        return 0;
    const char *v = line + n;
    while (v < eol && (*v == ' ' || *v == '\t'))
        v++;
    *out = strndup(v, (size_t)(eol - v));
    return *out ? 0 : -1;
}

int ks_http_parse_reply(const char *data, size_t len, ks_http_reply *reply)
{
    memset(reply, 0, sizeof *reply);
    const char *end = NULL;
    for (size_t i = 0; i + 3 < len; i++)
        if (memcmp(data + i, "\r\n\r\n", 4) == 0) {
            end = data + i;
            break;
        }
    int status = 0;
    if (!end || len < 12 || memcmp(data, "HTTP/1.", 7) != 0 || data[8] != ' ')
        return -1;
    for (int i = 9; i < 12; i++) {
        if (data[i] < '0' || data[i] > '9')
            return -1;
        status = status * 10 + (data[i] - '0');
    }
    reply->status = status;
    const char *line = memchr(data, '\n', (size_t)(end - data));
    while (line && line < end) {
        line++;
        const char *eol = memchr(line, '\r', (size_t)(end - line + 1));
        if (!eol)
            break;
        if (header(line, eol, "Location:", &reply->location) != 0 ||
            header(line, eol, "X-Kstreams-Stale:", &reply->stale) != 0 ||
            header(line, eol, "X-Kstreams-Changelog-Offset:", &reply->changelog_offset) != 0 ||
            header(line, eol, "X-Kstreams-Lag:", &reply->lag) != 0) {
            ks_http_reply_free(reply);
            return -1;
        }
        line = eol + 1;
    }
    const char *body = end + 4;
    reply->len = len - (size_t)(body - data);
    if (!(reply->body = malloc(reply->len + 1))) {
        ks_http_reply_free(reply);
        return -1;
    }
    memcpy(reply->body, body, reply->len);
    reply->body[reply->len] = '\0';
    return 0;
}

/* Read the whole answer from fd into *buf. 0 or -1. */
static int read_all(int fd, char **buf, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    while (b) {
        if (n == cap) {
            char *grown = cap < REPLY_MAX ? realloc(b, cap * 2) : NULL;
            if (!grown)
                break;
            b = grown;
            cap *= 2;
        }
        ssize_t got = read(fd, b + n, cap - n);
        if (got < 0)
            break;
        if (got == 0) {
            *buf = b;
            *len = n;
            return 0;
        }
        n += (size_t)got;
    }
    free(b);
    return -1;
}

int ks_http_get(const char *url, const char *path, const char *token, int timeout_ms,
                ks_http_reply *reply, char *err, size_t errlen)
{
    memset(reply, 0, sizeof *reply);
    char host[256], port[16];
    if (split_url(url, host, sizeof host, port, sizeof port) != 0) {
        snprintf(err, errlen, "'%s' is not http://HOST:PORT", url);
        return -1;
    }
    int fd = connect_to(host, port, timeout_ms);
    if (fd < 0) {
        snprintf(err, errlen, "cannot connect to %s:%s", host, port);
        return -1;
    }
    char *req = NULL;
    int n = asprintf(&req, "GET %s HTTP/1.0\r\nHost: %s:%s\r\n%s%s%sConnection: close\r\n\r\n",
                     path, host, port, token ? "Authorization: Bearer " : "", token ? token : "",
                     token ? "\r\n" : "");
    char *data = NULL;
    size_t len = 0;
    int rc = n < 0 || write(fd, req, (size_t)n) != n || read_all(fd, &data, &len) != 0 ? -1 : 0;
    close(fd);
    if (n >= 0)
        free(req);
    if (rc != 0) {
        snprintf(err, errlen, "%s:%s: no answer (timeout %d ms, or the connection broke)", host,
                 port, timeout_ms);
    } else if (ks_http_parse_reply(data, len, reply) != 0) {
        snprintf(err, errlen, "%s:%s: malformed HTTP answer", host, port);
        rc = -1;
    }
    free(data);
    return rc;
}

void ks_http_reply_free(ks_http_reply *reply)
{
    free(reply->location);
    free(reply->stale);
    free(reply->changelog_offset);
    free(reply->lag);
    free(reply->body);
    memset(reply, 0, sizeof *reply);
}
