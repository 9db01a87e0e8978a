/*
 * log.c - line-oriented logging to stderr. The level and the format are the
 * only process-wide settings of the engine: they are set once at start-up
 * and read by every thread.
 */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int log_level = -1; /* -1: not yet read from the environment */
static int log_json = -1;

static const char *const level_names[] = {"ERROR", "WARN", "INFO", "DEBUG"};

int ks_log_level_parse(const char *text)
{
    for (int i = 0; i < 4; i++)
        if (text && strcasecmp(text, level_names[i]) == 0)
            return i;
    return -1;
}

void ks_log_set_level(ks_log_level level) { log_level = (int)level; }
void ks_log_set_json(int on) { log_json = on ? 1 : 0; }

ks_log_level ks_log_get_level(void)
{
    if (log_level < 0) {
        int l = ks_log_level_parse(getenv("KS_LOG_LEVEL"));
        log_level = l < 0 ? KS_LOG_INFO : l;
    }
    return (ks_log_level)log_level;
}

static int json_enabled(void)
{
    if (log_json < 0) {
        const char *j = getenv("KS_LOG_JSON");
        log_json = j && *j && strcmp(j, "0") != 0;
    }
    return log_json;
}

/* Append `s` to buf as a JSON string body (without quotes). */
static size_t json_escape(char *buf, size_t cap, size_t at, const char *s)
{
    for (; *s && at + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            buf[at++] = '\\';
            buf[at++] = (char)c;
        } else if (c < 0x20) {
            at += (size_t)snprintf(buf + at, cap - at, "\\u%04x", c);
        } else {
            buf[at++] = (char)c;
        }
    }
    return at;
}

void ks_log(ks_log_level level, const char *where, const char *fmt, ...)
{
    if ((int)level > (int)ks_log_get_level())
        return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);

    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char ts[40];
    size_t n = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + n, sizeof ts - n, ".%03dZ", (int)(tv.tv_usec / 1000));

    char line[4096];
    size_t at;
    if (json_enabled()) {
        at = (size_t)snprintf(line, sizeof line,
                              "{\"ts\":\"%s\",\"level\":\"%s\",\"where\":\"", ts,
                              level_names[level]);
        at = json_escape(line, sizeof line, at, where ? where : "");
        at += (size_t)snprintf(line + at, sizeof line - at, "\",\"msg\":\"");
        at = json_escape(line, sizeof line, at, msg);
        at += (size_t)snprintf(line + at, sizeof line - at, "\"}\n");
    } else {
        at = (size_t)snprintf(line, sizeof line, "%s %-5s [%s] %s\n", ts,
                              level_names[level], where ? where : "kstreams", msg);
    }
    if (at >= sizeof line) {
        at = sizeof line - 1;
        line[at - 1] = '\n';
    }
    ssize_t rc = write(STDERR_FILENO, line, at);
    (void)rc;
}

void ks_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}
