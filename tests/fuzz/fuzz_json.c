/*
 * fuzz_json.c - differential: ks_json_valid (lib/json) must give jansson's
 * verdict, json_loadb(..., JSON_DECODE_ANY, ...) != NULL, for every input
 * (the json serde's check replaced that call; see lib/json/json_valid.h).
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "json/json_valid.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    json_error_t err;
    json_t *j = json_loadb((const char *)data, len, JSON_DECODE_ANY, &err);
    int theirs = j != NULL;
    json_decref(j);
    int mine = ks_json_valid(data, len);
    if (mine != theirs) {
        fprintf(stderr, "ks_json_valid says %d, jansson %d (%s)\n", mine, theirs,
                theirs ? "valid" : err.text);
        abort();
    }
    return 0;
}
