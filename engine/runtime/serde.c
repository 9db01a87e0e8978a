/*
 * serde.c - checks of keys and values against their serde (serde.h).
 */
#include "runtime/serde.h"

#include "json/json_valid.h"

int ks_serde_check(ks_serde serde, const void *data, size_t len, const char **why)
{
    if (!data)
        return 0; /* null keys and tombstones are valid in every serde */
    if (serde == KS_SERDE_INT64 && len != 8) {
        *why = "int64 needs exactly 8 bytes";
        return -1;
    }
    /* jansson's verdict (json_loadb with JSON_DECODE_ANY), without
     * building and freeing a tree per record */
    if (serde == KS_SERDE_JSON && !ks_json_valid(data, len)) {
        *why = "not valid JSON";
        return -1;
    }
    return 0;
}
