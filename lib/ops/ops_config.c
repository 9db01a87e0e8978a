/*
 * ops_config.c - compile and check the config of the ops processor types
 * (ops_config.h).
 */
#include "ops/ops_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/json_valid.h"
#include "ops/ops_map.h"

void ks_routes_free(ks_routes *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->r[i].to);
        ks_pred_free(r->r[i].where);
    }
    free(r->r);
    *r = (ks_routes){0};
}

/* One route, `item` at place `at`, into r. */
static int route_compile(ks_route *r, const ks_json_span *item, const char *at, ks_cfg_err *e)
{
    ks_json_iter it;
    ks_json_span k, v;
    char sub[256];
    if (item->type != KS_JSON_OBJECT || ks_json_iter_init(&it, item) != 0)
        return ks_cfg_fail(e, at, "a route is { to: CHILD, where: PREDICATE }");
    while (ks_json_iter_next(&it, &k, &v) == 1) {
        if (ks_json_string_eq(&k, "to", 2) && v.type == KS_JSON_STRING && !r->to) {
            size_t n;
            ks_json_string(&v, NULL, 0, &n);
            if (!(r->to = calloc(1, n + 1)))
                return ks_cfg_fail(e, at, "out of memory");
            ks_json_string(&v, r->to, n, &n);
        } else if (ks_json_string_eq(&k, "where", 5) && !r->where) {
            if (snprintf(sub, sizeof sub, "%s/where", at) >= (int)sizeof sub)
                sub[sizeof sub - 1] = '\0';
            if (ks_pred_compile(&v, sub, &r->where, e) != 0)
                return -1;
        } else {
            return ks_cfg_fail(e, at, "a route has two keys: to (a child's name, a string) "
                                      "and where (a predicate)");
        }
    }
    if (!r->to || !r->where)
        return ks_cfg_fail(e, at, "a route needs both 'to' and 'where'");
    return 0;
}

int ks_routes_compile(const char *text, ks_routes *out, ks_cfg_err *e)
{
    ks_json_span root, item;
    ks_json_iter it;
    *out = (ks_routes){0};
    if (!ks_json_valid(text, strlen(text)) || ks_json_root(text, strlen(text), &root) != 0 ||
        root.type != KS_JSON_ARRAY)
        return ks_cfg_fail(e, "", "expected a list of { to: CHILD, where: PREDICATE }");
    size_t n = 0;
    ks_json_iter_init(&it, &root);
    while (ks_json_iter_next(&it, NULL, &item) == 1)
        n++;
    if (n == 0)
        return ks_cfg_fail(e, "", "expected at least one route");
    if (!(out->r = calloc(n, sizeof *out->r)))
        return ks_cfg_fail(e, "", "out of memory");
    ks_json_iter_init(&it, &root);
    for (size_t i = 0; i < n && ks_json_iter_next(&it, NULL, &item) == 1; i++) {
        char at[32];
        snprintf(at, sizeof at, "/%zu", i);
        out->n++;
        if (route_compile(&out->r[i], &item, at, e) != 0) {
            ks_routes_free(out);
            return -1;
        }
    }
    return 0;
}

int ks_ops_path_check(const char *path, ks_cfg_err *e)
{
    ks_json_span probe;
    if (ks_json_find("null", 4, path, strlen(path), &probe) == KS_JSON_BAD_POINTER)
        return ks_cfg_fail(e, "", "'%s' is not a JSON pointer: it must be empty (the whole "
                           "value) or start with '/', and '~' must be followed by 0 or 1", path);
    return 0;
}

int ks_ops_on_missing(const char *text, ks_on_missing *out, ks_cfg_err *e)
{
    if (strcmp(text, "drop") == 0)
        *out = KS_MISSING_DROP;
    else if (strcmp(text, "poison") == 0)
        *out = KS_MISSING_POISON;
    else if (strcmp(text, "fail") == 0)
        *out = KS_MISSING_FAIL;
    else
        return ks_cfg_fail(e, "", "expected drop, poison or fail, found '%s'", text);
    return 0;
}

int ks_ops_key_format(const char *text, ks_cfg_err *e)
{
    if (strcmp(text, "auto") && strcmp(text, "text") && strcmp(text, "json") &&
        strcmp(text, "int64"))
        return ks_cfg_fail(e, "", "expected auto, text, json or int64, found '%s'", text);
    return 0;
}

int ks_ops_config_check(const char *type, const char *key, const char *value, ks_cfg_err *e)
{
    int rc = 0;
    if ((!strcmp(type, "filter") && !strcmp(key, "where"))) {
        ks_pred *p = NULL;
        rc = ks_pred_compile_text(value, &p, e);
        ks_pred_free(p);
    } else if (!strcmp(type, "branch") && !strcmp(key, "routes")) {
        ks_routes r;
        rc = ks_routes_compile(value, &r, e);
        ks_routes_free(&r);
    } else if (!strcmp(type, "map") && !strcmp(key, "fields")) {
        ks_map *m = NULL;
        rc = ks_map_compile(value, &m, e);
        ks_map_free(m);
    } else if ((!strcmp(type, "select_key") || !strcmp(type, "flat_map")) &&
               !strcmp(key, "path")) {
        rc = ks_ops_path_check(value, e);
    } else if ((!strcmp(type, "select_key") || !strcmp(type, "flat_map")) &&
               !strcmp(key, "on_missing")) {
        ks_on_missing m;
        rc = ks_ops_on_missing(value, &m, e);
    } else if (!strcmp(type, "select_key") && !strcmp(key, "format")) {
        rc = ks_ops_key_format(value, e);
    }
    return rc;
}
