/*
 * config_internal.h - what the files of config/ share while they parse one
 * pipeline file; nothing outside config/ includes it (config.h is the
 * interface).
 *
 * Who owns what:
 *   config.c          the top level (TOP_KEYS, kafka:, metrics:) and the
 *                     entry points ks_pipeline_parse / ks_pipeline_load
 *   config_values.c   the public small parsers (durations, sizes, listen
 *                     addresses, serde names) and the name rules
 *   config_model.c    lookups in a parsed pipeline and ks_pipeline_free
 *   config_schema.c   error reporting, mappings with a fixed set of keys,
 *                     and the typed value readers (want_*)
 *   config_graph.c    stores:, sources:, tables:, global_tables:, nodes:, sinks:
 *   config_outbox.c   outbox: (both backends)
 *   config_checks.c   the cross checks after every key is read (names
 *                     unique, references, cycles, stores used/declared)
 *
 * Error convention (all of them): a function returning int returns 0 on
 * success and -1 after writing the one-line "FILE:LINE:COL: message" into
 * the context's error buffer (failf); a function returning a pointer
 * returns NULL after doing the same. want_map and want_seq also return 1
 * for a null value that null_ok allows.
 *
 * Names: the functions are defined with a ks_cfg_ prefix (they are not
 * static); the short names below are what config.c has always called them,
 * and what code in config/ keeps calling them.
 */
#ifndef KS_CONFIG_INTERNAL_H
#define KS_CONFIG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "config/yaml_tree.h"

#define KS_PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))

/* One parse: the pipeline being built and where its error goes. */
typedef struct pctx {
    ks_pipeline *p;
    char *err;
    size_t errlen;
    size_t store_cap;
} pctx;

/* ------------------------------------------------------------------ */
/* Errors (config_schema.c)                                            */
/* ------------------------------------------------------------------ */

/* Writes "FILE:LINE:COL: message" (control characters as '?'); returns -1. */
int ks_cfg_failf(pctx *c, int line, int col, const char *fmt, ...)
    KS_PRINTF_LIKE(4, 5);
#define failf(...) ks_cfg_failf(__VA_ARGS__)

#define FAIL_AT(c, node, ...) failf((c), (node)->line, (node)->col, __VA_ARGS__)
#define FAIL_MARK(c, m, ...) failf((c), (m).line, (m).col, __VA_ARGS__)

/* The mark of node `n` in the file being parsed. */
ks_mark ks_cfg_mark_of(const pctx *c, const ks_ynode *n);
#define mark_of(c, n) ks_cfg_mark_of(c, n)

/* "out of memory" at `at` (or 1:1 when NULL); returns -1. */
int ks_cfg_oom(pctx *c, const ks_ynode *at);
#define oom(c, at) ks_cfg_oom(c, at)

/* What a node is, for "found ..." in messages: "a list", "'text'", ...
 * (either a constant or `buf`). */
const char *ks_cfg_found(const ks_ynode *v, char *buf, size_t len);
#define found(v, buf, len) ks_cfg_found(v, buf, len)

/* strdup(s), or NULL after reporting out of memory at `at`. */
char *ks_cfg_dup_at(pctx *c, const ks_ynode *at, const char *s);
#define dup_at(c, at, s) ks_cfg_dup_at(c, at, s)

/* ------------------------------------------------------------------ */
/* Names (config_values.c): 1 when the text is one, else 0             */
/* ------------------------------------------------------------------ */

/* Names of sources, nodes, sinks, stores: [A-Za-z0-9_-]+ */
int ks_cfg_is_name(const char *s);
#define is_name(s) ks_cfg_is_name(s)
/* application: [A-Za-z0-9._-]+ */
int ks_cfg_is_app(const char *s);
#define is_app(s) ks_cfg_is_app(s)
/* Kafka topic: [A-Za-z0-9._-]{1,249}, not "." or ".." */
int ks_cfg_is_topic(const char *s);
#define is_topic(s) ks_cfg_is_topic(s)
/* host:port, host non-empty ("[v6]" allowed), port 1..65535 */
int ks_cfg_is_host_port(const char *s);
#define is_host_port(s) ks_cfg_is_host_port(s)
/* Split "plugin<sep>rest" at the first '.' (or ':' when colon_ok) into
 * freshly allocated parts; a text without separator gives plugin = rest =
 * text when single_ok. Returns 0, -1 malformed, -2 out of memory. */
