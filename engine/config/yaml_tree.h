/*
 * yaml_tree.h - a neutral tree of YAML nodes with their marks.
 *
 * ks_ydoc_parse() runs libyaml's document loader over a text and copies the
 * result into plain structs: scalars as NUL-terminated text, sequences as
 * arrays of nodes, mappings as arrays of key/value pairs, each node with
 * the 1-based line and column where it starts. Nothing here knows what a
 * pipeline is; config.c maps the tree onto ks_pipeline.
 *
 * Aliases are not expanded: an alias is the same ks_ynode as its anchor, so
 * the tree is a graph (possibly cyclic, `&a [*a]`) and never grows beyond
 * the number of nodes written. Walk it to a bounded depth.
 *
 * Checked here, for every mapping: no two scalar keys with the same text.
 */
#ifndef KS_YAML_TREE_H
#define KS_YAML_TREE_H

#include <stddef.h>

typedef enum ks_ykind {
    KS_Y_SCALAR = 1,
    KS_Y_SEQ,
    KS_Y_MAP
} ks_ykind;

typedef struct ks_ynode ks_ynode;

typedef struct ks_ypair {
    ks_ynode *key;
    ks_ynode *value;
} ks_ypair;

struct ks_ynode {
    ks_ykind kind;
    int line; /* 1-based */
    int col;  /* 1-based, in characters */
    /* KS_Y_SCALAR */
    char *text;  /* NUL-terminated, as written (after YAML unescaping) */
    size_t len;
    int plain;   /* written unquoted (plain style) */
    /* KS_Y_SEQ: items; KS_Y_MAP: pairs; `count` of either */
    ks_ynode **items;
    ks_ypair *pairs;
    size_t count;
};

typedef struct ks_ydoc {
    ks_ynode *root;  /* NULL: the text holds no document */
    ks_ynode *nodes; /* all nodes; root is nodes[0] */
    size_t node_count;
} ks_ydoc;

/* Where and what a parse error is. */
typedef struct ks_yerr {
    int line; /* 1-based */
    int col;  /* 1-based */
    char msg[256];
} ks_yerr;

/*
 * Parse `text` (len bytes, UTF-8/16 as libyaml reads it) holding at most
 * one YAML document. On success returns 0 and fills *doc (free with
 * ks_ydoc_free; doc->root is NULL when the text has no document). On error
 * returns -1, *doc is empty and `err` says where and what:
 *   "YAML syntax error: <libyaml's problem>"
 *   "expected one YAML document, found a second one"
 *   "duplicate key 'K'; first defined at line N"
 *   "a scalar contains a NUL character"
 *   "out of memory"
 */
int ks_ydoc_parse(const char *text, size_t len, ks_ydoc *doc, ks_yerr *err);

/* Free what ks_ydoc_parse allocated. Safe on a zeroed or freed doc. */
void ks_ydoc_free(ks_ydoc *doc);

/* True for a plain scalar that YAML reads as null: "", "~", "null",
 * "Null", "NULL". */
int ks_ynode_is_null(const ks_ynode *n);

/* The value of `key` in mapping `map`, or NULL (also when map is not a
 * mapping). */
const ks_ynode *ks_ynode_get(const ks_ynode *map, const char *key);

/* Nesting beyond this is refused by ks_ynode_json (and bounds its
 * recursion; an alias may make the tree cyclic). */
#define KS_YJSON_MAX_DEPTH 32

/* Called by ks_ynode_json for every node it renders: `path` is where the
 * node sits, member names and indexes joined by '/' as written (not
 * escaped; "" for `n` itself), line and col where it starts (a member: its
 * key). Returns 0, or -1 to stop (out of memory). */
typedef int (*ks_yjson_at_fn)(void *arg, const char *path, int line, int col);

/*
 * Render `n` as compact JSON text: mappings as objects (keys must be
 * scalars; they become strings), sequences as arrays; a plain scalar that
 * YAML reads as null, true or false, or that is a JSON number, as that;
 * every other scalar (and every quoted one) as a string. `at` (may be
 * NULL) learns where each node was written. Returns 0 and *out (malloc'd,
 * NUL-terminated; the caller frees it), or -1 with *bad the offending node
 * and `why` (whylen bytes) the reason.
 */
int ks_ynode_json(const ks_ynode *n, char **out, const ks_ynode **bad, char *why,
                  size_t whylen, ks_yjson_at_fn at, void *arg);

#endif /* KS_YAML_TREE_H */
