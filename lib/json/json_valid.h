/*
 * json_valid.h - is a buffer one JSON value? A yes/no check that allocates
 * nothing, for the json serde's per-record check (serde.c).
 *
 * Its verdict is exactly that of jansson 2.14's
 * json_loadb(data, len, JSON_DECODE_ANY, &err) != NULL, which the engine
 * used before and which plugins still use to read the records: RFC 8259
 * grammar, any value at the top level, surrounding whitespace (space, tab,
 * LF, CR) allowed; strings strict UTF-8 (no overlongs, no UTF-8-encoded
 * surrogates, nothing above U+10FFFF), no raw control characters (< 0x20);
 * and jansson's own choices where the RFC leaves room:
 *   - "\u0000" is rejected (jansson without JSON_ALLOW_NUL), in values and
 *     in object keys;
 *   - a \u escape of a surrogate must be a high one followed directly by a
 *     \u escape of a low one; a lone or unpaired surrogate is rejected;
 *   - integers (no '.', no exponent) must fit json_int_t (long long);
 *     reals must not overflow to infinity (underflow to 0 is accepted);
 *   - at most 2048 (JSON_PARSER_MAX_DEPTH) nested values, scalars
 *     counted: 2048 nested empty arrays pass, 2048 around a 1 do not;
 *   - a single NUL byte right after a number, true, false or null is
 *     skipped (jansson's lexer loses it when it pushes back its lookahead
 *     byte), so "1\0" and "[true\0]" are accepted; every other NUL byte is
 *     rejected;
 *   - empty or whitespace-only input is rejected.
 * tests/unit/test_json_valid.c checks all of this, and random mutations,
 * against the installed jansson.
 */
#ifndef KS_JSON_VALID_H
#define KS_JSON_VALID_H

#include <stddef.h>

/*
 * Check the `len` bytes at `data` (borrowed, read only, need not be
 * NUL-terminated; NULL is invalid). No allocation, no global state,
 * thread-safe; stack use is bounded (about 300 bytes).
 * Returns 1 when they are one valid JSON value, 0 when not.
 */
int ks_json_valid(const void *data, size_t len);

#endif /* KS_JSON_VALID_H */
