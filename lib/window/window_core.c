/*
 * window_core.c - the part of event-time windows that needs no host: the
 * rules of a `window:` spec, the window arithmetic, the store key format
 * and the windowed-json output key (declared in window.h).
 *
 * It is the one place these rules live. It is compiled into the count,
 * aggregate and reduce modules (plugins/Makefile.am: a module links
 * nothing but itself), and into the engine (engine/Makefile.am), where
 * `kstreams check` (topology.c) validates a node's `window:` with the same
 * ks_win_spec_read() the plugins run at init, and `kstreams query`
 * (cli_query.c) decodes windowed stores with the same key functions. It
 * calls nothing but libc.
 */
#include "window/window_core.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- kinds -------------------------------------------------------------- */

static const char *const KIND_NAMES[] = {"none", "tumbling", "hopping", "sliding",
                                         "session"};

const char *ks_win_kind_name(ks_win_kind kind)
{
    return (unsigned)kind <= KS_WIN_SESSION ? KIND_NAMES[kind] : "?";
}

int ks_win_kind_parse(const char *s, ks_win_kind *kind)
{
    for (int i = KS_WIN_TUMBLING; i <= KS_WIN_SESSION; i++)
        if (strcmp(s, KIND_NAMES[i]) == 0) {
            *kind = (ks_win_kind)i;
            return 0;
        }
    return -1;
}

/* ---- spec --------------------------------------------------------------- */

int64_t ks_win_min_retention(const ks_win_spec *spec)
{
    switch (spec->kind) {
    case KS_WIN_SLIDING: return spec->size + 1 + spec->grace;
    case KS_WIN_SESSION: return spec->gap + spec->grace;
    default: return spec->size + spec->grace;
    }
}

/* err = the sentence, *at = the window key at fault; returns -1. */
static int spec_fail(char *err, size_t errlen, const char **at, const char *key,
                     const char *fmt, ...) KS_PRINTF(5, 6);

static int spec_fail(char *err, size_t errlen, const char **at, const char *key,
                     const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    if (at)
        *at = key;
    return -1;
}

/* ks_win_spec_check, also naming the key at fault (NULL: none). */
static int spec_check(ks_win_spec *spec, char *err, size_t errlen, const char **at)
{
    const char *kind = ks_win_kind_name(spec->kind);
    if (at)
        *at = NULL;
    if (spec->kind == KS_WIN_NONE)
        return spec_fail(err, errlen, at, "kind", "no window kind");
    const struct {
        const char *key;
        int64_t v;
    } durations[] = {{"size", spec->size},   {"advance", spec->advance},
                     {"gap", spec->gap},     {"grace", spec->grace},
                     {"retention", spec->retention}};
    for (size_t i = 0; i < sizeof durations / sizeof durations[0]; i++)
        if (durations[i].v < 0 || durations[i].v > KS_WIN_DURATION_MAX)
            return spec_fail(err, errlen, at, durations[i].key,
                             "%s window: durations must be 0..%" PRId64 " ms", kind,
                             KS_WIN_DURATION_MAX);
    if (spec->kind == KS_WIN_SESSION) {
        if (spec->gap <= 0)
            return spec_fail(err, errlen, at, "kind",
                             "%s window needs `gap` (the inactivity gap)", kind);
        if (spec->size || spec->advance)
            return spec_fail(err, errlen, at, spec->size ? "size" : "advance",
                             "%s window takes `gap`, not `size` or `advance`", kind);
    } else {
        if (spec->size <= 0)
            return spec_fail(err, errlen, at, "kind", "%s window needs `size`", kind);
        if (spec->gap)
            return spec_fail(err, errlen, at, "gap", "`gap` is for session windows, not %s",
                             kind);
    }
    if (spec->kind == KS_WIN_TUMBLING) {
        if (spec->advance && spec->advance != spec->size)
            return spec_fail(err, errlen, at, "advance",
                             "%s window: `advance` (%" PRId64 " ms) differs from `size` "
                             "(%" PRId64 " ms); use kind hopping",
                             kind, spec->advance, spec->size);
        spec->advance = spec->size;
    }
    if (spec->kind == KS_WIN_HOPPING) {
        if (spec->advance <= 0)
            return spec_fail(err, errlen, at, "kind",
                             "%s window needs `advance` between 1ms and `size`", kind);
        if (spec->advance > spec->size)
            return spec_fail(err, errlen, at, "advance",
                             "%s window needs `advance` between 1ms and `size`; "
                             "%" PRId64 " ms is more than %" PRId64 " ms",
                             kind, spec->advance, spec->size);
        if ((spec->size + spec->advance - 1) / spec->advance > KS_WIN_MAX_HOPS)
            return spec_fail(err, errlen, at, "advance",
                             "%s window: size / advance is over %d windows per record",
                             kind, KS_WIN_MAX_HOPS);
    }
    if (spec->kind == KS_WIN_SLIDING && spec->advance)
        return spec_fail(err, errlen, at, "advance", "%s window takes no `advance`", kind);
    int64_t min = ks_win_min_retention(spec);
    if (spec->retention == 0)
        spec->retention = min;
    if (spec->retention < min)
        return spec_fail(err, errlen, at, "retention",
                         "%s window: retention %" PRId64 " ms is shorter than the window "
                         "plus grace (%" PRId64 " ms)",
                         kind, spec->retention, min);
    return 0;
}

