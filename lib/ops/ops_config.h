/*
 * ops_config.h - the config of the ops processor types (ops.c), compiled
 * and checked without a host: the plugin's init uses it, and so does
 * `kstreams check` (engine/runtime/topology.c), which reports a mistake at the
 * FILE:LINE:COL where the offending part of the config was written.
 */
#ifndef KS_OPS_CONFIG_H
#define KS_OPS_CONFIG_H

#include "ops/ops_pred.h"

/* branch's `routes:`: [ { to: CHILD, where: PREDICATE }, ... ] */
typedef struct ks_route {
    char *to;
    ks_pred *where;
} ks_route;

typedef struct ks_routes {
    ks_route *r;
    size_t n;
} ks_routes;

int ks_routes_compile(const char *text, ks_routes *out, ks_cfg_err *err);
void ks_routes_free(ks_routes *r);

/* A pointer as select_key's and flat_map's `path:` takes it: 0 or -1. */
int ks_ops_path_check(const char *path, ks_cfg_err *err);

typedef enum ks_on_missing { KS_MISSING_DROP, KS_MISSING_POISON, KS_MISSING_FAIL } ks_on_missing;

/* `on_missing:` drop, poison or fail: 0 and *out, or -1. */
int ks_ops_on_missing(const char *text, ks_on_missing *out, ks_cfg_err *err);

/* select_key's `format:` auto, text, json or int64: 0, or -1. */
int ks_ops_key_format(const char *text, ks_cfg_err *err);

/* Check the value of config key `key` of the ops processor type `type`
 * ("filter", "map", ...). 0 when it is good (or not a key checked here),
 * -1 with err. */
int ks_ops_config_check(const char *type, const char *key, const char *value, ks_cfg_err *err);

#endif /* KS_OPS_CONFIG_H */
