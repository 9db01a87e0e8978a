/*
 * ops_pred.h - predicates of the ops plugin (filter, branch): compiled once
 * from the JSON text of a node's config, evaluated per record without
 * parsing the record (json_ptr.h). Grammar and meaning: docs/operators.md.
 *
 *   PRED := { path: POINTER, OP: OPERAND }   one OP per leaf
 *         | { all: [PRED, ...] } | { any: [PRED, ...] } | { not: PRED }
 *   OP   := eq ne lt le gt ge (or == != < <= > >=), exists, contains,
 *           prefix, in, is
 */
#ifndef KS_OPS_PRED_H
#define KS_OPS_PRED_H

#include <stddef.h>

#include "json/json_ptr.h"

/* Nesting of all/any/not beyond this is refused at compile time, which
 * bounds the evaluator's recursion. */
#define KS_PRED_MAX_DEPTH 32

typedef struct ks_pred ks_pred;

/* A growable byte buffer owned by a processor instance: decoded strings,
 * built values. Allocates only when a record needs more than any before. */
typedef struct ks_scratch {
    char *data;
    size_t len, cap;
} ks_scratch;

int ks_scratch_reserve(ks_scratch *s, size_t need);
int ks_scratch_add(ks_scratch *s, const void *data, size_t n);
void ks_scratch_free(ks_scratch *s);

/* Why a config was refused: `at` is the place inside the config value
 * (member names and indexes joined by '/', "" for the value itself),
 * `what` the reason, `msg` both: "at /all/1: unknown key 'eqq' ...". */
typedef struct ks_cfg_err {
    char at[256];
    char what[400];
    char msg[700];
} ks_cfg_err;

/* Record a config error at `at` (a JSON pointer into the config value).
 * Returns -1. */
int ks_cfg_fail(ks_cfg_err *err, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Compile the predicate `in` (a span of config JSON); `at` is its place
 * for messages. 0 and *out (free with ks_pred_free), or -1 and err. */
int ks_pred_compile(const ks_json_span *in, const char *at, ks_pred **out,
                    ks_cfg_err *err);

/* Compile the predicate of config text `text` (JSON, as the host renders
 * a nested config value). */
int ks_pred_compile_text(const char *text, ks_pred **out, ks_cfg_err *err);

void ks_pred_free(ks_pred *p);

/* Evaluate `p` on the value `doc` (NULL: no value, a tombstone: every
 * path is missing). 1 true, 0 false, -1 out of memory. */
int ks_pred_eval(const ks_pred *p, const ks_json_span *doc, ks_scratch *scratch);

#endif /* KS_OPS_PRED_H */
