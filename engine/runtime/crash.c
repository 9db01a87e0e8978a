/*
 * crash.c - see crash.h. Owns the handlers, the crash file path and the
 * per-thread scope pointer.
 */
#include "runtime/crash.h"

#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_FRAMES 64

static _Thread_local const ks_crash_scope *current;
static char crash_path[4096];
static char history_path[4096];
static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
/* The thread that reports (0: none yet). Two workers often fault on the
 * same bad build at once: the second must neither kill the process before
 * the first has written its report nor write over it. */
static long reporting_tid;

void ks_crash_enter(ks_crash_scope *s)
{
    s->outer = current;
    current = s;
}

void ks_crash_leave(const ks_crash_scope *s)
{
    current = s->outer;
}

/* ---- async-signal-safe formatting ----------------------------------------- */

typedef struct out {
    char buf[2048];
    size_t n;
} out;

static void put(out *o, const char *s)
{
    for (; s && *s && o->n < sizeof o->buf - 2; s++)
        o->buf[o->n++] = *s;
}

static void put_int(out *o, int64_t v)
{
    char tmp[24];
    int i = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[i++] = (char)('0' + u % 10);
        u /= 10;
    } while (u && i < (int)sizeof tmp);
    if (v < 0 && o->n < sizeof o->buf - 2)
        o->buf[o->n++] = '-';
    while (i > 0 && o->n < sizeof o->buf - 2)
        o->buf[o->n++] = tmp[--i];
}

/* 2026-01-02T03:04:05Z, from the seconds of the epoch (no locale, no tz). */
static void put_time(out *o)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t secs = ts.tv_sec, days = secs / 86400, rem = secs % 86400;
    /* civil from days (Howard Hinnant's algorithm) */
    int64_t z = days + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = yoe + era * 400, doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153, d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;
    y += m <= 2;
    int64_t parts[] = {y, m, d, rem / 3600, rem / 60 % 60, rem % 60};
    const char *sep[] = {"-", "-", "T", ":", ":", "Z"};
    for (int i = 0; i < 6; i++) {
        if (i && parts[i] < 10)
            put(o, "0");
        put_int(o, parts[i]);
        put(o, sep[i]);
    }
}

static const char *sig_name(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
    default: return "a fatal signal";
    }
}

/* A field of a history line: no tab or newline, which separate them. */
static void put_field(out *o, const char *s)
{
    for (; s && *s && o->n < sizeof o->buf - 2; s++)
        o->buf[o->n++] = (*s == '\t' || *s == '\n' || *s == '\r') ? ' ' : *s;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

/* One line "SECONDS<TAB>PLUGIN<TAB>BUILD" (rollback.h reads them); appended,
 * so the history of earlier runs stays. */
static void append_history(const ks_crash_scope *s)
{
    out h = {.n = 0};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    put_int(&h, ts.tv_sec);
    put(&h, "\t");
    put_field(&h, s->plugin);
    put(&h, "\t");
    put_field(&h, s->build);
    put(&h, "\n");
    int fd = open(history_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    write_all(fd, h.buf, h.n);
    fsync(fd);
    close(fd);
}

/* Die of `sig` with its default action, as without the handler. */
static void die_of(int sig)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    raise(sig); /* delivered when the handler returns (or at once) */
}

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
    (void)si, (void)uc;
    int saved = errno;
    long me = (long)syscall(SYS_gettid), first = 0;
    if (!__atomic_compare_exchange_n(&reporting_tid, &first, me, 0, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST)) {
        if (first == me) { /* a fault inside the report itself */
            die_of(sig);
            return;
        }
        for (;;) /* another thread reports; the process dies with it */
            pause();
    }
    /* the history first: it decides the rollback at the next start */
    if (current && history_path[0])
        append_history(current);
    out o = {.n = 0};
    put_time(&o);
    put(&o, " FATAL [crash] ");
    put(&o, sig_name(sig));
    const ks_crash_scope *s = current;
    if (s) {
        put(&o, " in ");
        put(&o, s->call);
        put(&o, "() of node '");
        put(&o, s->node);
        put(&o, "', plugin ");
        put(&o, s->plugin);
        put(&o, " build ");
        put(&o, s->build);
        put(&o, " (");
        put(&o, s->path);
        put(&o, "), task ");
        put_int(&o, s->task);
        if (s->topic) {
            put(&o, ", record ");
            put(&o, s->topic);
            put(&o, "/");
            put_int(&o, s->partition);
            put(&o, "/");
            put_int(&o, s->offset);
        }
    } else {
        put(&o, " outside plugin code");
    }
    put(&o, "; backtrace follows\n");
    void *frames[MAX_FRAMES];
    int nf = backtrace(frames, MAX_FRAMES);
    write_all(2, o.buf, o.n);
    backtrace_symbols_fd(frames, nf, 2);
    if (crash_path[0]) {
        int fd = open(crash_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) {
            write_all(fd, o.buf, o.n);
            backtrace_symbols_fd(frames, nf, fd);
            fsync(fd);
            close(fd);
        }
    }
    errno = saved;
    die_of(sig);
}

int ks_crash_install(const char *path, const char *history, char *err, size_t errlen)
{
    if ((path && strlen(path) >= sizeof crash_path) ||
        (history && strlen(history) >= sizeof history_path)) {
        snprintf(err, errlen, "%s: crash file path too long", path ? path : history);
        return -1;
    }
    snprintf(crash_path, sizeof crash_path, "%s", path ? path : "");
    snprintf(history_path, sizeof history_path, "%s", history ? history : "");
    void *warm[2];
    backtrace(warm, 2); /* loads the unwinder now: no allocation in the handler */
    static char altstack[64 * 1024]; /* the main thread's; a stack overflow there */
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0};
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++)
        if (sigaction(fatal_signals[i], &sa, NULL) != 0) {
            snprintf(err, errlen, "sigaction: %s", strerror(errno));
            return -1;
        }
    return 0;
}

int ks_crash_take_previous(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    if (!fgets(buf, (int)len, f))
        buf[0] = '\0';
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
    char last[4200];
    snprintf(last, sizeof last, "%s.last", path);
    rename(path, last);
    return 1;
}
