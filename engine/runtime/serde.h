/*
 * serde.h - what a key or value must look like in a source's or a sink's
 * serde (config.h's ks_serde). The one check both the worker (records it
 * consumes and emits) and the test driver (records a test pipes in and
 * the ones it captures) apply, so a test sees the errors production would.
 */
#ifndef KS_SERDE_H
#define KS_SERDE_H

#include <stddef.h>

#include "config/config.h"

/*
 * Check `len` bytes at `data` against `serde`. NULL data (a null key or a
 * tombstone) is valid in every serde; int64 needs exactly 8 bytes; json
 * needs one valid JSON value (any type); bytes and string take anything.
 * Returns 0 when valid, or -1 with a static sentence in *why (not freed;
 * *why is left alone on success).
 */
int ks_serde_check(ks_serde serde, const void *data, size_t len, const char **why);

/* The same, and on -1 the details in `reason` (cap bytes, NUL-terminated;
 * may be NULL): for json the validator's message and byte position,
 * "expected ',' or '}' at byte 17"; for int64 "3 bytes". */
int ks_serde_check_why(ks_serde serde, const void *data, size_t len, const char **why,
                       char *reason, size_t cap);

#endif /* KS_SERDE_H */
