/*
 * restore_fold.h - a restore batch of one store, folded by key: only a
 * key's latest changelog record decides what the store holds after the
 * replay (what compaction does to the changelog, ahead of it), so the
 * restore keeps that one and writes each key once, in key order, when the
 * batch commits. A changelog of counts holds many updates per key: LMDB
 * then does one sequential put per key instead of one random put per
 * record.
 *
 * Private to restorer.c and grow_move.c (the latest value of each key of
 * a changelog partition). One thread.
 */
#ifndef KS_RESTORE_FOLD_H
#define KS_RESTORE_FOLD_H

#include <stddef.h>
#include <stdint.h>

#include "kstreams/kstreams.h"

typedef struct ks_fold ks_fold;

/* An empty fold (the caller owns it: ks_fold_free), or NULL (no memory). */
ks_fold *ks_fold_new(void);
void ks_fold_free(ks_fold *f);

/* Make (value, offset) key's latest record; value NULL: a deletion. The
 * bytes are copied. 0, or KS_ERR_NOMEM (the fold keeps what it had). */
int ks_fold_put(ks_fold *f, ks_bytes key, const ks_bytes *value, int64_t offset);

/* Bytes held (keys, values and their bookkeeping). */
size_t ks_fold_bytes(const ks_fold *f);

/* Called for each key (value NULL: delete), in key order (bytewise, then
 * shorter first); the pointers are valid during the call. 0 or a negative
 * ks_err, which stops the drain. */
typedef int (*ks_fold_fn)(void *arg, ks_bytes key, const ks_bytes *value, int64_t offset);

/* Hand every kept key to fn in key order, then empty the fold (also
 * when fn fails). 0, fn's error, or KS_ERR_NOMEM. */
int ks_fold_drain(ks_fold *f, ks_fold_fn fn, void *arg);

#endif /* KS_RESTORE_FOLD_H */
