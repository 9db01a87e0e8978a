/*
 * fuzz_http.c - the engine's HTTP servers (engine/http/httpd.c, shared by
 * the outbox's ingest server and the metrics server) in-process, spoken to
 * in raw bytes: each input's first byte picks a server (the outbox without
 * a token, the outbox with one, the metrics endpoint), the rest is sent as
 * is on a new loopback connection, then the write side is shut down (an
 * input without a complete header block is reset instead, see below). The
 * server must answer with an HTTP/1.x status line or close the connection
 * within the limits (idle 1 s, deadline 1 s, 64 connections, plus a wait
 * for a slot); it never crashes or leaks.
 *
 * The three servers start once (LLVMFuzzerInitialize) on ephemeral
 * loopback ports, with an outbox store in a fresh temporary directory.
 * libmicrohttpd's threads run the engine code: the coverage they reach is
 * counted as any other.
 *
 * Each input is also given, in-process, to the two parsers of remote
 * queries (docs/scaling.md): as the parameters of GET /v1/query
 * (name=value pairs split at '&', as libmicrohttpd hands them to the query
 * server: ks_query_request_parse) and as an HTTP answer read by `kstreams
 * query --remote` (ks_http_parse_reply).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "http/http_get.h"
#include "http/metrics.h"
#include "outbox/ingest.h"
#include "outbox/outbox.h"
#include "query/query_request.h"

#define NSERVERS 3
#define ANSWER_WAIT_MS 10000 /* idle + deadline + a wait for a slot: past it, a hang */

static int ports[NSERVERS];
static char listens[NSERVERS][64];
static ks_cfg_outbox cfgs[2];
static ks_outbox *ob;
static ks_http *servers[2];
static ks_metrics *metrics;

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        perror("fuzz_http: a free port");
        abort();
    }
    close(fd);
    return ntohs(sa.sin_port);
}

static char tmp[] = "/tmp/ks-fuzz-http-XXXXXX";

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* The outbox's directory goes at exit (the servers keep running until
 * then; Linux keeps a removed map readable). */
static void remove_tmp(void)
{
    nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    char dir[128], err[512] = "";
    if (!mkdtemp(tmp)) {
        perror("fuzz_http: mkdtemp");
        abort();
    }
    atexit(remove_tmp);
    snprintf(dir, sizeof dir, "%s/outbox", tmp);
    if (ks_outbox_open(dir, 256u << 20, &ob, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_http: %s\n", err);
        abort();
    }
    for (int i = 0; i < NSERVERS; i++) {
        ports[i] = free_port();
        snprintf(listens[i], sizeof listens[i], "127.0.0.1:%d", ports[i]);
    }
    ks_cfg_http_limits lim = {64, 1000, 1000};
    cfgs[0] = (ks_cfg_outbox){.name = "commands", .topic = "mailbox", .listen = listens[0],
                              .token = NULL, .max_event_bytes = 4096, .limits = lim};
    cfgs[1] = (ks_cfg_outbox){.name = "orders", .topic = "orders", .listen = listens[1],
                              .token = "s3cret", .max_event_bytes = 512, .limits = lim};
    for (int i = 0; i < 2; i++)
        if (ks_http_start(ob, &cfgs[i], &servers[i], err, sizeof err) != 0) {
            fprintf(stderr, "fuzz_http: %s\n", err);
            abort();
        }
    metrics = ks_metrics_new();
    ks_metrics_set(metrics, "kstreams_fuzz", "a=\"b\"", 1);
    if (!metrics || ks_metrics_serve(metrics, listens[2], NULL, &lim, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_http: %s\n", err);
        abort();
    }
    /* the servers live as long as the process: libFuzzer exits without a
     * hook, so their memory is reachable then, never leaked */
    return 0;
}

/* libFuzzer's timers interrupt system calls (EINTR): each is retried. */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait up to `ms` for fd to have `events`: 1, or 0. */
static int ready(int fd, short events, int ms)
{
    int64_t until = now_ms() + ms;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int64_t left = until - now_ms();
        int n = poll(&p, 1, left > 0 ? (int)left : 0);
        if (n >= 0 || errno != EINTR)
            return n == 1;
    }
}

static int readable(int fd, int ms)
{
    return ready(fd, POLLIN, ms);
}

static int connect_to(int fd, const struct sockaddr_in *sa)
{
    if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) == 0)
        return 0;
    if (errno != EINTR) /* the connect goes on: wait for it */
        return -1;
    int e = 0;
    socklen_t elen = sizeof e;
    if (!ready(fd, POLLOUT, ANSWER_WAIT_MS) ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &elen) != 0 || e != 0)
        return -1;
    return 0;
}

