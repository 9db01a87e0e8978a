/*
 * httpd.c - see httpd.h. The deadline watchdog keeps the socket of every
 * open connection (registered and removed by libmicrohttpd's connection
 * notifications) with its start time and shuts down those past the
 * deadline; libmicrohttpd then sees the end of the stream and closes them
 * itself. The registry's mutex is held both while a connection is removed
 * and while a socket is shut down: libmicrohttpd closes a socket only after
 * the removal, so the watchdog never touches a descriptor number that has
 * been closed and reused.
 */
#include "http/httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "kstreams/kstreams.h"
#include "base/log.h"
#include "base/clock.h"

typedef struct conn {
    struct MHD_Connection *c;
    int fd;
    int64_t started_ms;
    int cut;
} conn;

struct ks_httpd {
    struct MHD_Daemon *mhd;
    char what[64];
    int64_t deadline_ms;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t watchdog;
    int watching, stop;
    conn *conns;
    size_t n, cap;
    unsigned long cuts, cuts_logged;
};

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    (void)socket_context;
    ks_httpd *s = cls;
    pthread_mutex_lock(&s->lock);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (s->n == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 16;
            conn *grown = realloc(s->conns, cap * sizeof *grown);
            if (grown) {
                s->conns = grown;
                s->cap = cap;
            }
        }
        /* out of memory: this one connection goes without a deadline; its
         * idle timeout still holds */
        if (ci && s->n < s->cap)
            s->conns[s->n++] = (conn){c, ci->connect_fd, ks_mono_ms(), 0};
    } else {
        for (size_t i = 0; i < s->n; i++)
            if (s->conns[i].c == c) {
                s->conns[i] = s->conns[--s->n];
                break;
            }
    }
    pthread_mutex_unlock(&s->lock);
}

static void *watch(void *arg)
{
    ks_httpd *s = arg;
    int64_t last_log = 0;
    pthread_mutex_lock(&s->lock);
    while (!s->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100 * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->wake, &s->lock, &until);
        int64_t now = ks_mono_ms();
        for (size_t i = 0; i < s->n; i++) {
            conn *k = &s->conns[i];
            if (!k->cut && now - k->started_ms >= s->deadline_ms) {
                shutdown(k->fd, SHUT_RDWR);
                k->cut = 1;
                s->cuts++;
            }
        }
        /* one line per 10 s at most: a flood must not flood the log too */
        if (s->cuts != s->cuts_logged && now - last_log >= 10000) {
            ks_warn("http", "%s: closed %lu connection%s open longer than "
                            "connection_deadline (%lld ms)",
                    s->what, s->cuts - s->cuts_logged, s->cuts - s->cuts_logged == 1 ? "" : "s",
                    (long long)s->deadline_ms);
            s->cuts_logged = s->cuts;
            last_log = now;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int ks_httpd_start(const char *what, const char *listen, const ks_cfg_http_limits *limits,
                   MHD_AccessHandlerCallback handler, void *cls,
                   MHD_RequestCompletedCallback done, void *done_cls, ks_httpd **out,
                   char *err, size_t errlen)
{
    *out = NULL;
    unsigned char addr[4];
    uint16_t port;
    if (ks_parse_listen(listen, addr, &port) != 0) {
        snprintf(err, errlen, "%s '%s': expected IPv4:port or localhost:port", what, listen);
        return KS_ERR_INVALID;
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    memcpy(&sa.sin_addr.s_addr, addr, 4);
    sa.sin_port = htons(port);
    ks_httpd *s = calloc(1, sizeof *s);
    if (!s)
        return KS_ERR_NOMEM;
    snprintf(s->what, sizeof s->what, "%s", what);
    s->deadline_ms = limits->connection_deadline_ms;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    if (pthread_create(&s->watchdog, NULL, watch, s) != 0) {
        snprintf(err, errlen, "%s: cannot start its watchdog thread", what);
        ks_httpd_stop(s);
        return KS_ERR_NOMEM;
    }
    s->watching = 1;
    unsigned idle_s = (unsigned)((limits->idle_timeout_ms + 999) / 1000);
    /* epoll where there is one: select() fails past descriptor 1024, which a
     * busy engine (Kafka, LMDB) may well have passed */
    s->mhd = MHD_start_daemon(
        MHD_USE_AUTO_INTERNAL_THREAD, port, NULL, NULL, handler, cls, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&sa, MHD_OPTION_NOTIFY_COMPLETED, done, done_cls,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)limits->max_connections, MHD_OPTION_CONNECTION_TIMEOUT, idle_s,
        MHD_OPTION_END);
    if (!s->mhd) {
        snprintf(err, errlen, "%s: cannot listen on %s (in use?)", what, listen);
        ks_httpd_stop(s);
        return KS_ERR_IO;
    }
    *out = s;
    return 0;
}

void ks_httpd_stop(ks_httpd *s)
{
    if (!s)
        return;
    if (s->mhd) /* first: its last notifications still use the registry */
        MHD_stop_daemon(s->mhd);
    if (s->watching) {
        pthread_mutex_lock(&s->lock);
        s->stop = 1;
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->watchdog, NULL);
    }
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s->conns);
    free(s);
}

