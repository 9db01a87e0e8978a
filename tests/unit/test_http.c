/*
 * test_http.c - the outbox's and the metrics' HTTP servers in-process, on
 * a loopback port, spoken to in raw HTTP over sockets: the token and the
 * announced length are refused before any body byte, every request gets a
 * status line, the connection limit and the total deadline hold; plus the
 * helpers (constant-time compare, UTF-8 cleaning, label escaping, exact
 * loopback parsing) and their configuration.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "outbox/ingest.h"
#include "http/httpd.h"
#include "http/metrics.h"
#include "outbox/outbox.h"
#include "unit/test_util.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A loopback port nobody listens on right now. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_FATAL(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    CU_ASSERT_FATAL(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
    close(fd);
    return ntohs(sa.sin_port);
}

static int connect_to(int port, int timeout_ms)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    CU_ASSERT_FATAL(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    CU_ASSERT_FATAL(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    return fd;
}

/* Read until the server closes or the receive timeout passes. */
static size_t read_all(int fd, char *buf, size_t cap)
{
    size_t got = 0;
    while (got + 1 < cap) {
        ssize_t n = recv(fd, buf + got, cap - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    return got;
}

/* Send `req` as is (headers only, when the test says so) on a new
 * connection and return what comes back within timeout_ms. */
static size_t exchange(int port, const char *req, char *resp, size_t cap, int timeout_ms)
{
    int fd = connect_to(port, timeout_ms);
    CU_ASSERT(send(fd, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req));
    size_t n = read_all(fd, resp, cap);
    close(fd);
    return n;
}

/* ------------------------------------------------------------------ */

static char tmp[64];
static ks_outbox *ob;
static ks_http *server;
static ks_cfg_outbox cfg;
static char listen_at[64];
static int port;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void start_outbox(const char *token, int64_t max_conn, int64_t deadline_ms)
{
    char dir[128], err[512] = "";
    snprintf(tmp, sizeof tmp, "/tmp/ks-http-test-XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmp));
    snprintf(dir, sizeof dir, "%s/outbox", tmp);
    CU_ASSERT_EQUAL_FATAL(ks_outbox_open(dir, 16u << 20, &ob, err, sizeof err), 0);
    port = free_port();
    snprintf(listen_at, sizeof listen_at, "127.0.0.1:%d", port);
    cfg = (ks_cfg_outbox){.name = "commands", .topic = "mailbox", .listen = listen_at,
                          .token = (char *)token, .max_event_bytes = 1024,
                          .limits = {max_conn, 10000, deadline_ms}};
    int rc = ks_http_start(ob, &cfg, &server, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
}

static void stop_outbox(void)
{
    ks_http_stop(server);
    ks_outbox_close(ob);
    nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    server = NULL;
    ob = NULL;
}

#define STATUS_IS(resp, code) (strncmp((resp), "HTTP/1.1 " code, 12) == 0)

/* The 60 MB POSTs without a token: refused with the headers, no
 * body sent at all. Before: the server waited for the body (all of it was
 * read and buffered, then 401), so this got no answer within 2 s. */
static void test_token_and_length_first(void)
{
    start_outbox("s3cret", 8, 30000);
    char resp[4096];
    int64_t t0 = now_ms();
    exchange(port,
             "POST /outbox/commands/events HTTP/1.1\r\nHost: x\r\n"
             "Content-Type: application/json\r\nContent-Length: 60000000\r\n\r\n",
             resp, sizeof resp, 2000);
    CU_ASSERT(STATUS_IS(resp, "401"));
    CU_ASSERT(now_ms() - t0 < 1500);

    /* a wrong token of the right length, and a prefix of it */
    exchange(port,
             "POST /outbox/commands/events HTTP/1.1\r\nHost: x\r\n"
             "Authorization: Bearer s3creT\r\nContent-Length: 60000000\r\n\r\n",
             resp, sizeof resp, 2000);
    CU_ASSERT(STATUS_IS(resp, "401"));
    exchange(port,
             "GET /outbox/events/0123 HTTP/1.1\r\nHost: x\r\n"
             "Authorization: Bearer s3c\r\nConnection: close\r\n\r\n",
             resp, sizeof resp, 2000);
    CU_ASSERT(STATUS_IS(resp, "401"));

    /* the right token, a length over max_event_bytes (1024): 413 at once */
    t0 = now_ms();
    exchange(port,
             "POST /outbox/commands/events HTTP/1.1\r\nHost: x\r\n"
             "Authorization: Bearer s3cret\r\nContent-Length: 60000000\r\n\r\n",
             resp, sizeof resp, 2000);
    CU_ASSERT(STATUS_IS(resp, "413"));
    CU_ASSERT_PTR_NOT_NULL(strstr(resp, "max_event_bytes (1024 bytes)"));
    CU_ASSERT(now_ms() - t0 < 1500);
    exchange(port,
             "POST /outbox/commands/events HTTP/1.1\r\nHost: x\r\n"
             "Authorization: Bearer s3cret\r\nContent-Length: 99999999999999999999999\r\n\r\n",
             resp, sizeof resp, 2000);
    CU_ASSERT(resp[0] == '\0' || STATUS_IS(resp, "413") || STATUS_IS(resp, "400"));

    /* a chunked body over the limit: read, not kept, 413 at its end */
    char big[4096];
    int n = snprintf(big, sizeof big,
                     "POST /outbox/commands/events HTTP/1.1\r\nHost: x\r\n"
                     "Authorization: Bearer s3cret\r\nTransfer-Encoding: chunked\r\n"
                     "Connection: close\r\n\r\n800\r\n");
    memset(big + n, 'x', 0x800);
    snprintf(big + n + 0x800, sizeof big - (size_t)n - 0x800, "\r\n0\r\n\r\n");
    exchange(port, big, resp, sizeof resp, 2000);
    CU_ASSERT(STATUS_IS(resp, "413"));

    /* and the right request still works */
    exchange(port,
             "POST /outbox/commands/events HTTP/1.1\r\nHost: x\r\n"
             "Authorization: Bearer s3cret\r\nContent-Length: 31\r\nConnection: close\r\n\r\n"
             "{\"user\":\"u1\",\"payload\":{\"a\":1}}",
             resp, sizeof resp, 2000);
    CU_ASSERT(STATUS_IS(resp, "201"));
    const char *id = strstr(resp, "{\"id\":\"");
    CU_ASSERT_PTR_NOT_NULL_FATAL(id);
    char get[256];
    snprintf(get, sizeof get,
             "GET /outbox/events/%.32s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret\r\n"
             "Connection: close\r\n\r\n",
             id + 7);
    exchange(port, get, resp, sizeof resp, 2000);
    CU_ASSERT(STATUS_IS(resp, "200"));
    CU_ASSERT_PTR_NOT_NULL(strstr(resp, "\"status\":\"PENDING\""));
    stop_outbox();
}

/* `curl -XPOST 127.0.0.1:PORT/outbox/%C3/events -d '{}'` got no answer
 * at all: the error text echoed a cut UTF-8 sequence, json_pack refused
 * it and the handler returned MHD_NO. Every one of these needs a status
 * line and a JSON body. */
static void test_every_request_answered(void)
{
    start_outbox(NULL, 8, 30000);
    static const char *paths[] = {
        "/outbox/%C3/events",        "/outbox/%FF/events", "/outbox/%C3%28/events",
        "/outbox/%ED%A0%80/events", "/outbox/a%01b/events", "/%FF",
        "/outbox/events/%FF%FE",    "/outbox/%F0%9F%98/events",
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        char req[512], resp[4096];
        snprintf(req, sizeof req,
                 "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                 "Connection: close\r\n\r\n{}",
                 paths[i]);
        exchange(port, req, resp, sizeof resp, 2000);
        if (!STATUS_IS(resp, "404") && !STATUS_IS(resp, "405"))
            fprintf(stderr, "\n%s: got '%.60s'\n", paths[i], resp);
        CU_ASSERT(STATUS_IS(resp, "404") || STATUS_IS(resp, "405"));
        CU_ASSERT_PTR_NOT_NULL(strstr(resp, "{\"error\":"));
    }
    /* the byte shows in the message, escaped */
    char resp[4096];
    exchange(port,
             "POST /outbox/%C3/events HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
             "Connection: close\r\n\r\n{}",
             resp, sizeof resp, 2000);
    CU_ASSERT_PTR_NOT_NULL(strstr(resp, "unknown outbox '\\\\xC3'"));
    /* a long multi-byte name cut at 100 bytes in the middle of a sequence */
    char req[1024] = "POST /outbox/";
    for (int i = 0; i < 67; i++)
        strcat(req, "%E2%82%AC"); /* 3 bytes each: byte 100 is inside one */
    strcat(req, "/events HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}");
    exchange(port, req, resp, sizeof resp, 2000);
    CU_ASSERT(STATUS_IS(resp, "404"));
    stop_outbox();
}

/* Count this process's open descriptors. */
static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* 500 connections trickling a byte every 5 s all stayed open (the idle
 * timeout counts silence only) and each held a descriptor: now at most
 * max_connections are accepted, and each is closed at its deadline. */
static void test_connection_limit_and_deadline(void)
{
    start_outbox(NULL, 3, 1000);
    usleep(100 * 1000);
    int base = open_fds();
    enum { N = 12 };
    int fds[N];
    for (int i = 0; i < N; i++) {
        fds[i] = connect_to(port, 300);
        CU_ASSERT(send(fds[i], "P", 1, MSG_NOSIGNAL) == 1);
    }
    usleep(300 * 1000);
    /* ours: N client sockets; the server's: one per accepted connection */
    int server_side = open_fds() - base - N;
    CU_ASSERT(server_side <= 3);
    if (server_side > 3)
        fprintf(stderr, "\nserver holds %d connections (limit 3)\n", server_side);

    /* trickle a byte every 200 ms on each: never idle, yet every one is
     * answered or closed by the deadlines (the waiting ones are accepted
     * as the first are closed, and get theirs in turn) */
    static const char req[] = "OST /outbox/commands/events HTTP/1.1\r\nHost: x\r\n";
    int closed[N] = {0}, left = N;
    size_t sent[N] = {0};
    int64_t t0 = now_ms(), first_close = 0;
    while (left > 0 && now_ms() - t0 < 12000) {
        for (int i = 0; i < N; i++) {
            if (closed[i])
                continue;
            if (sent[i] < sizeof req - 1)
                send(fds[i], req + sent[i]++, 1, MSG_NOSIGNAL);
            char buf[256];
            ssize_t r = recv(fds[i], buf, sizeof buf, MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
                closed[i] = 1;
                left--;
                if (!first_close)
                    first_close = now_ms() - t0;
            }
        }
        usleep(200 * 1000);
    }
    CU_ASSERT_EQUAL(left, 0);
    CU_ASSERT(first_close >= 700 && first_close <= 2500);
    /* 12 connections, 3 at a time, 1 s each: about 4 s, never all at once */
    CU_ASSERT(now_ms() - t0 >= 3000);
    for (int i = 0; i < N; i++)
        close(fds[i]);

    /* a polite client is served once the slots are free */
    char resp[4096];
    exchange(port, "GET /outbox/events/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
             resp, sizeof resp, 3000);
    CU_ASSERT(STATUS_IS(resp, "404"));
    stop_outbox();
}

/* ------------------------------------------------------------------ */

static void test_token_equal(void)
{
    CU_ASSERT_TRUE(ks_http_token_equal("s3cret", "s3cret"));
    CU_ASSERT_FALSE(ks_http_token_equal("s3cre", "s3cret"));
    CU_ASSERT_FALSE(ks_http_token_equal("s3crett", "s3cret"));
    CU_ASSERT_FALSE(ks_http_token_equal("S3cret", "s3cret"));
    CU_ASSERT_FALSE(ks_http_token_equal("", "s3cret"));
    CU_ASSERT_FALSE(ks_http_token_equal(NULL, "s3cret"));
    CU_ASSERT_FALSE(ks_http_token_equal("s3cret", NULL));
    CU_ASSERT_TRUE(ks_http_token_equal("", ""));
}

static void test_clean_text(void)
{
    char out[64];
    ks_http_clean_text("plain \xc3\xa9t\xc3\xa9 \xe2\x82\xac", out, sizeof out);
    CU_ASSERT_STRING_EQUAL(out, "plain \xc3\xa9t\xc3\xa9 \xe2\x82\xac");
    ks_http_clean_text("a\xc3", out, sizeof out);
    CU_ASSERT_STRING_EQUAL(out, "a\\xC3");
    ks_http_clean_text("\xff\xfe", out, sizeof out);
    CU_ASSERT_STRING_EQUAL(out, "\\xFF\\xFE");
    ks_http_clean_text("\xed\xa0\x80", out, sizeof out); /* a surrogate */
    CU_ASSERT_STRING_EQUAL(out, "\\xED\\xA0\\x80");
    ks_http_clean_text("\xc0\xaf", out, sizeof out); /* an overlong '/' */
    CU_ASSERT_STRING_EQUAL(out, "\\xC0\\xAF");
    ks_http_clean_text("line\nbreak\x01", out, sizeof out);
    CU_ASSERT_STRING_EQUAL(out, "line\\x0Abreak\\x01");
    ks_http_clean_text("\xe2\x82\xac\xe2\x82\xac", out, 5); /* room for one euro only */
    CU_ASSERT_STRING_EQUAL(out, "\xe2\x82\xac");
    ks_http_clean_text("\xff", out, 4); /* no room for a whole escape */
    CU_ASSERT_STRING_EQUAL(out, "");
}

/* ------------------------------------------------------------------ */

static void test_metrics_token_and_labels(void)
{
    ks_metrics *m = ks_metrics_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    ks_metrics_plugin_info(m, "evil", "1.0\"} 1\nkstreams_fake 2", "a\\b");
    char *text = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(ks_metrics_render(m, &text, &len), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(
        text, "kstreams_plugin_info{plugin=\"evil\",version=\"1.0\\\"} 1\\nkstreams_fake 2\","
              "build_id=\"a\\\\b\"} 1\n"));
    CU_ASSERT_PTR_NULL(strstr(text, "\nkstreams_fake"));
    free(text);

    char esc[8];
    CU_ASSERT_EQUAL(ks_metrics_escape_label("ab\"", esc, 4), 2); /* no half escape */
    CU_ASSERT_STRING_EQUAL(esc, "ab");

    int p = free_port();
    char at[64], err[256] = "";
    snprintf(at, sizeof at, "localhost:%d", p);
    ks_cfg_http_limits lim = {4, 10000, 10000};
    CU_ASSERT_EQUAL_FATAL(ks_metrics_serve(m, at, "tok", &lim, err, sizeof err), 0);
    char resp[8192];
    exchange(p, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp,
             sizeof resp, 2000);
    CU_ASSERT(STATUS_IS(resp, "401"));
    CU_ASSERT_PTR_NULL(strstr(resp, "kstreams_plugin_info"));
    exchange(p,
             "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\n"
             "Connection: close\r\n\r\n",
             resp, sizeof resp, 2000);
    CU_ASSERT(STATUS_IS(resp, "200"));
    CU_ASSERT_PTR_NOT_NULL(strstr(resp, "kstreams_plugin_info{plugin=\"evil\""));
    exchange(p,
             "GET /other HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\n"
             "Connection: close\r\n\r\n",
             resp, sizeof resp, 2000);
    CU_ASSERT(STATUS_IS(resp, "404"));
    ks_metrics_free(m);
}

/* The metrics server has the same deadline: a trickling client is cut. */
static void test_metrics_deadline(void)
{
    ks_metrics *m = ks_metrics_new();
    int p = free_port();
    char at[64], err[256] = "";
    snprintf(at, sizeof at, "127.0.0.1:%d", p);
    ks_cfg_http_limits lim = {2, 10000, 500};
    CU_ASSERT_EQUAL_FATAL(ks_metrics_serve(m, at, NULL, &lim, err, sizeof err), 0);
    int fd = connect_to(p, 200);
    int64_t t0 = now_ms();
    static const char slow[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaa";
    int cut = 0;
    for (size_t i = 0; i < sizeof slow - 1 && !cut; i++) {
        send(fd, slow + i, 1, MSG_NOSIGNAL);
        char buf[64];
        ssize_t r = recv(fd, buf, sizeof buf, 0); /* 200 ms timeout */
        cut = r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    }
    CU_ASSERT_TRUE(cut);
    CU_ASSERT(now_ms() - t0 < 2000);
    close(fd);
    ks_metrics_free(m);
}

/* ------------------------------------------------------------------ */

static void test_listen_parsing(void)
{
    unsigned char a[4];
    uint16_t p;
    CU_ASSERT_EQUAL(ks_parse_listen("127.0.0.1:8470", a, &p), 0);
    CU_ASSERT(a[0] == 127 && a[3] == 1 && p == 8470);
    CU_ASSERT_EQUAL(ks_parse_listen("localhost:1", a, &p), 0);
    CU_ASSERT(a[0] == 127 && p == 1);
    CU_ASSERT_EQUAL(ks_parse_listen("0.0.0.0:65535", a, &p), 0);
    CU_ASSERT_EQUAL(ks_parse_listen("127.0.0.1.example.com:8470", a, &p), -1);
    CU_ASSERT_EQUAL(ks_parse_listen("127.1:8470", a, &p), -1);
    CU_ASSERT_EQUAL(ks_parse_listen("127.0.0.1:0", a, &p), -1);
    CU_ASSERT_EQUAL(ks_parse_listen("127.0.0.1:65536", a, &p), -1);
    CU_ASSERT_EQUAL(ks_parse_listen("127.0.0.1:80x", a, &p), -1);
    CU_ASSERT_EQUAL(ks_parse_listen("127.0.0.1", a, &p), -1);
    CU_ASSERT_EQUAL(ks_parse_listen("localhost.evil:80", a, &p), -1);
    CU_ASSERT_EQUAL(ks_parse_listen("[::1]:80", a, &p), -1);
    CU_ASSERT_TRUE(ks_listen_is_loopback("127.0.0.1:8470"));
    CU_ASSERT_TRUE(ks_listen_is_loopback("127.255.0.9:8470"));
    CU_ASSERT_TRUE(ks_listen_is_loopback("localhost:8470"));
    CU_ASSERT_FALSE(ks_listen_is_loopback("127.0.0.1.example.com:8470"));
    CU_ASSERT_FALSE(ks_listen_is_loopback("0.0.0.0:8470"));
    CU_ASSERT_FALSE(ks_listen_is_loopback("128.0.0.1:8470"));
}

#define BASE                                                                                  \
    "application: t\nkafka: { bootstrap: [127.0.0.1:9092] }\n"                                \
    "sources: { in: { topic: i } }\nsinks: [ { from: in, topic: o } ]\n"

static void expect_config(const char *text, const char *want)
{
    char err[1024] = "";
    ks_pipeline *p = NULL;
    int rc = ks_pipeline_parse("mem.yaml", text, strlen(text), &p, err, sizeof err);
    CU_ASSERT_EQUAL(rc, -1);
    CU_ASSERT_STRING_EQUAL(err, want);
    if (strcmp(err, want) != 0)
        fprintf(stderr, "\n  want: %s\n  got:  %s\n", want, err);
    ks_pipeline_free(p);
}

static void test_config(void)
{
    /* a prefix match took this for loopback: check passed, run failed */
    expect_config(BASE "outbox: { name: c, topic: m, listen: 127.0.0.1.example.com:8470 }\n",
                  "mem.yaml:5:38: invalid address '127.0.0.1.example.com:8470' for 'listen'; "
                  "expected an IPv4 address or localhost, and a port (e.g. 127.0.0.1:9400)");
    expect_config(BASE "outbox: { name: c, topic: m, listen: 127.0.0.1.example.com:8470, "
                       "token: t }\n",
                  "mem.yaml:5:38: invalid address '127.0.0.1.example.com:8470' for 'listen'; "
                  "expected an IPv4 address or localhost, and a port (e.g. 127.0.0.1:9400)");
    /* metrics off loopback need a token, as the outbox does */
    expect_config(BASE "metrics: 0.0.0.0:9400\n",
                  "mem.yaml:5:10: metrics listen on '0.0.0.0:9400', which is not a loopback "
                  "address: write metrics: { listen: 0.0.0.0:9400, token: ... } (scrapers "
                  "then send Authorization: Bearer <token>)");
    expect_config(BASE "metrics: { listen: 0.0.0.0:9400 }\n",
                  "mem.yaml:5:20: metrics listen on '0.0.0.0:9400', which is not a loopback "
                  "address: write metrics: { listen: 0.0.0.0:9400, token: ... } (scrapers "
                  "then send Authorization: Bearer <token>)");
    expect_config(BASE "metrics: { token: x }\n",
                  "mem.yaml:5:10: metrics is missing required key 'listen'");
    expect_config(BASE "metrics: { listen: 127.0.0.1:9400, max_connections: 0 }\n",
                  "mem.yaml:5:53: 'max_connections' must be between 1 and 1000, found '0'");
    expect_config(BASE "outbox: { name: c, topic: m, idle_timeout: 500ms }\n",
                  "mem.yaml:5:44: 'idle_timeout' must be between 1s and 1h, found '500ms'");
    expect_config(BASE "outbox: { name: c, topic: m, connection_deadline: 2d }\n",
                  "mem.yaml:5:51: 'connection_deadline' must be between 100ms and 1d, found "
                  "'2d'");

    char err[1024] = "";
    ks_pipeline *p = NULL;
    const char *ok = BASE "metrics: { listen: 0.0.0.0:9400, token: s, max_connections: 4, "
                          "idle_timeout: 2s, connection_deadline: 5s }\n"
                          "outbox: { name: c, topic: m, max_connections: 100, "
                          "connection_deadline: 1m }\n";
    CU_ASSERT_EQUAL_FATAL(ks_pipeline_parse("mem.yaml", ok, strlen(ok), &p, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(p->metrics_listen, "0.0.0.0:9400");
    CU_ASSERT_STRING_EQUAL(p->metrics_token, "s");
    CU_ASSERT_EQUAL(p->metrics_limits.max_connections, 4);
    CU_ASSERT_EQUAL(p->metrics_limits.idle_timeout_ms, 2000);
    CU_ASSERT_EQUAL(p->metrics_limits.connection_deadline_ms, 5000);
    CU_ASSERT_EQUAL(p->outbox->limits.max_connections, 100);
    CU_ASSERT_EQUAL(p->outbox->limits.idle_timeout_ms, 10000); /* default */
    CU_ASSERT_EQUAL(p->outbox->limits.connection_deadline_ms, 60000);
    ks_pipeline_free(p);
    const char *plain = BASE "metrics: localhost:9400\noutbox: { name: c, topic: m }\n";
    CU_ASSERT_EQUAL_FATAL(
        ks_pipeline_parse("mem.yaml", plain, strlen(plain), &p, err, sizeof err), 0);
    CU_ASSERT_PTR_NULL(p->metrics_token);
    CU_ASSERT_EQUAL(p->metrics_limits.max_connections, 16);
    CU_ASSERT_EQUAL(p->metrics_limits.connection_deadline_ms, 10000);
    CU_ASSERT_EQUAL(p->outbox->limits.max_connections, 64);
    CU_ASSERT_EQUAL(p->outbox->limits.connection_deadline_ms, 30000);
    ks_pipeline_free(p);
}

void ks_test_register_http(void)
{
    CU_pSuite s = CU_add_suite("http", NULL, NULL);
    if (!s)
        return;
    CU_add_test(s, "token and Content-Length refused before the body", test_token_and_length_first);
    CU_add_test(s, "every request gets a status line (%C3, %FF)", test_every_request_answered);
    CU_add_test(s, "connection limit and total deadline", test_connection_limit_and_deadline);
    CU_add_test(s, "constant-time token compare", test_token_equal);
    CU_add_test(s, "error texts cleaned to UTF-8", test_clean_text);
    CU_add_test(s, "metrics: token, escaped labels", test_metrics_token_and_labels);
    CU_add_test(s, "metrics: total deadline", test_metrics_deadline);
    CU_add_test(s, "listen addresses parsed exactly", test_listen_parsing);
    CU_add_test(s, "configuration of tokens and limits", test_config);
}