int ks_win_spec_check(ks_win_spec *spec, char *err, size_t errlen)
{
    return spec_check(spec, err, errlen, NULL);
}

int ks_win_spec_read(const ks_win_config *cfg, ks_win_spec *spec, char *err,
                     size_t errlen, const char **at)
{
    const char *kind, *emit = "update", *keyfmt = "windowed-json", *field = NULL;
    memset(spec, 0, sizeof *spec);
    if (at)
        *at = NULL;
    if (cfg->string(cfg->arg, "window.kind", &kind) != 0)
        return 1; /* not windowed */
    if (ks_win_kind_parse(kind, &spec->kind) != 0)
        return spec_fail(err, errlen, at, "kind",
                         "unknown window kind '%s'; expected tumbling, hopping, sliding "
                         "or session",
                         kind);
    /* unset: 0 (the defaults are filled in by the check) */
    if (cfg->duration(cfg->arg, "window.size", &spec->size) != 0)
        spec->size = 0;
    if (cfg->duration(cfg->arg, "window.advance", &spec->advance) != 0)
        spec->advance = 0;
    if (cfg->duration(cfg->arg, "window.gap", &spec->gap) != 0)
        spec->gap = 0;
    if (cfg->duration(cfg->arg, "window.grace", &spec->grace) != 0)
        spec->grace = 0;
    if (cfg->duration(cfg->arg, "window.retention", &spec->retention) != 0)
        spec->retention = 0;
    cfg->string(cfg->arg, "window.emit", &emit);
    cfg->string(cfg->arg, "window.key", &keyfmt);
    if (cfg->string(cfg->arg, "window.time_field", &field) == 0) {
        if (!field[0] || strlen(field) >= sizeof spec->time_field)
            return spec_fail(err, errlen, at, "time_field",
                             "window time_field must be 1..%zu characters",
                             sizeof spec->time_field - 1);
        snprintf(spec->time_field, sizeof spec->time_field, "%s", field);
    }
    if (strcmp(emit, "update") == 0)
        spec->emit = KS_WIN_EMIT_UPDATE;
    else if (strcmp(emit, "final") == 0)
        spec->emit = KS_WIN_EMIT_FINAL;
    else
        return spec_fail(err, errlen, at, "emit",
                         "window emit '%s': expected update or final", emit);
    if (strcmp(keyfmt, "windowed-json") == 0)
        spec->key_format = KS_WIN_KEY_JSON;
    else if (strcmp(keyfmt, "plain") == 0)
        spec->key_format = KS_WIN_KEY_PLAIN;
    else
        return spec_fail(err, errlen, at, "key",
                         "window key '%s': expected windowed-json or plain", keyfmt);
    return spec_check(spec, err, errlen, at);
}

int ks_win_standard_fields(const ks_config_field *fields, size_t n)
{
    static const ks_config_field std[] = {KS_WIN_CONFIG_FIELDS};
    for (size_t i = 0; i < sizeof std / sizeof std[0]; i++) {
        int found = 0;
        for (size_t j = 0; j < n && !found; j++)
            found = fields[j].name && strcmp(fields[j].name, std[i].name) == 0 &&
                    fields[j].type == std[i].type;
        if (!found)
            return 0;
    }
    return 1;
}

/* ---- arithmetic --------------------------------------------------------- */

size_t ks_win_time_starts(const ks_win_spec *spec, int64_t ts, int64_t *starts,
                          size_t max)
{
    int64_t last = ts - ts % spec->advance; /* latest start <= ts */
    int64_t first = last;
    while (first - spec->advance > ts - spec->size && first - spec->advance >= 0)
        first -= spec->advance;
    size_t n = 0;
    for (int64_t s = first; s <= last && n < max; s += spec->advance)
        starts[n++] = s;
    return n;
}

int64_t ks_win_end(const ks_win_spec *spec, int64_t start)
{
    return spec->kind == KS_WIN_SLIDING ? start + spec->size + 1 : start + spec->size;
}

int ks_win_time_closed(const ks_win_spec *spec, int64_t end, int64_t st)
{
    return end + spec->grace <= st;
}

