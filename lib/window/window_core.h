/*
 * window_core.h - the rules of event-time windows, shared by the engine and
 * the shipped count, aggregate and reduce plugins (pure: no host, no Kafka,
 * no LMDB; unit-tested alone). The rules of a `window:` spec, which windows
 * a timestamp falls in, when a window closes, the order-preserving store
 * key encoding, the event-time field of a JSON value, the windowed output
 * key. `kstreams check` validates `window:` with ks_win_spec_read() and
 * `kstreams query` decodes window keys with ks_win_key_decode(), so each
 * rule exists once. The plugins' runtime is plugins/window.h.
 */
#ifndef KS_LIB_WINDOW_CORE_H
#define KS_LIB_WINDOW_CORE_H

#include <kstreams/kstreams.h>

typedef enum ks_win_kind {
    KS_WIN_NONE = 0, /* the node has no `window:` */
    KS_WIN_TUMBLING,
    KS_WIN_HOPPING,
    KS_WIN_SLIDING,
    KS_WIN_SESSION
} ks_win_kind;

typedef enum ks_win_emit {
    KS_WIN_EMIT_UPDATE = 0, /* every change of a window is output          */
    KS_WIN_EMIT_FINAL       /* one output per window, when it closes       */
} ks_win_emit;

typedef enum ks_win_keyfmt {
    KS_WIN_KEY_JSON = 0, /* {"key":"...","start":ms,"end":ms}              */
    KS_WIN_KEY_PLAIN     /* the record key; bounds in headers              */
} ks_win_keyfmt;

/* Store layout tags (state format 1 of a windowed node; window.c). */
#define KS_WIN_TAG_META 0x10  /* stream time T(st), record sequence (8, BE) */
#define KS_WIN_TAG_INDEX 0x20 /* T(t) then a window or raw key: due-time index */
#define KS_WIN_TAG_WIN 0x30   /* key* 00 00 T(start); session: T(end) T(start) */
#define KS_WIN_TAG_RAW 0x40   /* sliding: key* 00 00 T(ts) T(seq), one record */

/* Most windows one record may fall in (hopping: size / advance). */
#define KS_WIN_MAX_HOPS 4096

/* Latest usable event time (2^62 ms, some 146 million years): a later one
 * is refused like a negative one. With every window duration at most
 * KS_WIN_DURATION_MAX (2^59 ms), a time plus all the durations of a spec
 * stays within int64, so no window arithmetic overflows. */
#define KS_WIN_TIME_MAX ((int64_t)1 << 62)
#define KS_WIN_DURATION_MAX ((int64_t)1 << 59)

/* Header names carrying the window bounds (decimal ms) on every output. */
#define KS_WIN_HDR_START "ks.window.start"
#define KS_WIN_HDR_END "ks.window.end"

/* A window definition, from the node's `window:` map. All times in ms. */
typedef struct ks_win_spec {
    ks_win_kind kind;
    int64_t size;      /* tumbling, hopping: length; sliding: max time
                          difference between two records of one window */
    int64_t advance;   /* hopping: distance between starts (tumbling: size) */
    int64_t gap;       /* session: inactivity gap                          */
    int64_t grace;     /* how long after its end a window still accepts   */
    int64_t retention; /* how long a window stays in the store, from start
                          (session: from end); >= the minimum below         */
    ks_win_emit emit;
    ks_win_keyfmt key_format;
    char time_field[128]; /* JSON field with the event time; "" = record ts */
} ks_win_spec;

/* The YAML `window:` keys, as config fields for a processor type's table
 * (the engine validates `window: { x: ... }` against "window.x"). */
#define KS_WIN_CONFIG_FIELDS                                                 \
    {"window.kind", KS_CONFIG_STRING, 0, NULL,                               \
     "tumbling, hopping, sliding or session; absent: not windowed"},         \
    {"window.size", KS_CONFIG_DURATION, 0, NULL,                             \
     "tumbling/hopping: window length; sliding: max time difference"},       \
    {"window.advance", KS_CONFIG_DURATION, 0, NULL,                          \
     "hopping: distance between window starts"},                             \
    {"window.gap", KS_CONFIG_DURATION, 0, NULL, "session: inactivity gap"},  \
    {"window.grace", KS_CONFIG_DURATION, 0, "0",                             \
     "time after a window's end during which late records still count"},     \
    {"window.retention", KS_CONFIG_DURATION, 0, NULL,                        \
     "how long windows stay in the store; default: the minimum"},            \
    {"window.emit", KS_CONFIG_STRING, 0, "update",                           \
     "update (every change) or final (once, when the window closes)"},       \
    {"window.time_field", KS_CONFIG_STRING, 0, NULL,                         \
     "JSON field of the value holding the event time in ms"},                \
    {"window.key", KS_CONFIG_STRING, 0, "windowed-json",                     \
     "output key: windowed-json or plain (bounds in headers)"}

#define KS_WIN_CONFIG_COUNT 9

/* ---- core: spec ----------------------------------------------------------- */

/* "tumbling", ... ("none" for KS_WIN_NONE); the YAML `kind:` values. */
const char *ks_win_kind_name(ks_win_kind kind);

/* A YAML `kind:` value into *kind. 0, or -1 when unknown. */
int ks_win_kind_parse(const char *s, ks_win_kind *kind);

/* Check a spec and fill in defaults (tumbling advance = size, retention).
 * Returns 0, or -1 with a sentence in err (NUL-terminated). */
int ks_win_spec_check(ks_win_spec *spec, char *err, size_t errlen);

/* Where ks_win_spec_read() finds a node's window keys, by field name
 * ("window.kind", "window.size", ...). Each returns 0 with the value (the
 * field's default when the YAML does not set it), or non-zero when unset
 * without a default. A plugin reads them through the host's config API
 * (window.c), the engine from the node's `window:` map (topology.c). */
