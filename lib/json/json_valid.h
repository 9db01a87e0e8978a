/*
 * json_valid.h - is a buffer one JSON value? A check that allocates
 * nothing, for the json serde's per-record check (serde.c) and the ops
 * operators; when the answer is no, it says why and at which byte.
 *
 * The grammar is RFC 8259's: any value at the top level, surrounding
 * whitespace (space, tab, LF, CR) allowed; strings strict UTF-8 (no
 * overlongs, no UTF-8-encoded surrogates, nothing above U+10FFFF), no raw
 * control characters (< 0x20); and these choices where the RFC leaves
 * room:
 *   - "\u0000" is accepted, in values and in member names (valid JSON; a
 *     reader that decodes it gets a NUL byte inside the string);
 *   - numbers of any size are accepted: 99999999999999999999 (beyond
 *     int64) and 1e400 (beyond double) are valid JSON. jansson 2.14
 *     refuses both, and "\u0000" too: do not read a `value: json`
 *     record with jansson and assume it succeeds;
 *   - a \u escape of a surrogate must be a high one followed directly by a
 *     \u escape of a low one; a lone or unpaired surrogate is rejected;
 *   - at most 2048 (KS_JSON_MAX_DEPTH) nested values, scalars counted:
 *     2048 nested empty arrays pass, 2048 around a 1 do not;
 *   - a single NUL byte right after a number, true, false or null is
 *     skipped, so "1\0" and "[true\0]" are accepted (as jansson 2.14 does,
 *     which the engine used before); every other NUL byte is rejected;
 *   - empty or whitespace-only input is rejected.
 * tests/unit/test_json_valid.c checks all of this against jansson (where
 * jansson's verdict is the same), each refusal's message and byte, and
 * random mutations.
 */
#ifndef KS_JSON_VALID_H
#define KS_JSON_VALID_H

#include <stddef.h>

#define KS_JSON_MAX_DEPTH 2048
#define KS_JSON_MAX_DEPTH_TEXT "2048"

/*
 * Check the `len` bytes at `data` (borrowed, read only, need not be
 * NUL-terminated; NULL is invalid). No allocation, no global state,
 * thread-safe; stack use is bounded (about 300 bytes).
 * Returns 1 when they are one valid JSON value, 0 when not.
 */
int ks_json_valid(const void *data, size_t len);

/* Why a text is not JSON. */
typedef struct ks_json_error {
    const char *why; /* static: "expected ',' or '}'", "invalid UTF-8 in a string", ... */
    size_t pos;      /* the byte (0-based) where it was found; len at the end */
    char text[96];   /* "WHY at byte POS" */
} ks_json_error;

/* The same check: 0 when valid, else -1 with *err filled (err may be
 * NULL). */
int ks_json_check(const void *data, size_t len, ks_json_error *err);

#endif /* KS_JSON_VALID_H */
