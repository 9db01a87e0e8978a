/*
 * ops_map.h - the field list of ops.map: compiled once from the JSON text
 * of `fields:`, then used per record to build a new JSON object from the
 * record's value (read in place) and key. docs/operators.md has the
 * grammar:
 *
 *   fields:
 *     NAME: /pointer                        the value there; omitted if missing
 *     NAME: { path: /pointer, default: V }  the value there, else V
 *     NAME: { const: V }                    V (any YAML value, as JSON)
 *     NAME: { key: string }                 the record key as a JSON string
 *     NAME: { key: json }                   the record key, which is JSON text
 *     NAME: { key: int64 }                  the record key, 8 bytes big-endian,
 *                                           as a JSON number
 *     NAME: { key: auto }                   by the key's serde (ks_map_key_serde)
 */
#ifndef KS_OPS_MAP_H
#define KS_OPS_MAP_H

#include <stddef.h>

#include "json/json_ptr.h"
#include "ops/ops_pred.h"

typedef struct ks_map ks_map;

/* 0 and *out (free with ks_map_free), or -1 and err. */
int ks_map_compile(const char *text, ks_map **out, ks_cfg_err *err);
void ks_map_free(ks_map *m);

/* How `key: auto` fields render the key: the serde of the node's input
 * keys (host input_serde). Until this is called they render it as
 * `key: string` does. */
typedef enum ks_map_key { KS_MAP_KEY_STRING, KS_MAP_KEY_JSON, KS_MAP_KEY_INT64 } ks_map_key;
void ks_map_key_serde(ks_map *m, ks_map_key how);

/*
 * Build the object for the value `doc` and the key (NULL: a null key) into
 * `out` (its len is reset). Returns 0, or -1 when out of memory. A record
 * that cannot be mapped (a `key: json` field whose key is not JSON, a key
 * that is not UTF-8, a `key: int64` one that is not 8 bytes) sets *why to the reason and returns 0: it is poison.
 */
int ks_map_build(const ks_map *m, const ks_json_span *doc, const void *key, size_t key_len,
                 ks_scratch *out, const char **why);

#endif /* KS_OPS_MAP_H */