int ks_win_session_closed(const ks_win_spec *spec, int64_t end, int64_t st)
{
    return end + spec->gap + spec->grace < st;
}

/* ---- store keys --------------------------------------------------------- */

void ks_win_time_put(unsigned char out[8], int64_t t)
{
    uint64_t u = (uint64_t)t ^ 0x8000000000000000ull;
    for (int i = 7; i >= 0; i--) {
        out[i] = (unsigned char)(u & 0xff);
        u >>= 8;
    }
}

int64_t ks_win_time_get(const unsigned char in[8])
{
    uint64_t u = 0;
    for (int i = 0; i < 8; i++)
        u = (u << 8) | in[i];
    return (int64_t)(u ^ 0x8000000000000000ull);
}

size_t ks_win_key_encode(unsigned char tag, ks_bytes key, const int64_t *times,
                         size_t ntimes, unsigned char *out, size_t outmax)
{
    const unsigned char *k = key.data;
    size_t n = 0;
    if (outmax < 1)
        return 0;
    out[n++] = tag;
    for (size_t i = 0; i < key.len; i++) {
        if (n + 2 > outmax)
            return 0;
        out[n++] = k[i];
        if (k[i] == 0x00)
            out[n++] = 0x01;
    }
    if (n + 2 + 8 * ntimes > outmax)
        return 0;
    out[n++] = 0x00;
    out[n++] = 0x00;
    for (size_t t = 0; t < ntimes; t++, n += 8)
        ks_win_time_put(out + n, times[t]);
    return n;
}

size_t ks_win_key_prefix(unsigned char tag, ks_bytes key, int sep, unsigned char *out,
                         size_t outmax)
{
    const unsigned char *k = key.data;
    size_t n = 0;
    if (outmax < 1)
        return 0;
    out[n++] = tag;
    for (size_t i = 0; i < key.len && n < outmax; i++) {
        out[n++] = k[i];
        if (k[i] == 0x00 && n < outmax)
            out[n++] = 0x01;
    }
    for (int s = 0; sep && s < 2 && n < outmax; s++)
        out[n++] = 0x00;
    return n;
}

int ks_win_key_decode(const unsigned char *in, size_t len, unsigned char *key_out,
                      size_t keymax, size_t *key_len, int64_t *times, size_t ntimes)
{
    if (len < 1 + 2 + 8 * ntimes)
        return -1;
    size_t end = len - 8 * ntimes; /* just past the separator */
    if (in[end - 2] != 0x00 || in[end - 1] != 0x00)
        return -1;
    size_t k = 0;
    for (size_t i = 1; i < end - 2; i++) {
        if (k == keymax)
            return -1;
        key_out[k++] = in[i];
        if (in[i] == 0x00) {
            if (i + 1 >= end - 2 || in[i + 1] != 0x01)
                return -1;
            i++;
        }
    }
    *key_len = k;
    for (size_t t = 0; t < ntimes; t++)
        times[t] = ks_win_time_get(in + end + 8 * t);
    return 0;
}

/* ---- a small JSON reader: top-level fields only ---------------------- */

typedef struct jscan {
    const char *p, *end;
} jscan;

static void j_ws(jscan *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' ||
                             *j->p == '\r'))
        j->p++;
}

/* Skip a string starting at '"'; set raw and rawlen to its contents. */
static int j_string(jscan *j, const char **raw, size_t *rawlen)
{
    if (j->p >= j->end || *j->p != '"')
        return -1;
    const char *start = ++j->p;
    while (j->p < j->end && *j->p != '"')
        j->p += (*j->p == '\\') ? 2 : 1;
    if (j->p >= j->end)
        return -1;
    *raw = start;
    *rawlen = (size_t)(j->p - start);
    j->p++;
    return 0;
}

/* Skip any value (nested objects and arrays by depth, minding strings). */
static int j_skip(jscan *j)
{
    int depth = 0;
    const char *raw;
    size_t rawlen;
    do {
        j_ws(j);
        if (j->p >= j->end)
            return -1;
        char c = *j->p;
        if (c == '"') {
            if (j_string(j, &raw, &rawlen) != 0)
                return -1;
        } else if (c == '{' || c == '[') {
            depth++;
            j->p++;
        } else if (c == '}' || c == ']') {
            if (depth == 0)
                return -1;
            depth--;
            j->p++;
        } else if (c == ',' || c == ':') {
            if (depth == 0)
                return -1;
            j->p++;
        } else {
            while (j->p < j->end && !strchr(",:]} \t\r\n", *j->p))
                j->p++;
        }
    } while (depth > 0);
    return 0;
}