/* The input as query parameters and as an HTTP answer (see the top). */
static void parse_offline(const uint8_t *data, size_t len)
{
    ks_http_reply reply;
    if (ks_http_parse_reply((const char *)data, len, &reply) == 0)
        ks_http_reply_free(&reply);
    char *copy = malloc(len + 1);
    if (!copy)
        return;
    memcpy(copy, data, len);
    copy[len] = '\0';
    const char *names[KS_QUERY_REQUEST_MAX_PARAMS], *values[KS_QUERY_REQUEST_MAX_PARAMS];
    size_t n = 0;
    for (char *p = copy, *next; p && n < KS_QUERY_REQUEST_MAX_PARAMS; p = next) {
        next = strchr(p, '&');
        if (next)
            *next++ = '\0';
        char *eq = strchr(p, '=');
        if (eq)
            *eq++ = '\0';
        names[n] = p;
        values[n++] = eq; /* NULL: "?flag" without a value */
    }
    ks_query_request r;
    char err[1024];
    ks_query_request_parse(&r, names, values, n, err, sizeof err);
    ks_query_request_free(&r);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    parse_offline(data, len);
    if (len < 1)
        return 0;
    int which = data[0] % NSERVERS;
    data++, len--;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)ports[which]),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect_to(fd, &sa) != 0) {
        perror("fuzz_http: connect");
        abort();
    }
    /* the server may answer (and close) before it has read everything */
    size_t sent = 0;
    while (sent < len) {
        ssize_t n = send(fd, data + sent, len - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        sent += (size_t)n;
    }
    /* A request with its header block complete gets 20 ms to be answered
     * before the end of the stream (libmicrohttpd drops a request whose
     * client half-closes first), then a half-close, and must be answered
     * or closed. Any other input gets 2 ms for an early answer (a bad
     * request line), then a reset: with epoll, libmicrohttpd 0.9.75 misses
     * an end of stream that arrives with the last bytes it reads and holds
     * such a connection until the idle timeout, which a reset never
     * leaves it to. */
    int complete = memmem(data, len, "\r\n\r\n", 4) || memmem(data, len, "\n\n", 2);
    if (!readable(fd, complete ? 20 : 2) && !complete) {
        struct linger lg = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        close(fd);
        return 0;
    }
    shutdown(fd, SHUT_WR);

    char head[16];
    size_t got = 0;
    char sink[4096];
    int closed = 0;
    while (readable(fd, ANSWER_WAIT_MS)) {
        ssize_t n = recv(fd, sink, sizeof sink, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) { /* an end of stream or a reset: the server closed */
            closed = 1;
            break;
        }
        for (ssize_t i = 0; i < n && got < sizeof head; i++)
            head[got++] = sink[i];
    }
    close(fd);
    if (!closed) {
        fprintf(stderr, "fuzz_http: server %d neither answered nor closed within %d ms "
                        "(%zu bytes of an answer)\n", which, ANSWER_WAIT_MS, got);
        abort();
    }
    if (got > 0 && (got < 12 || memcmp(head, "HTTP/1.", 7) != 0 || head[8] != ' ' ||
                    head[9] < '1' || head[9] > '5')) {
        fprintf(stderr, "fuzz_http: server %d answered without a status line: \"%.*s\"\n",
                which, (int)got, head);
        abort();
    }
    return 0;
}
