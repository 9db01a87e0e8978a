/*
 * config_values.c - the small parsers of config values that other parts
 * use too (config.h: durations, sizes, serde names, listen addresses), and
 * the rules for names (sources, nodes, stores, topics, host:port, plugin
 * references) that the section parsers apply.
 */
#include "config/config.h"

#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"

/* ------------------------------------------------------------------ */
/* Small parsers (public)                                              */
/* ------------------------------------------------------------------ */

/* Leading decimal digits of s into *v; returns the count of digits, or -1
 * on overflow. */
static int parse_digits(const char *s, uint64_t *v)
{
    uint64_t x = 0;
    int n = 0;
    while (s[n] >= '0' && s[n] <= '9') {
        unsigned d = (unsigned)(s[n] - '0');
        if (x > (UINT64_MAX - d) / 10)
            return -1;
        x = x * 10 + d;
        n++;
    }
    *v = x;
    return n;
}

/* A unit suffix and what it multiplies by. */
typedef struct unit {
    const char *suffix;
    uint64_t mult;
} unit;

/* Digits followed by exactly one of the n suffixes of `units` ("" allowed
 * when listed), the product at most `max`. 0 with *out, or -1. */
static int parse_with_unit(const char *text, const unit *units, size_t n, uint64_t max,
                           uint64_t *out)
{
    uint64_t v;
    int digits = parse_digits(text, &v);
    if (digits <= 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(text + digits, units[i].suffix) != 0)
            continue;
        if (v > max / units[i].mult)
            return -1;
        *out = v * units[i].mult;
        return 0;
    }
    return -1;
}

int ks_parse_duration_ms(const char *text, int64_t *ms)
{
    static const unit units[] = {{"", 1},          {"ms", 1},          {"s", 1000},
                                 {"m", 60 * 1000}, {"h", 3600 * 1000}, {"d", 86400 * 1000}};
    uint64_t v;
    if (!text || !ms ||
        parse_with_unit(text, units, sizeof units / sizeof units[0], INT64_MAX, &v) != 0)
        return -1;
    *ms = (int64_t)v;
    return 0;
}

int ks_parse_size(const char *text, uint64_t *bytes)
{
    static const unit units[] = {{"", 1},
                                 {"B", 1},
                                 {"KiB", UINT64_C(1) << 10},
                                 {"MiB", UINT64_C(1) << 20},
                                 {"GiB", UINT64_C(1) << 30},
                                 {"TiB", UINT64_C(1) << 40}};
    if (!text || !bytes)
        return -1;
    return parse_with_unit(text, units, sizeof units / sizeof units[0], UINT64_MAX, bytes);
}

const char *ks_serde_name(ks_serde s)
{
    switch (s) {
    case KS_SERDE_BYTES:
        return "bytes";
    case KS_SERDE_STRING:
        return "string";
    case KS_SERDE_JSON:
        return "json";
    case KS_SERDE_INT64:
        return "int64";
    }
    return "unknown";
}

int ks_parse_listen(const char *text, unsigned char addr[4], uint16_t *port)
{
    if (!text)
        return -1;
    const char *colon = strrchr(text, ':');
    uint64_t p;
    int n;
    if (!colon || colon == text || (size_t)(colon - text) > 63)
        return -1;
    n = parse_digits(colon + 1, &p);
    if (n <= 0 || n > 5 || colon[1 + n] != '\0' || p < 1 || p > 65535)
        return -1;
    char host[64];
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    struct in_addr in;
    if (strcmp(host, "localhost") == 0)
        in.s_addr = htonl(INADDR_LOOPBACK);
    else if (inet_pton(AF_INET, host, &in) != 1)
        return -1;
    memcpy(addr, &in.s_addr, 4);
    *port = (uint16_t)p;
    return 0;
}

int ks_listen_is_loopback(const char *text)
{
    unsigned char a[4];
    uint16_t port;
    return ks_parse_listen(text, a, &port) == 0 && a[0] == 127;
}

/* ------------------------------------------------------------------ */
/* Names                                                               */
/* ------------------------------------------------------------------ */

static int all_of(const char *s, size_t len, const char *extra, int lower_only)
{
    if (len == 0)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                 (!lower_only && ch >= 'A' && ch <= 'Z') ||
                 (ch && strchr(extra, ch));
        if (!ok)
            return 0;
    }
    return 1;
}

/* Names of sources, nodes, sinks, stores: [A-Za-z0-9_-]+ */
int ks_cfg_is_name(const char *s) { return all_of(s, strlen(s), "_-", 0); }

/* application: [A-Za-z0-9._-]+ */
int ks_cfg_is_app(const char *s) { return all_of(s, strlen(s), "._-", 0); }

/* Kafka topic: [A-Za-z0-9._-]{1,249}, not "." or ".." */
int ks_cfg_is_topic(const char *s)
{
    size_t n = strlen(s);
    return n <= 249 && all_of(s, n, "._-", 0) && strcmp(s, ".") != 0 &&
           strcmp(s, "..") != 0;
}

/* host:port, host non-empty ("[v6]" allowed), port 1..65535 */
int ks_cfg_is_host_port(const char *s)
{
    const char *colon = strrchr(s, ':');
    uint64_t port;
    int n;

    if (!colon || colon == s)
        return 0;
    n = parse_digits(colon + 1, &port);
    if (n <= 0 || colon[1 + n] != '\0' || port < 1 || port > 65535)
        return 0;
    for (const char *h = s; h < colon; h++)
        if (*h == ' ' || *h == '\t' || *h == ',' || *h == '/')
            return 0;
    if (s[0] == '[' && colon[-1] != ']')
        return 0;
    if (s[0] != '[' && memchr(s, ':', (size_t)(colon - s)))
        return 0; /* a bare IPv6 address needs brackets */
    return 1;
}

/* Split "plugin<sep>rest" at the first '.' (or ':' when colon_ok) into
 * freshly allocated parts; a text without separator gives plugin = rest =
 * text when single_ok. Returns 0, -1 malformed, -2 out of memory. */
int ks_cfg_split_ref(const char *text, int colon_ok, int single_ok,
                     char **plugin, char **rest)
{
    size_t len = strlen(text);
    size_t sep = strcspn(text, colon_ok ? ".:" : ".");
    size_t rlen;

    *plugin = *rest = NULL;
    if (sep == len) {
        if (!single_ok || !all_of(text, len, "_", 1))
            return -1;
        *plugin = strdup(text);
        *rest = strdup(text);
    } else {
        rlen = len - sep - 1;
        if (!all_of(text, sep, "_", 1) ||
            !all_of(text + sep + 1, rlen, "_-", 0))
            return -1;
        *plugin = strndup(text, sep);
        *rest = strndup(text + sep + 1, rlen);
    }
    if (!*plugin || !*rest) {
        free(*plugin);
        free(*rest);
        *plugin = *rest = NULL;
        return -2;
    }
    return 0;
}