int ks_cfg_split_ref(const char *text, int colon_ok, int single_ok, char **plugin,
                     char **rest);
#define split_ref(...) ks_cfg_split_ref(__VA_ARGS__)

/* ------------------------------------------------------------------ */
/* Mappings with a fixed set of keys (config_schema.c)                 */
/* ------------------------------------------------------------------ */

#define MAX_FIELDS 24

typedef struct fields {
    const ks_ynode *key[MAX_FIELDS];
    const ks_ynode *val[MAX_FIELDS];
} fields;

/* Check that every key of `map` is one of `names` and collect the pairs
 * (f->key[i], f->val[i] for names[i]; NULL when absent). `what` names the
 * mapping in messages ("node", "source 'views'"). */
int ks_cfg_take_fields(pctx *c, const ks_ynode *map, const char *what,
                       const char *const *names, size_t n, fields *f);
#define take_fields(...) ks_cfg_take_fields(__VA_ARGS__)

/* "<what> is missing required key '<key>'" at `map`; returns -1. */
int ks_cfg_missing(pctx *c, const ks_ynode *map, const char *what, const char *key);
#define missing(c, map, what, key) ks_cfg_missing(c, map, what, key)

/* ------------------------------------------------------------------ */
/* Values (config_schema.c): `kn` is the key, named in messages        */
/* ------------------------------------------------------------------ */

/* A non-null scalar; `expected` words the message ("a string"). */
int ks_cfg_want_scalar(pctx *c, const ks_ynode *kn, const ks_ynode *v,
                       const char *expected);
#define want_scalar(...) ks_cfg_want_scalar(__VA_ARGS__)
/* A non-empty string into *out (the old value freed). */
int ks_cfg_want_string(pctx *c, const ks_ynode *kn, const ks_ynode *v, char **out);
#define want_string(...) ks_cfg_want_string(__VA_ARGS__)
/* An integer in lo..hi. */
int ks_cfg_want_int(pctx *c, const ks_ynode *kn, const ks_ynode *v, int64_t lo,
                    int64_t hi, int64_t *out);
#define want_int(...) ks_cfg_want_int(__VA_ARGS__)
/* true/yes/on or false/no/off, any case. */
int ks_cfg_want_bool(pctx *c, const ks_ynode *kn, const ks_ynode *v, int *out);
#define want_bool(...) ks_cfg_want_bool(__VA_ARGS__)
/* bytes, string, json or int64. */
int ks_cfg_want_serde(pctx *c, const ks_ynode *kn, const ks_ynode *v, ks_serde *out);
#define want_serde(...) ks_cfg_want_serde(__VA_ARGS__)
/* A valid topic name into *out. */
int ks_cfg_want_topic(pctx *c, const ks_ynode *kn, const ks_ynode *v, char **out);
#define want_topic(...) ks_cfg_want_topic(__VA_ARGS__)
/* A mapping, or (null_ok) nothing. Returns 1 for a null value. */
int ks_cfg_want_map(pctx *c, const ks_ynode *kn, const ks_ynode *v, int null_ok);
#define want_map(...) ks_cfg_want_map(__VA_ARGS__)
/* A list, or (null_ok) nothing. Returns 1 for a null value. */
int ks_cfg_want_seq(pctx *c, const ks_ynode *kn, const ks_ynode *v, int null_ok);
#define want_seq(...) ks_cfg_want_seq(__VA_ARGS__)
/* A list of non-empty strings, or one string (a one-item list); null gives
 * an empty list. *out (and *marks when not NULL) are allocated, owned by
 * the caller even on error. */
int ks_cfg_want_strings(pctx *c, const ks_ynode *kn, const ks_ynode *v,
                        const char *expected, char ***out, ks_mark **marks,
                        size_t *count);
#define want_strings(...) ks_cfg_want_strings(__VA_ARGS__)
/* A mapping of scalars (config:, window:, properties:); null = empty. With
 * `nested`, a value may be a mapping or list, kept as its JSON text. */
int ks_cfg_want_scalars(pctx *c, const ks_ynode *kn, const ks_ynode *v,
                        ks_cfg_scalars *out, int nested);