typedef struct ks_win_config {
    void *arg;
    int (*string)(void *arg, const char *name, const char **out);
    int (*duration)(void *arg, const char *name, int64_t *ms);
} ks_win_config;

/* Read a node's window and check it (ks_win_spec_check). Returns 1 when
 * the node has no `kind` (not windowed); 0 with *spec filled in; -1 with a
 * sentence in err and, when one key is at fault, its YAML name ("advance",
 * without "window.") in *at (NULL otherwise; `at` may be NULL). */
int ks_win_spec_read(const ks_win_config *cfg, ks_win_spec *spec, char *err,
                     size_t errlen, const char **at);

/* 1 when the config table declares every field of KS_WIN_CONFIG_FIELDS
 * with its type: the type's `window:` follows these rules (count,
 * aggregate, reduce). Other types may give `window.*` keys other meanings. */
int ks_win_standard_fields(const ks_config_field *fields, size_t n);

/* ---- core: arithmetic ------------------------------------------------------ */

/* Smallest allowed retention: size + grace for tumbling and hopping,
 * size + 1 + grace for sliding, gap + grace for sessions. */
int64_t ks_win_min_retention(const ks_win_spec *spec);

/* Starts of the tumbling/hopping windows containing ts (>= 0), ascending,
 * into starts[max]. Returns how many (at most size/advance rounded up). */
size_t ks_win_time_starts(const ks_win_spec *spec, int64_t ts, int64_t *starts,
                          size_t max);

/* Exclusive end of the tumbling, hopping or sliding window at `start`
 * (sliding windows hold [start, start + size], so end = start + size + 1). */
int64_t ks_win_end(const ks_win_spec *spec, int64_t start);

/* 1 when a time window ending (exclusively) at `end` is closed at stream
 * time st: end + grace <= st. */
int ks_win_time_closed(const ks_win_spec *spec, int64_t end, int64_t st);

/* 1 when a session whose last record is at `end` is closed at st: no record
 * that is not late can reach it any more, end + gap + grace < st. */
int ks_win_session_closed(const ks_win_spec *spec, int64_t end, int64_t st);

/* 8 bytes, big-endian, sign bit flipped: byte order = numeric order. */
void ks_win_time_put(unsigned char out[8], int64_t t);
int64_t ks_win_time_get(const unsigned char in[8]);

/* The meta entry (key KS_WIN_TAG_META) of a windowed store: stream time
 * and record sequence, read through `api` from `store` (both borrowed).
 * A store without one gives INT64_MIN and 0. 0, KS_ERR_INVALID for an
 * entry of the wrong size or with values no save writes (a stream time
 * outside 0..KS_WIN_TIME_MAX but for INT64_MIN, a sequence < 0 or at
 * INT64_MAX), or the store's ks_err. */
int ks_win_meta_load(const ks_host_api *api, ks_store *store, int64_t *st, int64_t *seq);
/* Write the meta entry. 0 or the store's ks_err. */
int ks_win_meta_save(const ks_host_api *api, ks_store *store, int64_t st, int64_t seq);

/* Store key: tag, the key with 0x00 escaped as 0x00 0x01, the separator
 * 0x00 0x00, then ntimes sortable times. Keys of one record key sort
 * together, their windows in time order, and no key is a prefix of another
 * key's entries. Returns the length written, or 0 when it needs more than
 * outmax bytes. */
size_t ks_win_key_encode(unsigned char tag, ks_bytes key, const int64_t *times,
                         size_t ntimes, unsigned char *out, size_t outmax);

/* A range-scan bound for the entries of `key` under `tag`: the tag, the
 * escaped key, then 00 00 when `sep`. Cut at outmax bytes (a cut prefix
 * still sorts at or below the key's entries). Returns the length. */
size_t ks_win_key_prefix(unsigned char tag, ks_bytes key, int sep, unsigned char *out,
                         size_t outmax);

/* Inverse of ks_win_key_encode: the unescaped key into key_out (keymax
 * bytes), its length into *key_len, and ntimes times. Returns 0 or -1 when
 * `in` is not such a key. */
int ks_win_key_decode(const unsigned char *in, size_t len, unsigned char *key_out,
                      size_t keymax, size_t *key_len, int64_t *times, size_t ntimes);

/* The integer (ms) of top-level field `field` of the JSON object in
 * `json`. Returns 0, or -1 when absent, not an object or not an integer. */
int ks_win_json_time(const void *json, size_t len, const char *field, int64_t *ms);

/* One UTF-8 character at p (n bytes): its length (1..4) with the code
 * point in *cp, or 0 when p holds no valid character (RFC 3629: no
 * overlong forms, surrogates or code points over U+10FFFF) or n is 0. */
size_t ks_win_utf8_next(const unsigned char *p, size_t n, uint32_t *cp);

/* 1 when the len bytes are valid UTF-8 (empty included), else 0. */
int ks_win_utf8_valid(const void *data, size_t len);

/* The windowed-json output key, always JSON that jansson (and so the
 * engine's `json` serde check) parses:
 *   {"key":"<key>","start":S,"end":E}      the key is valid UTF-8 without
 *                                          0x00: a JSON string, '"' and '\'
 *                                          escaped, the other control
 *                                          characters as \u00XX
 *   {"key_hex":"<hex>","start":S,"end":E}  otherwise: every byte as two
 *                                          lowercase hex digits (the field
 *                                          and format of `kstreams query`,
 *                                          whose --key-hex takes it back)
 * Returns the length, or 0 when over outmax. */
size_t ks_win_json_key(ks_bytes key, int64_t start, int64_t end, char *out,
                       size_t outmax);

#endif /* KS_LIB_WINDOW_CORE_H */
