/*
 * query_request.c - see query_request.h.
 */
#include "query/query_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/query_time.h"

int ks_query_bytes_text(ks_query_bytes *b, const char *s)
{
    free(b->data);
    b->len = strlen(s);
    b->data = malloc(b->len ? b->len : 1);
    if (!b->data)
        return -1;
    memcpy(b->data, s, b->len);
    b->set = 1;
    return 0;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

int ks_query_bytes_hex(ks_query_bytes *b, const char *s)
{
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        s += 2;
    size_t n = strlen(s);
    if (n % 2)
        return -1;
    free(b->data);
    b->data = malloc(n / 2 ? n / 2 : 1);
    if (!b->data)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(b->data);
            b->data = NULL;
            b->len = 0;
            return -1;
        }
        b->data[i] = (unsigned char)(hi << 4 | lo);
    }
    b->len = n / 2;
    b->set = 1;
    return 0;
}

enum { P_STORE, P_KEY, P_KEY_HEX, P_FROM_KEY, P_FROM_KEY_HEX, P_TO_KEY, P_TO_KEY_HEX,
       P_FROM, P_TO, P_PARTITION, P_INT64, P_HEX, P_STANDBY, P_N };
static const char *const PARAMS[P_N] = {"store",    "key",         "key_hex", "from_key",
                                        "from_key_hex", "to_key",  "to_key_hex", "from",
                                        "to",       "partition",   "int64",   "hex",
                                        "standby"};

/* A flag's value: "0" or "1". */
static int flag(const char *v, int *out)
{
    if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
        return -1;
    *out = v[0] == '1';
    return 0;
}

/* One key parameter (text or hex) into b; 0 or -1. */
static int key_param(ks_query_bytes *b, int hex, const char *v)
{
    int rc = hex ? ks_query_bytes_hex(b, v) : ks_query_bytes_text(b, v);
    return rc != 0 || b->len > KS_KEY_MAX ? -1 : 0;
}

/* Set parameter `i` from value v; 0 or -1 with err. */
static int set_param(ks_query_request *r, int i, const char *v, char *err, size_t errlen)
{
    char *end;
    long part;
    int rc = 0;
    switch (i) {
    case P_STORE:
        r->store = v;
        rc = *v ? 0 : -1;
        break;
    case P_KEY:
    case P_KEY_HEX:
        rc = key_param(&r->key, i == P_KEY_HEX, v) || r->key.len == 0 ? -1 : 0;
        break;
    case P_FROM_KEY:
    case P_FROM_KEY_HEX:
        rc = key_param(&r->kfrom, i == P_FROM_KEY_HEX, v);
        break;
    case P_TO_KEY:
    case P_TO_KEY_HEX:
        rc = key_param(&r->kto, i == P_TO_KEY_HEX, v);
        break;
    case P_FROM:
        r->from = v;
        rc = ks_query_parse_time(v, &r->tfrom);
        break;
    case P_TO:
        r->to = v;
        rc = ks_query_parse_time(v, &r->tto);
        break;
    case P_PARTITION:
        part = strtol(v, &end, 10);
        rc = *v < '0' || *v > '9' || *end || part > INT32_MAX ? -1 : 0;
        r->partition = (int32_t)part;
        break;
    case P_INT64:
        rc = flag(v, &r->int64);
        break;
    case P_HEX:
        rc = flag(v, &r->hex);
        break;
    case P_STANDBY:
        rc = flag(v, &r->standby);
        break;
    }
    if (rc != 0)
        snprintf(err, errlen, "bad value for '%s'%s", PARAMS[i],
                 i == P_STORE       ? ": a store name"
                 : i <= P_TO_KEY_HEX ? ": keys have 1..500 bytes, *_hex ones an even number of "
                                      "hex digits"
                 : i <= P_TO       ? ": epoch milliseconds or ISO-8601 (2026-03-02T10:15:00Z)"
                 : i == P_PARTITION ? ": a number >= 0"
                                    : ": 0 or 1");
    return rc;
}

int ks_query_request_parse(ks_query_request *r, const char *const *names,
                           const char *const *values, size_t n, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    r->partition = -1;
    r->tfrom = INT64_MIN;
    r->tto = INT64_MAX;
    unsigned seen = 0;
    for (size_t k = 0; k < n; k++) {
        int i = 0;
        while (i < P_N && strcmp(names[k], PARAMS[i]) != 0)
            i++;
        if (i == P_N) {
            char clean[80];
            snprintf(clean, sizeof clean, "%.60s", names[k]);
            for (char *c = clean; *c; c++)
                if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
                    *c = '?';
            snprintf(err, errlen, "unknown parameter '%s'; known: store, key, key_hex, "
                                  "from_key, to_key, from, to, partition, int64, hex, standby",
                     clean);
            return -1;
        }
        if (seen & 1u << i) {
            snprintf(err, errlen, "parameter '%s' given twice", PARAMS[i]);
            return -1;
        }
        seen |= 1u << i;
        if (!values[k] || set_param(r, i, values[k], err, errlen) != 0) {
            if (!values[k])
                snprintf(err, errlen, "parameter '%s' needs a value", PARAMS[i]);
            return -1;
        }
    }
    if (!r->store) {
        snprintf(err, errlen, "give the store: /v1/query?store=NAME&key=KEY");
        return -1;
    }
    if ((seen & 1u << P_KEY && seen & 1u << P_KEY_HEX) ||
        (seen & 1u << P_FROM_KEY && seen & 1u << P_FROM_KEY_HEX) ||
        (seen & 1u << P_TO_KEY && seen & 1u << P_TO_KEY_HEX)) {
        snprintf(err, errlen, "give each key once, as text or as hex");
        return -1;
    }
    if (r->key.set && (r->kfrom.set || r->kto.set)) {
        snprintf(err, errlen, "key and a key range (from_key, to_key) exclude each other");
        return -1;
    }
    if (r->tfrom > r->tto) {
        snprintf(err, errlen, "from is after to");
        return -1;
    }
    if (!r->key.set && r->partition < 0) {
        snprintf(err, errlen, "a key range or a whole store is read one partition at a time: "
                              "add partition=P (GET /v1/tasks lists them)");
        return -1;
    }
    return 0;
}

void ks_query_request_free(ks_query_request *r)
{
    free(r->key.data);
    free(r->kfrom.data);
    free(r->kto.data);
    memset(r, 0, sizeof *r);
}
