/*
 * serde.c - checks of keys and values against their serde (serde.h).
 */
#include "runtime/serde.h"

#include <stdio.h>

#include "json/json_valid.h"

int ks_serde_check_why(ks_serde serde, const void *data, size_t len, const char **why,
                       char *reason, size_t cap)
{
    if (!data)
        return 0; /* null keys and tombstones are valid in every serde */
    if (serde == KS_SERDE_INT64 && len != 8) {
        *why = "int64 needs exactly 8 bytes";
        if (reason && cap)
            snprintf(reason, cap, "%zu bytes", len);
        return -1;
    }
    ks_json_error e;
    if (serde == KS_SERDE_JSON && ks_json_check(data, len, &e) != 0) {
        *why = "not valid JSON";
        if (reason && cap)
            snprintf(reason, cap, "%s", e.text);
        return -1;
    }
    return 0;
}

int ks_serde_check(ks_serde serde, const void *data, size_t len, const char **why)
{
    return ks_serde_check_why(serde, data, len, why, NULL, 0);
}
