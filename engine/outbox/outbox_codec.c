/*
 * outbox_codec.c - the encoding of one outbox row (native byte order: the
 * environment is local to one host): ks_outbox_row_hdr (outbox.h), then
 * user, topic, key, payload, last_error, result back to back, lengths in
 * the header (key_len UINT32_MAX: no key).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/outbox_internal.h"

/* ------------------------------------------------------------------ */
/* Encoding                                                            */
/* ------------------------------------------------------------------ */

void *ks_outbox_row_encode(const ks_outbox_event *ev, size_t *len)
{
    row_hdr h;
    memset(&h, 0, sizeof h);
    h.version = ROW_VERSION;
    h.status = (uint8_t)ev->status;
    h.attempts = ev->attempts;
    h.partition = ev->partition;
    h.user_len = (uint32_t)slen(ev->user);
    h.topic_len = (uint32_t)slen(ev->topic);
    h.key_len = ev->key ? (uint32_t)strlen(ev->key) : NO_KEY;
    h.error_len = (uint32_t)slen(ev->last_error);
    h.result_len = (uint32_t)slen(ev->result);
    h.payload_len = ev->payload_len;
    h.offset = ev->offset;
    h.created_ms = ev->created_ms;
    h.updated_ms = ev->updated_ms;
    h.claimed_ms = ev->claimed_ms;
    size_t keylen = ev->key ? h.key_len : 0;
    *len = sizeof h + h.user_len + h.topic_len + keylen + ev->payload_len + h.error_len +
           h.result_len;
    char *buf = malloc(*len), *p = buf;
    if (!buf)
        return NULL;
    memcpy(p, &h, sizeof h);
    p += sizeof h;
    memcpy(p, ev->user, h.user_len), p += h.user_len;
    memcpy(p, ev->topic, h.topic_len), p += h.topic_len;
    if (keylen)
        memcpy(p, ev->key, keylen), p += keylen;
    if (ev->payload_len)
        memcpy(p, ev->payload, ev->payload_len), p += ev->payload_len;
    if (h.error_len)
        memcpy(p, ev->last_error, h.error_len), p += h.error_len;
    if (h.result_len)
        memcpy(p, ev->result, h.result_len);
    return buf;
}

/* A NUL-terminated copy of n bytes at *p (advanced); n was checked
 * against the bytes left and is below SIZE_MAX. */
static char *take_str(const char **p, size_t n)
{
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, *p, n);
        s[n] = '\0';
    }
    *p += n;
    return s;
}

/* Take `want` bytes of the `*left` that remain, for field `what`: every
 * length of a stored row is checked here, one at a time, by subtraction,
 * so no sum of hostile lengths can wrap. 0, or -1 with err set. */
static int take_len(const char *id, const char *what, uint64_t want, size_t *left, char *err,
                    size_t errlen)
{
    if (want > *left) {
        snprintf(err, errlen,
                 "outbox event %.64s: unreadable row: %s of %llu bytes, but only %zu bytes "
                 "left",
                 id, what, (unsigned long long)want, *left);
        return -1;
    }
    *left -= (size_t)want;
    return 0;
}

/* The text fields are C strings once decoded: a NUL byte inside one would
 * cut it short (a user id read as another user's). The lengths were
 * checked; `p` is the first field. 1 with err set, or 0. */
static int text_with_nul(const char *id, const char *p, const row_hdr *h, char *err,
                         size_t errlen)
{
    size_t keylen = h->key_len == NO_KEY ? 0 : h->key_len;
    const struct {
        const char *what;
        size_t off, len;
    } text[] = {
        {"user", 0, h->user_len},
        {"topic", h->user_len, h->topic_len},
        {"key", (size_t)h->user_len + h->topic_len, keylen},
        {"last_error", (size_t)h->user_len + h->topic_len + keylen + h->payload_len,
         h->error_len},
        {"result",
         (size_t)h->user_len + h->topic_len + keylen + h->payload_len + h->error_len,
         h->result_len},
    };
    for (size_t i = 0; i < sizeof text / sizeof text[0]; i++) {
        if (memchr(p + text[i].off, '\0', text[i].len)) {
            snprintf(err, errlen, "outbox event %.64s: unreadable row: %s holds a NUL byte",
                     id, text[i].what);
            return 1;
        }
    }
    return 0;
}

int ks_outbox_row_decode(const char *id, const void *data, size_t len, ks_outbox_event *ev,
                         char *err, size_t errlen)
{
    row_hdr h;
    memset(ev, 0, sizeof *ev);
    if (!id)
        id = "?";
    if (!data || len < sizeof h) {
        snprintf(err, errlen, "outbox event %.64s: unreadable row: %zu bytes, shorter than "
                              "its %zu-byte header",
                 id, len, sizeof h);
        return KS_ERR_INVALID;
    }
    memcpy(&h, data, sizeof h);
    if (h.version != ROW_VERSION || h.status >= KS_OUTBOX_STATUS_COUNT) {
        snprintf(err, errlen, "outbox event %.64s: unreadable row: version %u, status %u",
                 id, (unsigned)h.version, (unsigned)h.status);
        return KS_ERR_INVALID;
    }
    size_t left = len - sizeof h;
    size_t keylen = h.key_len == NO_KEY ? 0 : h.key_len;
    if (take_len(id, "user", h.user_len, &left, err, errlen) ||
        take_len(id, "topic", h.topic_len, &left, err, errlen) ||
        take_len(id, "key", keylen, &left, err, errlen) ||
        take_len(id, "payload", h.payload_len, &left, err, errlen) ||
        take_len(id, "last_error", h.error_len, &left, err, errlen) ||
        take_len(id, "result", h.result_len, &left, err, errlen))
        return KS_ERR_INVALID;
    if (left) {
        snprintf(err, errlen, "outbox event %.64s: unreadable row: %zu bytes after its last "
                              "field",
                 id, left);
        return KS_ERR_INVALID;
    }
    const char *p = (const char *)data + sizeof h;
    if (text_with_nul(id, p, &h, err, errlen))
        return KS_ERR_INVALID;
    snprintf(ev->id, sizeof ev->id, "%s", id);
    ev->status = (ks_outbox_status)h.status;
    ev->attempts = h.attempts;
    ev->partition = h.partition;
    ev->offset = h.offset;
    ev->created_ms = h.created_ms;
    ev->updated_ms = h.updated_ms;
    ev->claimed_ms = h.claimed_ms;
    ev->user = take_str(&p, h.user_len);
    ev->topic = take_str(&p, h.topic_len);
    if (h.key_len != NO_KEY)
        ev->key = take_str(&p, keylen);
    ev->payload_len = (size_t)h.payload_len;
    ev->payload = take_str(&p, (size_t)h.payload_len); /* NUL-terminated for JSON */
    if (h.error_len)
        ev->last_error = take_str(&p, h.error_len);
    if (h.result_len)
        ev->result = take_str(&p, h.result_len);
    if (!ev->user || !ev->topic || !ev->payload || (h.key_len != NO_KEY && !ev->key) ||
        (h.error_len && !ev->last_error) || (h.result_len && !ev->result)) {
        ks_outbox_event_clear(ev);
        snprintf(err, errlen, "outbox event %.64s: out of memory", id);
        return KS_ERR_NOMEM;
    }
    return 0;
}
