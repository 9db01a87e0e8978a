/*
 * query_request.h - a request to the query server (docs/scaling.md
 * "Remote queries"): the decoded parameters of GET /v1/query, checked
 * into what a ks_query needs, and the byte-string arguments `kstreams
 * query` shares with it (text or hex). No I/O: the fuzz harness
 * (tests/fuzz/fuzz_http.c) drives the parser with arbitrary pairs.
 */
#ifndef KS_QUERY_REQUEST_H
#define KS_QUERY_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "query/query_store.h"

#define KS_QUERY_REQUEST_MAX_PARAMS 16

/* One GET /v1/query, parsed. The byte strings are owned (free with
 * ks_query_request_free); store and the time texts point into the pairs
 * the parser was given. */
typedef struct ks_query_request {
    const char *store;
    ks_query_bytes key, kfrom, kto;
    const char *from, *to; /* window start bounds as given (ms or ISO-8601), or NULL */
    int64_t tfrom, tto;    /* parsed; INT64_MIN / INT64_MAX when not given */
    int32_t partition;     /* `partition=`, or -1 */
    int int64, hex;
    int standby; /* `standby=1`: a standby's or a restoring task's store may answer */
} ks_query_request;

/*
 * Parse n (name, value) pairs (URL-decoded) into *r. Parameters: store
 * (required), key or key_hex, from_key[_hex], to_key[_hex], from, to,
 * partition, int64, hex and standby (0 or 1). 0, or -1 with the reason in err (an
 * unknown or repeated parameter, a bad value): the server answers 400 with
 * it. *r is filled as far as it got: free it in any case.
 */
int ks_query_request_parse(ks_query_request *r, const char *const *names,
                           const char *const *values, size_t n, char *err, size_t errlen);

void ks_query_request_free(ks_query_request *r);

/* Set b to a copy of text `s` (0), or -1 out of memory. */
int ks_query_bytes_text(ks_query_bytes *b, const char *s);

/* Set b from hex digits ("0102ff", "0x0102ff"): 0, or -1 when malformed
 * (odd length, a non-hex digit) or out of memory. */
int ks_query_bytes_hex(ks_query_bytes *b, const char *s);

#endif /* KS_QUERY_REQUEST_H */
