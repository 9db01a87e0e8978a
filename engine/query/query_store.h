/*
 * query_store.h - the reading half of `kstreams query` and of the query
 * server (query_store.c): one partition's store read read-only and printed
 * (or collected as JSON) as the query asks. cmd_query.c fills a ks_query
 * from the command line and calls ks_query_partition for each partition
 * of the local state directory; the engine's query server
 * (runtime/query_server.c) fills one from a request and calls
 * ks_query_read on a snapshot of a task it runs.
 */
#ifndef KS_CLI_QUERY_STORE_H
#define KS_CLI_QUERY_STORE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kstreams/kstreams.h"
#include "state/store.h"
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
    ks_store_snap *snap; /* read through this snapshot (another thread's env), or NULL */
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
 * in json, collect in q->array) what q selects. 0, setting *missing when
 * the partition has no environment or no such store; -1 with the reason
 * on errf when it cannot be read. */
int ks_query_partition(ks_query *q, const char *dir, int *missing, FILE *errf);

/* Read what q selects from `db` (through q->snap when set) and print or
 * collect it, with q->partition as the partition. 0, or a negative ks_err
 * (KS_ERR_NOMEM when a result could not be held). */
int ks_query_read(ks_query *q, ks_store_db *db);

#endif /* KS_CLI_QUERY_STORE_H */