#define want_scalars(...) ks_cfg_want_scalars(__VA_ARGS__)
/* A duration greater than 0 ("30s"). */
int ks_cfg_want_duration(pctx *c, const ks_ynode *kn, const ks_ynode *v, int64_t *ms);
#define want_duration(...) ks_cfg_want_duration(__VA_ARGS__)
/* A listen address as the server will bind it (ks_parse_listen). */
int ks_cfg_want_listen(pctx *c, const ks_ynode *kn, const ks_ynode *v, char **out);
#define want_listen(...) ks_cfg_want_listen(__VA_ARGS__)
/* The limits keys shared by `outbox:` and `metrics:` (max_connections,
 * idle_timeout, connection_deadline), any of them NULL. */
int ks_cfg_want_limits(pctx *c, const ks_ynode *const kn[3], const ks_ynode *const v[3],
                       ks_cfg_http_limits *l);
#define want_limits(...) ks_cfg_want_limits(__VA_ARGS__)

/* ------------------------------------------------------------------ */
/* Sections (config_graph.c, config_outbox.c)                          */
/* ------------------------------------------------------------------ */

/* A store with defaults appended to the pipeline (declared: written under
 * `stores:`); NULL after reporting out of memory. */
ks_cfg_store *ks_cfg_store_add(pctx *c, const ks_ynode *at, const char *name,
                               ks_mark mark, int declared);
#define store_add(...) ks_cfg_store_add(__VA_ARGS__)

/* The top-level keys of the same names; `kn` is the key, `v` its value. */
int ks_cfg_parse_stores(pctx *c, const ks_ynode *kn, const ks_ynode *v);
#define parse_stores(c, kn, v) ks_cfg_parse_stores(c, kn, v)
int ks_cfg_parse_sources(pctx *c, const ks_ynode *kn, const ks_ynode *v);
#define parse_sources(c, kn, v) ks_cfg_parse_sources(c, kn, v)
int ks_cfg_parse_tables(pctx *c, const ks_ynode *kn, const ks_ynode *v);
#define parse_tables(c, kn, v) ks_cfg_parse_tables(c, kn, v)
int ks_cfg_parse_global_tables(pctx *c, const ks_ynode *kn, const ks_ynode *v);
#define parse_global_tables(c, kn, v) ks_cfg_parse_global_tables(c, kn, v)
int ks_cfg_parse_nodes(pctx *c, const ks_ynode *kn, const ks_ynode *v);
#define parse_nodes(c, kn, v) ks_cfg_parse_nodes(c, kn, v)
int ks_cfg_parse_sinks(pctx *c, const ks_ynode *kn, const ks_ynode *v);
#define parse_sinks(c, kn, v) ks_cfg_parse_sinks(c, kn, v)
int ks_cfg_parse_outbox(pctx *c, const ks_ynode *kn, const ks_ynode *v);
#define parse_outbox(c, kn, v) ks_cfg_parse_outbox(c, kn, v)

/* ------------------------------------------------------------------ */
/* Cross checks (config_checks.c), run in this order by parse_top      */
/* ------------------------------------------------------------------ */

/* Each foreign-key join node (`type: join.fk`) unfolded into the three
 * nodes of its protocol (config_fk.c): appended NAME-subscribe and
 * NAME-register, the node itself becoming the resolver. 0, or -1 with
 * FILE:LINE:COL (a left or right side that is not a table, a missing
 * `right:` or `foreign_key:`, `table:` or `store:` set). */
int ks_cfg_expand_fk_joins(pctx *c);
#define expand_fk_joins(c) ks_cfg_expand_fk_joins(c)
/* Names unique among sources, nodes and sinks. */
int ks_cfg_check_names(pctx *c);
#define check_names(c) ks_cfg_check_names(c)
/* Node and sink inputs exist; no input or store listed twice. */
int ks_cfg_check_refs(pctx *c);
#define check_refs(c) ks_cfg_check_refs(c)
/* No cycle among nodes. */
int ks_cfg_check_cycles(pctx *c);
#define check_cycles(c) ks_cfg_check_cycles(c)
/* The stores a node may read: its `table:`'s first (plugins find it as
 * their first store), then those of the tables it reads in `from:`, in
 * that order (a table-table join looks both up). A node with one is keyed
 * (repartition.h). */
int ks_cfg_link_tables(pctx *c);
#define link_tables(c) ks_cfg_link_tables(c)
/* Stores named by nodes but not declared: added with defaults. */
int ks_cfg_add_used_stores(pctx *c);
#define add_used_stores(c) ks_cfg_add_used_stores(c)
/* A declared store that no node names is an error. */
int ks_cfg_check_unused_stores(pctx *c);
#define check_unused_stores(c) ks_cfg_check_unused_stores(c)

#endif
