/*
 * json_ptr.h - read JSON text in place: the value at an RFC 6901 pointer,
 * the members of an object or array, strings and numbers decoded. Nothing
 * here allocates, keeps global state or recurses; every function is
 * thread-safe and reads only inside the bytes it is given.
 *
 * The text should first pass ks_json_valid() (lib/json/json_valid.h): on
 * valid JSON every answer is exact. On any other text the functions still
 * never read outside it or crash; they return KS_JSON_BAD_TEXT or an
 * answer that is meaningless but bounded by the text.
 *
 * Pointers (RFC 6901): "" is the whole value; otherwise '/'-separated
 * tokens in which "~1" stands for '/' and "~0" for '~' (any other '~' is a
 * bad pointer). A token selects an object member by its decoded name (the
 * first member of that name when a name repeats), or an array element by a
 * decimal index without leading zeros; "-" (past the end), an index out of
 * range, a non-index token on an array and any token on a scalar give
 * KS_JSON_MISSING.
 */
#ifndef KS_JSON_PTR_H
#define KS_JSON_PTR_H

#include <stddef.h>
#include <stdint.h>

#include <kstreams/kstreams.h>

/* ks_json_type, ks_json_span, enum ks_json_rc and ks_json_iter are the
 * plugin ABI's (kstreams.h, 1.3): the host hands these same functions to
 * plugins. */
/* The top-level value of `len` bytes at `doc` (surrounding whitespace
 * skipped). KS_JSON_FOUND or KS_JSON_BAD_TEXT. */
int ks_json_root(const char *doc, size_t len, ks_json_span *out);

/* The value at pointer `ptr` (ptr_len bytes) inside the value `in`. */
int ks_json_at(const ks_json_span *in, const char *ptr, size_t ptr_len,
               ks_json_span *out);

/* ks_json_root() then ks_json_at(). */
int ks_json_find(const char *doc, size_t len, const char *ptr, size_t ptr_len,
                 ks_json_span *out);

/* KS_JSON_FOUND, or KS_JSON_BAD_TEXT when `in` is not an array or object. */
int ks_json_iter_init(ks_json_iter *it, const ks_json_span *in);
/* Next element (key->type is unused for arrays, key may be NULL): 1, or 0
 * at the end, or KS_JSON_BAD_TEXT. A member's key is a string span. */
int ks_json_iter_next(ks_json_iter *it, ks_json_span *key, ks_json_span *val);

/* Decode the string span `s` (quotes included) into `out` (cap bytes; may
 * be NULL with cap 0) as UTF-8. *len gets the full decoded length, which
 * may exceed cap (then out holds the first cap bytes). No NUL is added.
 * 0, or KS_JSON_BAD_TEXT for a bad escape or a span that is not a string. */
int ks_json_string(const ks_json_span *s, char *out, size_t cap, size_t *len);

/* 1 when the string span `s` decodes to exactly the `n` bytes at `lit`,
 * 0 when not (also when `s` is not a valid string). */
int ks_json_string_eq(const ks_json_span *s, const char *lit, size_t n);

/* The number span `s` as a double: 0, or KS_JSON_BAD_TEXT when it is not
 * a JSON number. Out of range magnitudes give +-HUGE_VAL or 0 (strtod). */
int ks_json_double(const ks_json_span *s, double *out);

/* The number span `s` as an int64: 0 when it is an integer (no fraction,
 * no exponent) that fits, else KS_JSON_BAD_TEXT. */
int ks_json_int64(const ks_json_span *s, int64_t *out);

#endif /* KS_JSON_PTR_H */
