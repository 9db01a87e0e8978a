/*
 * grow.h - room for one more element in an array that doubles as it fills,
 * the one growth rule of the engine's lists and tables.
 */
#ifndef KS_BASE_GROW_H
#define KS_BASE_GROW_H

#include <stddef.h>

/* The array `items` (caller-owned, NULL when empty) of `count` used and
 * `*cap` allocated elements of `size` bytes, with room for one more:
 * `items` itself when it has room, else a reallocation of it to twice
 * `*cap` (`first` elements when empty), with `*cap` updated. The caller
 * stores the result in place of `items`. Returns NULL when out of memory
 * or the size would overflow: then `items` and `*cap` are unchanged and
 * still the caller's. */
void *ks_grow(void *items, size_t *cap, size_t count, size_t size, size_t first);

#endif /* KS_BASE_GROW_H */