int ks_http_token_equal(const char *given, const char *want)
{
    if (!given || !want)
        return 0;
    size_t gl = strlen(given), wl = strlen(want);
    /* every byte of `want` is visited, whatever matched before */
    volatile unsigned char diff = gl != wl;
    for (size_t i = 0; i < wl; i++)
        diff |= (unsigned char)want[i] ^ (unsigned char)(i < gl ? given[i] : 0);
    return diff == 0;
}

int ks_http_authorized(struct MHD_Connection *c, const char *token)
{
    if (!token)
        return 1;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    return a && strncmp(a, "Bearer ", 7) == 0 && ks_http_token_equal(a + 7, token);
}

/* Length of the well-formed UTF-8 sequence at s (1..4), or 0 (RFC 3629:
 * no overlongs, no surrogates, nothing past U+10FFFF). */
static size_t utf8_seq(const unsigned char *s)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        return (s[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        unsigned char lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
        return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 ? 3 : 0;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        unsigned char lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
        return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 && (s[3] & 0xc0) == 0x80
                   ? 4
                   : 0;
    }
    return 0;
}

void ks_http_clean_text(const char *in, char *out, size_t outlen)
{
    size_t o = 0;
    const unsigned char *s = (const unsigned char *)(in ? in : "");
    while (*s) {
        size_t n = utf8_seq(s); /* stops at the NUL: a continuation test fails on it */
        if (n == 0 || (n == 1 && (*s < 0x20 || *s == 0x7f))) {
            if (o + 4 >= outlen)
                break;
            snprintf(out + o, outlen - o, "\\x%02X", *s);
            o += 4;
            s++;
            continue;
        }
        if (o + n >= outlen)
            break;
        memcpy(out + o, s, n);
        o += n;
        s += n;
    }
    out[o] = '\0';
}

enum MHD_Result ks_http_send(struct MHD_Connection *c, unsigned code, const char *content_type,
                             char *body, size_t len)
{
    return ks_http_send_headers(c, code, content_type, body, len, NULL);
}

enum MHD_Result ks_http_send_headers(struct MHD_Connection *c, unsigned code,
                                     const char *content_type, char *body, size_t len,
                                     const char *const *headers)
{
    static const char fallback[] = "the answer could not be built; see the engine log\n";
    struct MHD_Response *r = NULL;
    if (body && !(r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE)))
        free(body);
    if (!r) { /* a fixed body needs no memory of ours */
        content_type = "text/plain; charset=utf-8";
        r = MHD_create_response_from_buffer(sizeof fallback - 1, (void *)fallback,
                                            MHD_RESPMEM_PERSISTENT);
    }
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    for (size_t i = 0; headers && headers[i] && headers[i + 1]; i += 2)
        MHD_add_response_header(r, headers[i], headers[i + 1]);
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}
