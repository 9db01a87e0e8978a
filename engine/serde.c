/*
 * serde.c - checks of keys and values against their serde (serde.h).
 */
#include "serde.h"

#include <jansson.h>

int ks_serde_check(ks_serde serde, const void *data, size_t len, const char **why)
{
    if (!data)
        return 0; /* null keys and tombstones are valid in every serde */
    if (serde == KS_SERDE_INT64 && len != 8) {
        *why = "int64 needs exactly 8 bytes";
        return -1;
    }
    if (serde == KS_SERDE_JSON) {
        json_error_t jerr;
        json_t *j = json_loadb(data, len, JSON_DECODE_ANY, &jerr);
        if (!j) {
            *why = "not valid JSON";
            return -1;
        }
        json_decref(j);
    }
    return 0;
}
