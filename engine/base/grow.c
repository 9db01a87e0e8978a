/*
 * grow.c - doubling growth of the engine's arrays (see grow.h).
 */
#include "base/grow.h"

#include <stdint.h>
#include <stdlib.h>

void *ks_grow(void *items, size_t *cap, size_t count, size_t size, size_t first)
{
    if (count < *cap)
        return items;
    size_t want = *cap ? *cap * 2 : (first ? first : 1);
    if (want < *cap || size == 0 || want > SIZE_MAX / size)
        return NULL;
    void *grown = realloc(items, want * size);
    if (grown)
        *cap = want;
    return grown;
}
