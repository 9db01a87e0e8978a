/*
 * fuzz_json.c - differential: ks_json_valid (lib/json) must give jansson's
 * verdict for every input, except where jansson refuses valid JSON it
 * cannot hold (a number beyond int64 and double, a NUL in a member name):
 * ks_json_valid accepts those (docs/operators.md), jansson has no say.
 * JSON_ALLOW_NUL: "\u0000" in a string value is valid JSON.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "json/json_valid.h"

/* jansson's verdict: 1, 0, or -1 when it refuses for want of room. */
static int jansson_valid(const uint8_t *data, size_t len, json_error_t *err)
{
    json_t *j = json_loadb((const char *)data, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, err);
    json_decref(j);
    if (j)
        return 1;
    enum json_error_code code = json_error_code(err);
    if (code == json_error_numeric_overflow) { /* an integer beyond int64: as a real? */
        j = json_loadb((const char *)data, len,
                       JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, err);
        json_decref(j);
        if (j)
            return 1;
        code = json_error_code(err);
    }
    return code == json_error_numeric_overflow || code == json_error_null_byte_in_key ? -1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    json_error_t err;
    int theirs = jansson_valid(data, len, &err);
    int mine = ks_json_valid(data, len);
    if (theirs >= 0 && mine != theirs) {
        fprintf(stderr, "ks_json_valid says %d, jansson %d (%s)\n", mine, theirs,
                theirs ? "valid" : err.text);
        abort();
    }
    return 0;
}
