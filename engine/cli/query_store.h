/*
 * query_store.h - the reading half of `kstreams query` (query_store.c):
 * one partition's store read read-only and printed as the query asks.
 * cmd_query.c fills a ks_query from the command line and calls
 * ks_query_partition for each partition.
 */
#ifndef KS_CLI_QUERY_STORE_H
#define KS_CLI_QUERY_STORE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/exit_codes.h"
#include "kstreams/kstreams.h"
#include "window/window_core.h"

/* A byte string given on the command line (text or hex); data owned by
 * whoever filled it. */
typedef struct ks_query_bytes {
    unsigned char *data;
    size_t len;
    int set;
} ks_query_bytes;

/* One query: what to read, how to print it, and the reading's state. */
typedef struct ks_query {
    const char *store;
    int json;
    int int64;
    int hex;    /* --hex: every key and value as hex */
    int ms;     /* --time-format ms: window bounds as epoch ms in text */
    int single; /* --key / --key-hex: no key column (text), one object (json, unwindowed) */
    FILE *out;
    json_t *array;     /* json output being built (owned) */
    int32_t partition; /* being read */
    size_t found;
    int nomem;

    /* filters */
    const ks_query_bytes *key;         /* one key, or NULL */
    const ks_query_bytes *kfrom, *kto; /* key range [kfrom, kto); either may be unset */
    int64_t tfrom, tto;                /* window start in [tfrom, tto] */

    /* windowed store */
    ks_win_kind kind;
    int64_t size, retention;
    int64_t stream_time; /* of the partition being read; INT64_MIN: none yet */
    /* sliding: the raw record times of the key being collected (ts owned) */
    unsigned char cur_key[KS_KEY_MAX];
    size_t cur_len;
    int have_cur;
    int64_t *ts;
    size_t nts, capts;
} ks_query;

/* Valid UTF-8 that cannot move the cursor or change how a terminal shows
 * what follows (1), or not (0): such bytes are printed as hex. */
int ks_query_printable(const unsigned char *p, size_t n);

/* The partitions P of the task-P directories in `base`, sorted, into
 * *parts (the caller frees it; NULL when none). 0, or -1 when `base`
 * cannot be read. */
int ks_query_list_partitions(const char *base, int32_t **parts, size_t *count);

/* Read store q->store of the task directory `dir` read-only and print (or,
 * in json, collect in q->array) what q selects. KS_EXIT_OK, setting
 * *missing when the partition has no environment or no such store;
 * KS_EXIT_FAILURE with the reason on errf when it cannot be read. */
ks_exit ks_query_partition(ks_query *q, const char *dir, int *missing, FILE *errf);

#endif /* KS_CLI_QUERY_STORE_H */