static int j_int(jscan *j, int64_t *out)
{
    int neg = 0;
    if (j->p < j->end && *j->p == '-') {
        neg = 1;
        j->p++;
    }
    if (j->p >= j->end || *j->p < '0' || *j->p > '9')
        return -1;
    int64_t v = 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        if (v > (INT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (*j->p++ - '0');
    }
    if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E'))
        return -1;
    *out = neg ? -v : v;
    return 0;
}

int ks_win_json_time(const void *json, size_t len, const char *field, int64_t *ms)
{
    jscan j = {json, (const char *)json + len};
    size_t flen = strlen(field);
    j_ws(&j);
    if (j.p >= j.end || *j.p != '{')
        return -1;
    j.p++;
    for (;;) {
        j_ws(&j);
        if (j.p < j.end && *j.p == '}')
            return -1;
        const char *name;
        size_t nlen;
        if (j_string(&j, &name, &nlen) != 0)
            return -1;
        j_ws(&j);
        if (j.p >= j.end || *j.p != ':')
            return -1;
        j.p++;
        j_ws(&j);
        if (nlen == flen && memcmp(name, field, flen) == 0)
            return j_int(&j, ms);
        if (j_skip(&j) != 0)
            return -1;
        j_ws(&j);
        if (j.p < j.end && *j.p == ',')
            j.p++;
        else
            return -1;
    }
}

/* ---- output keys -------------------------------------------------------- */

size_t ks_win_utf8_next(const unsigned char *p, size_t n, uint32_t *cp)
{
    if (n == 0)
        return 0;
    unsigned char c = p[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (!len || len > n)
        return 0;
    uint32_t v = c & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
    for (size_t k = 1; k < len; k++) {
        if ((p[k] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (p[k] & 0x3f);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min_cp[len] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0; /* overlong, out of range, surrogate */
    *cp = v;
    return len;
}

int ks_win_utf8_valid(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint32_t cp;
    for (size_t i = 0; i < len;) {
        size_t n = ks_win_utf8_next(p + i, len - i, &cp);
        if (n == 0)
            return 0;
        i += n;
    }
    return 1;
}

size_t ks_win_json_key(ks_bytes key, int64_t start, int64_t end, char *out,
                       size_t outmax)
{
    const unsigned char *k = key.data;
    /* JSON allows \u0000, but jansson (the engine's `json` serde check)
     * and other C-string parsers refuse it: a key with 0x00 goes as hex */
    int text = ks_win_utf8_valid(key.data, key.len) &&
               (key.len == 0 || !memchr(key.data, 0, key.len));
    size_t n = 0;
#define PUT(...)                                                                   \
    do {                                                                           \
        int w_ = snprintf(out + n, outmax - n, __VA_ARGS__);                       \
        if (w_ < 0 || (size_t)w_ >= outmax - n)                                   \
            return 0;                                                              \
        n += (size_t)w_;                                                           \
    } while (0)
    if (outmax == 0)
        return 0;
    PUT("{\"%s\":\"", text ? "key" : "key_hex");
    for (size_t i = 0; i < key.len; i++) {
        if (!text)
            PUT("%02x", k[i]);
        else if (k[i] == '"' || k[i] == '\\')
            PUT("\\%c", k[i]);
        else if (k[i] < 0x20)
            PUT("\\u%04x", k[i]);
        else
            PUT("%c", k[i]);
    }
    PUT("\",\"start\":%" PRId64 ",\"end\":%" PRId64 "}", start, end);
#undef PUT
    return n;
}

static const unsigned char meta_key[1] = {KS_WIN_TAG_META};

int ks_win_meta_load(const ks_host_api *api, ks_store *store, int64_t *st, int64_t *seq)
{
    ks_bytes v;
    int rc = api->store_get(store, (ks_bytes){meta_key, 1}, &v);
    if (rc == KS_ERR_NOT_FOUND) {
        *st = INT64_MIN;
        *seq = 0;
        return 0;
    }
    if (rc != 0)
        return rc;
    if (v.len != 16)
        return KS_ERR_INVALID;
    *st = ks_win_time_get(v.data);
    *seq = ks_int64_decode((const unsigned char *)v.data + 8);
    /* what ks_win_meta_save can have written: no stream time yet or a
     * usable one, a sequence that can still be incremented */
    if ((*st != INT64_MIN && (*st < 0 || *st > KS_WIN_TIME_MAX)) || *seq < 0 ||
        *seq == INT64_MAX)
        return KS_ERR_INVALID;
    return 0;
}

int ks_win_meta_save(const ks_host_api *api, ks_store *store, int64_t st, int64_t seq)
{
    unsigned char v[16];
    ks_win_time_put(v, st);
    ks_int64_encode(seq, v + 8);
    return api->store_put(store, (ks_bytes){meta_key, 1}, (ks_bytes){v, sizeof v});
}
