/*
 * kstreams.h - the plugin ABI of kstreams, the only header a plugin includes.
 *
 * A plugin is a shared object that exports ONE symbol, `ks_plugin_entry`
 * (see KS_PLUGIN_ENTRY below). The engine calls it with the host API table
 * and receives a static descriptor naming the processor types and functions
 * the plugin offers. A plugin never links against the engine: everything it
 * may ask of the host is in `ks_host_api`.
 *
 * ABI rules
 *  - KS_ABI_MAJOR changes only when an existing struct, function or meaning
 *    changes. The engine refuses a plugin of another major.
 *  - KS_ABI_MINOR grows when something is APPENDED (a host API member, a
 *    descriptor field). The engine refuses a plugin built against a newer
 *    minor than its own; it accepts older minors. Every table carries its
 *    own `struct_size`, so each side can tell which members the other has.
 *
 * Ownership rules (they hold everywhere unless a function says otherwise)
 *  - Borrowed in: pointers the host hands a plugin (records, store values,
 *    config strings) are valid until the moment each function names, and the
 *    plugin must not free or modify them.
 *  - Copied out: whatever a plugin hands the host (forwarded records, store
 *    keys and values, output buffers) is copied before the call returns; the
 *    plugin keeps ownership and may reuse or free it at once.
 *  - No string crosses the boundary that the other side must free.
 *
 * Threads: a processor instance (one per task) is only ever called from one
 * thread at a time; different instances of one type may run concurrently on
 * different threads. Named functions must be reentrant.
 *
 * ABI changelog
 *  1.0  first version.
 *  1.1  ks_host_api.application_id (the application id = the consumer group;
 *       the mailbox's idempotency ledger keys on it).
 *  1.2  ks_host_api.outbox_enqueue (hand the outbox an event, atomically
 *       with the processor's store writes).
 *  1.3  JSON without a JSON library: ks_host_api.json_find, json_string,
 *       json_int64, json_double, json_iter_init, json_iter_next (read a
 *       value in place) and json_writer, json_put_*, json_finish (build an
 *       object in a host buffer); the types ks_json_span and ks_json_iter.
 *  1.4  KS_FN_JOINER, ks_joiner_fn: the joiner of the shipped `join`
 *       (docs/tables-and-joins.md); plugins of 1.0-1.3 load as before.
 *  1.5  ks_host_api.input_name: which of a node's inputs (`from:`) the
 *       record in process() came from (the stream-stream join tells its
 *       two sides apart by it); plugins of 1.0-1.4 load as before.
 *  1.6  ks_host_api.store_values and ks_store_values: what a store's values
 *       hold (a table's: timestamp and value; a node's read as its table:
 *       as that node wrote them; a shipped count's: an int64); and
 *       KS_FN_KEY_MAPPER, ks_key_mapper_fn: a key computed from a record,
 *       for the lookup key of the shipped `join` against a global table
 *       and the foreign key of `join.fk`; and
 *       ks_host_api.input_serde and child_serde, the type ks_serde_kind:
 *       the serdes (json, string, int64, bytes) of the records a node
 *       reads and of those each child takes, so that a plugin need not ask
 *       the user whether 8 bytes are an int64 or text; and
 *       ks_host_api.skip_reason: why a record is poison, for the log
 *       and the dead letter; ks_host_api.input_checked: whether the
 *       engine has checked the values' bytes against a json serde before
 *       process(); and
 *       KS_PROC_CACHEABLE: the engine may fold a node's updates of a key
 *       within a commit (the record cache, `cache_bytes`); plugins of
 *       1.0-1.5 load as before, without a cache.
 *  1.7  the mailbox's idempotency ledger in PostgreSQL and its handler's
 *       SQL in the same transaction: ks_host_api.ledger_open,
 *       ledger_begin, ledger_commit, ledger_rollback, ledger_close (for
 *       the shipped `mailbox`), sql_exec, sql_rows, sql_cols, sql_value,
 *       sql_free (for handlers) and the type ks_sql_result; plugins of
 *       1.0-1.6 load as before.
 */
#ifndef KSTREAMS_KSTREAMS_H
#define KSTREAMS_KSTREAMS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KS_ABI_MAJOR 1
#define KS_ABI_MINOR 7

/* "KSPL" - first field of every plugin descriptor. */
#define KS_PLUGIN_MAGIC 0x4b53504cu

/* Name of the one symbol a plugin exports. */
#define KS_PLUGIN_ENTRY_SYMBOL "ks_plugin_entry"

/* Build id compiled into a plugin; override with -DKS_BUILD_ID="\"...\"". */
#ifndef KS_BUILD_ID
#define KS_BUILD_ID __DATE__ " " __TIME__
#endif

#if defined(__GNUC__)
#define KS_EXPORT __attribute__((visibility("default")))
#define KS_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define KS_EXPORT
#define KS_PRINTF(f, a)
#endif

/* ------------------------------------------------------------------ */
/* Results                                                             */
/* ------------------------------------------------------------------ */

/* The longest store key in bytes (LMDB's own limit is 511; the rest is
 * kept for the engine's prefixes). Store keys are 1..KS_KEY_MAX bytes. */
#define KS_KEY_MAX 500

/* Host API calls return 0 or one of these negative codes. */
enum ks_err {
    KS_ERR_NOT_FOUND = -1,  /* key, store, config key or function absent   */
    KS_ERR_INVALID = -2,    /* bad argument (NULL, wrong type, bad format) */
    KS_ERR_NOMEM = -3,      /* allocation failed                           */
    KS_ERR_STATE = -4,      /* not allowed in this phase (e.g. put in close)*/
    KS_ERR_TOO_LARGE = -5,  /* key over KS_KEY_MAX bytes, value over limits*/
    KS_ERR_STORE_FULL = -6, /* store map full: raise the store's map_size  */
    KS_ERR_IO = -7,         /* storage or Kafka failure; the batch aborts  */
    KS_ERR_UNSUPPORTED = -8 /* the host does not offer this               */
};

/* What a processor callback tells the engine to do next. */
typedef enum ks_verdict {
    KS_OK = 0,    /* done, go on                                          */
    KS_RETRY = 1, /* transient failure: abort the batch, replay it        */
    KS_SKIP = 2,  /* poison record: apply the pipeline's poison policy    */
    KS_FATAL = 3  /* stop the task with an error naming the record        */
} ks_verdict;

typedef enum ks_log_level {
    KS_LOG_ERROR = 0,
    KS_LOG_WARN = 1,
    KS_LOG_INFO = 2,
    KS_LOG_DEBUG = 3
} ks_log_level;

/* ------------------------------------------------------------------ */
/* Records                                                             */
/* ------------------------------------------------------------------ */

/* A byte string. Borrowed unless a function says otherwise. */
typedef struct ks_bytes {
    const void *data; /* may be NULL when len == 0 */
    size_t len;
} ks_bytes;

typedef struct ks_header {
    const char *name; /* NUL-terminated */
    const void *value;
    size_t value_len;
} ks_header;

/*
 * A record view. Passed to process(): every pointer in it is borrowed and
 * valid until process() returns. Passed to forward(): the host copies what
 * it needs before forward() returns.
 * A NULL `value` with value_len 0 is a tombstone (delete).
 * Keys and values are bytes in the wire format of the source's serde:
 * string/json as UTF-8 text (not NUL-terminated), int64 as 8 bytes
 * big-endian (Kafka's LongSerializer).
 */
typedef struct ks_record {
    const void *key;
    size_t key_len;
    const void *value;
    size_t value_len;
    int64_t timestamp; /* ms since epoch (event time)                     */
    const char *topic; /* source topic; NULL for records made by a node   */
    int32_t partition; /* -1 when not from a topic                        */
    int64_t offset;    /* -1 when not from a topic                        */
    const ks_header *headers;
    size_t header_count;
} ks_record;

/* ------------------------------------------------------------------ */
/* Opaque host objects                                                 */
/* ------------------------------------------------------------------ */

/* One processor instance's view of its task. Valid from init() until
 * close() returns. Never store it beyond that. */
typedef struct ks_ctx ks_ctx;

/* A store of the task, obtained with ks_host_api.store(). Same lifetime as
 * the ks_ctx it came from. */
typedef struct ks_store ks_store;

/* A host-owned output buffer handed to named functions; fill it with
 * ks_host_api.buf_set(). */
typedef struct ks_buf ks_buf;

/* The rows of one SQL statement run with sql_exec (ABI 1.7). Owned by the
 * caller of sql_exec: free it with sql_free. */
typedef struct ks_sql_result ks_sql_result;

typedef enum ks_time_kind {
    KS_TIME_STREAM = 0,   /* advances with record timestamps of the task */
    KS_TIME_WALLCLOCK = 1 /* the host's clock                            */
} ks_time_kind;

/* Range scan callback: key and value are borrowed until the callback
 * returns. Return 0 to continue, non-zero to stop the scan. */
typedef int (*ks_range_cb)(void *arg, ks_bytes key, ks_bytes value);

/* ------------------------------------------------------------------ */
/* Named functions (aggregate, reduce, windows, mailbox handlers)      */
/* ------------------------------------------------------------------ */

typedef struct ks_host_api ks_host_api;

typedef enum ks_function_kind {
    KS_FN_INITIALIZER = 1, /* ks_initializer_fn */
    KS_FN_AGGREGATOR = 2,  /* ks_aggregator_fn  */
    KS_FN_REDUCER = 3,     /* ks_reducer_fn     */
    KS_FN_MERGER = 4,      /* ks_merger_fn      */
    KS_FN_HANDLER = 5,     /* ks_handler_fn     */
    KS_FN_JOINER = 6,      /* ks_joiner_fn (ABI 1.4) */
    KS_FN_KEY_MAPPER = 7   /* ks_key_mapper_fn (ABI 1.6) */
} ks_function_kind;

/* Write the initial aggregate for `key` into `out`. */
typedef ks_verdict (*ks_initializer_fn)(const ks_host_api *api, ks_bytes key,
                                        ks_buf *out);
/* Fold `value` into `agg`; write the new aggregate into `out`. */
typedef ks_verdict (*ks_aggregator_fn)(const ks_host_api *api, ks_bytes key,
                                       ks_bytes value, ks_bytes agg,
                                       ks_buf *out);
/* Combine the accumulated `acc` with `value`; write the result to `out`. */
typedef ks_verdict (*ks_reducer_fn)(const ks_host_api *api, ks_bytes key,
                                    ks_bytes acc, ks_bytes value, ks_buf *out);
/* Merge two session aggregates `a` and `b` into `out`. */
typedef ks_verdict (*ks_merger_fn)(const ks_host_api *api, ks_bytes key,
                                   ks_bytes a, ks_bytes b, ks_buf *out);
/* Handle one command record; write a result payload into `out`. KS_OK
 * records SUCCESS, KS_SKIP records PUSHED_FAILURE. */
typedef ks_verdict (*ks_handler_fn)(ks_ctx *ctx, const ks_record *command,
                                    ks_buf *out);
/* Join a stream record's value `left` with the table's value for `key`:
 * `right` is NULL when the table has none (left joins only; in a
 * table-table join `left.data` is NULL when the left table has none, outer
 * joins only). Write the
 * joined value into `out`; KS_SKIP drops the record as poison (the
 * pipeline's poison policy), KS_OK with `out` never set forwards a
 * tombstone. All borrowed until return. ABI 1.4. */
typedef ks_verdict (*ks_joiner_fn)(const ks_host_api *api, ks_bytes key,
                                   ks_bytes left, const ks_bytes *right,
                                   ks_buf *out);
/* Compute a key from a record with `key` and `value` (`value.data` NULL
 * for a tombstone): the lookup key of the shipped `join` against a global
 * table (`functions: { key: ... }`) or the foreign key of `join.fk`
 * (`functions: { foreign_key: ... }`). Write the key into `out` and
 * return KS_OK; KS_OK with `out` left empty means the record has none (no
 * match: an inner join drops it, a left join keeps it with no right
 * side); KS_SKIP makes it poison (the pipeline's poison policy); KS_RETRY
 * retries the batch. All borrowed until return. ABI 1.6. */
typedef ks_verdict (*ks_key_mapper_fn)(const ks_host_api *api, ks_bytes key,
                                       ks_bytes value, ks_buf *out);

typedef struct ks_function {
    const char *name;
    ks_function_kind kind;
    void (*fn)(void); /* cast to the kind's type; the host casts back */
} ks_function;

/* ------------------------------------------------------------------ */
/* Processor types                                                     */
/* ------------------------------------------------------------------ */

typedef enum ks_config_type {
    KS_CONFIG_STRING = 1,
    KS_CONFIG_INT = 2,    /* int64                                        */
    KS_CONFIG_DOUBLE = 3,
    KS_CONFIG_BOOL = 4,
    KS_CONFIG_DURATION = 5 /* "250ms", "10s", "5m", "1h", "2d" or ms int   */
} ks_config_type;

/* One key a processor type accepts under its node's `config:`. The host
 * validates the YAML against this schema before any instance is created:
 * unknown keys, wrong types and missing required keys are errors naming
 * file:line:column. */
typedef struct ks_config_field {
    const char *name;
    ks_config_type type;
    int required;              /* non-zero: the node must set it     */
    const char *default_value; /* as YAML text; NULL for none        */
    const char *description;
} ks_config_field;

/* Flags of a processor type. */
#define KS_PROC_NEEDS_STORE 0x1u     /* the node must name at least one store */
#define KS_PROC_KEYED 0x2u           /* state is per record key: input must be
                                        partitioned by key                      */
#define KS_PROC_NEEDS_FUNCTIONS 0x4u /* the node must name `functions:`       */
#define KS_PROC_CHANGES_KEY 0x8u     /* forwards records under other keys than
                                        its input's: a KEYED node (or one with
                                        a store) downstream reads them through
                                        a repartition topic the engine adds  */
#define KS_PROC_CACHEABLE 0x10u      /* (1.6) process() writes its store under
                                        the record's key and forwards that
                                        key's new value, each update
                                        superseding the ones before: unless
                                        windowed, the engine may keep a key's
                                        updates in a record cache and pass on
                                        fewer of them, the latest at the
                                        latest by the commit (the changelog
                                        record and the forward; on by
                                        default since 1.7's engine;
                                        docs/stores.md, `cache_bytes`)        */

typedef struct ks_processor_type {
    size_t struct_size; /* sizeof(ks_processor_type) at build time */
    const char *name;   /* unique within the plugin                */
    const char *description;
    uint32_t flags; /* KS_PROC_*                                   */
    const ks_config_field *config;
    size_t config_count;
    /* Version of the state format this type writes in its stores. The
     * engine keeps each store's version with the store (and its
     * changelog): a build with a newer version must bring `migrate`, a
     * build with an older one is refused (no downgrade). */
    uint32_t state_version;

    /* Create an instance for one task. Read config, look up stores and
     * functions, schedule punctuations; store the instance in *state.
     * Return KS_OK, or KS_FATAL after logging why (the engine refuses to
     * start the task, or refuses a hot swap and keeps the old build). */
    ks_verdict (*init)(ks_ctx *ctx, void **state);

    /* Process one record. `rec` is borrowed until return. Required. */
    ks_verdict (*process)(ks_ctx *ctx, void *state, const ks_record *rec);

    /* A scheduled punctuation fired at time `now` (ms) of `kind`. May be
     * NULL when the type schedules none. */
    ks_verdict (*punctuate)(ks_ctx *ctx, void *state, ks_time_kind kind,
                            int64_t now);

    /* Release the instance. Stores may be read but not written. The host
     * calls it once per successful init. May be NULL. */
    void (*close)(ks_ctx *ctx, void *state);

    /* Migrate this instance's stores from state format `from_version` (the
     * version the stores hold) to `state_version`. Runs when a task opens
     * on older stores (start, rebalance, restore, hot swap), in the task's
     * first batch before any record, in one transaction with the version
     * bump: rolled back with the batch and run again, committed exactly
     * once. KS_RETRY aborts the batch, KS_FATAL stops the engine. NULL: no
     * migration offered. */
    ks_verdict (*migrate)(ks_ctx *ctx, uint32_t from_version);
} ks_processor_type;

/* ------------------------------------------------------------------ */
/* The plugin descriptor                                               */
/* ------------------------------------------------------------------ */

typedef struct ks_plugin_descriptor {
    uint32_t magic;       /* KS_PLUGIN_MAGIC                          */
    uint32_t struct_size; /* sizeof(ks_plugin_descriptor)             */
    uint16_t abi_major;   /* KS_ABI_MAJOR the plugin was built with   */
    uint16_t abi_minor;   /* KS_ABI_MINOR the plugin was built with   */
    const char *name;     /* plugin name: [a-z0-9_]+, used in YAML    */
    const char *version;  /* free text, e.g. "1.2.0"                  */
    const char *build_id; /* unique per build, e.g. KS_BUILD_ID       */
    const ks_processor_type *const *processors;
    size_t processor_count;
    const ks_function *functions;
    size_t function_count;
} ks_plugin_descriptor;

/* Fill a descriptor with the fields that come from this header. */
#define KS_DESCRIPTOR_HEADER                                                 \
    KS_PLUGIN_MAGIC, (uint32_t)sizeof(ks_plugin_descriptor), KS_ABI_MAJOR,   \
        KS_ABI_MINOR

/*
 * The entry point. The plugin defines it as
 *
 *   KS_EXPORT const ks_plugin_descriptor *
 *   ks_plugin_entry(const ks_host_api *api) { return &my_descriptor; }
 *
 * It must have no side effects beyond returning a pointer to static data:
 * the host checks the descriptor before calling anything else, and may call
 * the entry of a build that it then refuses. Each load runs it, and the
 * plugin's ELF constructors, twice: first in a helper process that
 * trial-loads the build (a crash there refuses the build, not the
 * engine), then in the engine. `api` is valid while the
 * plugin is loaded. The returned descriptor must stay valid and unchanged
 * while the plugin is loaded.
 */
typedef const ks_plugin_descriptor *(*ks_plugin_entry_fn)(
    const ks_host_api *api);

/* ------------------------------------------------------------------ */
/* JSON values in place (ABI 1.3)                                      */
/* ------------------------------------------------------------------ */

/* The kind of a JSON value. */
typedef enum ks_json_type {
    KS_JSON_NULL = 1,
    KS_JSON_BOOL,
    KS_JSON_NUMBER,
    KS_JSON_STRING,
    KS_JSON_ARRAY,
    KS_JSON_OBJECT
} ks_json_type;

/* A value inside a JSON text: its bytes as written (a string's span keeps
 * its quotes) and its type. Borrowed from the text it was found in: valid
 * as long as that text is. */
typedef struct ks_json_span {
    const char *data;
    size_t len;
    ks_json_type type;
} ks_json_span;

/* Results of the JSON calls. */
enum ks_json_rc {
    KS_JSON_FOUND = 0,
    KS_JSON_MISSING = 1,       /* no value at that pointer                */
    KS_JSON_BAD_POINTER = -1,  /* not "" nor "/...", or a bad '~' escape  */
    KS_JSON_BAD_TEXT = -2      /* the text is not JSON where it was read  */
};

/* Walks the members of an object or the elements of an array. The plugin
 * owns the struct (on its stack); json_iter_init fills it and only the
 * host reads its fields. Its size and layout are part of the ABI. */
typedef struct ks_json_iter {
    const char *p, *end;
    int object;
    int first;
} ks_json_iter;

/* Builds one JSON object in a buffer the host owns (json_writer). */
typedef struct ks_json_writer ks_json_writer;

/* ------------------------------------------------------------------ */
/* Serdes (ABI 1.6)                                                    */
/* ------------------------------------------------------------------ */

/* The serde of a key or a value, as the YAML names it (`key: string`,
 * `value: json`); see ks_record for the bytes of each. */
typedef enum ks_serde_kind {
    KS_SERDE_KIND_UNKNOWN = 0, /* the host cannot tell (see input_serde) */
    KS_SERDE_KIND_BYTES = 1,
    KS_SERDE_KIND_STRING = 2,
    KS_SERDE_KIND_JSON = 3,
    KS_SERDE_KIND_INT64 = 4
} ks_serde_kind;

/* ------------------------------------------------------------------ */
/* The host API table                                                  */
/* ------------------------------------------------------------------ */

/*
 * Functions the engine offers. Append-only: new members go at the end and
 * bump KS_ABI_MINOR. Before using a member added after 1.0, check
 * KS_API_HAS(api, member).
 *
 * Unless noted, every function taking a ks_ctx may be called from init(),
 * process(), punctuate() and migrate() of the instance owning the ctx, on
 * the thread that called them, and returns 0 or a negative ks_err.
 */
struct ks_host_api {
    uint32_t struct_size; /* sizeof(ks_host_api) of the host */
    uint16_t abi_major;
    uint16_t abi_minor;

    /* --- logging and identity ----------------------------------------- */

    /* Log a line tagged with the task, node and plugin. Any phase. */
    void (*log)(ks_ctx *ctx, ks_log_level level, const char *fmt, ...)
        KS_PRINTF(3, 4);
    /* Name of the node (YAML `name:`); borrowed for the ctx's lifetime. */
    const char *(*node_name)(ks_ctx *ctx);
    /* Task id = the partition number this instance serves. */
    int32_t (*task_id)(ks_ctx *ctx);

    /* --- configuration (validated against ks_processor_type.config) --- */

    /* *out is borrowed for the ctx's lifetime. Unset keys with a default in
     * the schema return the default; unset keys without one: NOT_FOUND. */
    int (*config_string)(ks_ctx *ctx, const char *key, const char **out);
    int (*config_int)(ks_ctx *ctx, const char *key, int64_t *out);
    int (*config_double)(ks_ctx *ctx, const char *key, double *out);
    int (*config_bool)(ks_ctx *ctx, const char *key, int *out);
    /* A DURATION key in milliseconds. */
    int (*config_duration_ms)(ks_ctx *ctx, const char *key, int64_t *out);

    /* --- the graph ---------------------------------------------------- */

    /* Send a record to every child of this node. The host copies what it
     * needs before returning; children run before forward() returns.
     * rec->topic/partition/offset are ignored; rec->timestamp is taken as
     * given (usually the input record's). Returns 0, or a negative ks_err
     * when a child failed (then return KS_RETRY or KS_FATAL). A record a
     * sink's serde refuses gives KS_ERR_INVALID, and whatever process()
     * then returns, the engine aborts the batch and applies the pipeline's
     * poison policy to the input record on the replay. */
    int (*forward)(ks_ctx *ctx, const ks_record *rec);
    /* Same, to the one child named `child` (its YAML node or sink name). */
    int (*forward_to)(ks_ctx *ctx, const char *child, const ks_record *rec);

    /* --- stores ------------------------------------------------------- */

    /* The store named `name` that the node declares, or its first store
     * when name is NULL. *out lives as long as ctx. NOT_FOUND if the node
     * does not declare it. Call from init(). */
    int (*store)(ks_ctx *ctx, const char *name, ks_store **out);
    /* Read key. On 0, *value is borrowed until the next write to any
     * store of this task or until the current callback returns, whichever
     * comes first. NOT_FOUND if absent. */
    int (*store_get)(ks_store *st, ks_bytes key, ks_bytes *value);
    /* Write key = value (both copied). Mirrored to the changelog and
     * committed with the task's transaction. Keys are 1..KS_KEY_MAX bytes.
     * KS_ERR_STATE for the store of a table (the node's `table:`): a
     * table changes only by its topic; its values are the record's
     * timestamp (8 bytes big-endian) then the record's value. KS_ERR_STATE
     * too for another node's store read as that node's table (`table:
     * NODE`): only that node writes it. */
    int (*store_put)(ks_store *st, ks_bytes key, ks_bytes value);
    /* Delete key (a tombstone in the changelog). 0 even if absent. */
    int (*store_delete)(ks_store *st, ks_bytes key);
    /* Visit keys in [from, to) in byte order; an empty `from` means from the
     * first key, an empty `to` means to the last. Do not write to the same
     * store from the callback. Returns 0 or a negative ks_err. */
    int (*store_range)(ks_store *st, ks_bytes from, ks_bytes to, ks_range_cb cb,
                       void *arg);

    /* --- time --------------------------------------------------------- */

    /* Call punctuate(kind, now) every `interval_ms` of `kind` time. One
     * schedule per kind per instance; a new call replaces the old. Call
     * from init(). */
    int (*schedule)(ks_ctx *ctx, ks_time_kind kind, int64_t interval_ms);
    /* Current stream time (largest record timestamp seen by the task) or
     * wall-clock time, in ms. */
    int64_t (*now)(ks_ctx *ctx, ks_time_kind kind);

    /* --- named functions ---------------------------------------------- */

    /* The function the node's YAML names for `role` (e.g. "init", "add"),
     * checked to be of `kind`. *fn must be cast to the kind's type. Lives
     * as long as ctx. Call from init(). */
    int (*function)(ks_ctx *ctx, const char *role, ks_function_kind kind,
                    void (**fn)(void));
    /* Set a host output buffer to a copy of data. For named functions. */
    int (*buf_set)(ks_buf *buf, const void *data, size_t len);
    /* A new empty buffer, owned by the caller: free it with buf_free. For
     * processors that call named functions (aggregate, reduce). NULL when
     * out of memory. Any phase. */
    ks_buf *(*buf_new)(void);
    void (*buf_free)(ks_buf *buf);
    /* The buffer's contents, borrowed until the next buf_set or buf_free. */
    ks_bytes (*buf_get)(const ks_buf *buf);

    /* --- metrics ------------------------------------------------------ */

    /* Add `delta` to the counter `name` ([a-z0-9_]+) of this node/task;
     * exported as kstreams_plugin_<name>_total. */
    int (*metric_add)(ks_ctx *ctx, const char *name, double delta);

    /* --- 1.1 ----------------------------------------------------------- */

    /* The pipeline's `application:` id, which is also the Kafka consumer
     * group of its sources. Borrowed for the ctx's lifetime; NULL for a
     * bad ctx. Any phase. */
    const char *(*application_id)(ks_ctx *ctx);

    /* --- 1.2 ----------------------------------------------------------- */

    /*
     * Hand the pipeline's outbox (`outbox:` in the YAML, named `outbox`)
     * an event for `user` (the canonical user id, 1..200 bytes of text;
     * the Kafka key it is published under) with `payload` (copied; at
     * most the outbox's max_event_bytes). The event commits with this
     * record's batch: under exactly-once it exists iff the processor's
     * store writes and the input offset commit, and a replayed record
     * yields the same event, never a second one. Its id (32 hex digits
     * and a NUL) goes into id_out, which must hold KS_OUTBOX_EVENT_ID_SIZE:
     * the id is derived from the input record's topic, partition and
     * offset and the call's rank within the record, so a replay gets the
     * same id. Only from process(). NOT_FOUND: the pipeline has no
     * outbox of that name; INVALID: bad user/payload/buffer; TOO_LARGE:
     * payload over max_event_bytes or over 1024 events for one record;
     * STATE: not in process(); IO: the event could not be queued (return
     * KS_RETRY); UNSUPPORTED: the outbox is `backend: postgres` (its
     * events come from the application's own transactions). Status:
     * GET /outbox/events/<id> or `kstreams outbox-status`.
     */
    int (*outbox_enqueue)(ks_ctx *ctx, const char *outbox, ks_bytes user, ks_bytes payload,
                          char *id_out, size_t id_len);

    /* ---- ABI 1.3: JSON, read in place and written into a host buffer ----
     * Check KS_API_HAS(api, json_find) before use. None of the read calls
     * allocates or keeps state; any thread may call them. The text should
     * be valid JSON (a source with `value: json` guarantees it); on other
     * text they never read outside it, and may answer KS_JSON_BAD_TEXT. */

    /* The value at RFC 6901 pointer `pointer` (NUL-terminated; "" is the
     * whole text, "/user/name", "/items/0", "~1" for '/' and "~0" for '~'
     * in a name) in the `len` bytes at `json`. *out borrows from `json`.
     * Returns KS_JSON_FOUND, KS_JSON_MISSING (no such member or index, or a
     * token on a scalar), KS_JSON_BAD_POINTER or KS_JSON_BAD_TEXT. */
    int (*json_find)(const void *json, size_t len, const char *pointer, ks_json_span *out);
    /* Decode the string `s` into `out` (`cap` bytes; out may be NULL when
     * cap is 0), UTF-8, no NUL added; *len gets the full decoded length,
     * which may exceed cap (then out holds its first cap bytes). 0, or
     * KS_JSON_BAD_TEXT when `s` is not a valid JSON string. */
    int (*json_string)(const ks_json_span *s, char *out, size_t cap, size_t *len);
    /* The number `s` as an int64: 0 when it is an integer (no fraction or
     * exponent) that fits, else KS_JSON_BAD_TEXT. */
    int (*json_int64)(const ks_json_span *s, int64_t *out);
    /* The number `s` as a double: 0, or KS_JSON_BAD_TEXT when `s` is not a
     * number. A magnitude beyond double's range gives +-HUGE_VAL or 0. */
    int (*json_double)(const ks_json_span *s, double *out);
    /* Start walking the object or array `in` (borrowed, as are the spans
     * json_iter_next gives). KS_JSON_FOUND, or KS_JSON_BAD_TEXT when `in`
     * is neither. */
    int (*json_iter_init)(ks_json_iter *it, const ks_json_span *in);
    /* The next member (its name into *key, a string span; key may be NULL)
     * or element (key unused): 1, 0 at the end, or KS_JSON_BAD_TEXT. */
    int (*json_iter_next)(ks_json_iter *it, ks_json_span *key, ks_json_span *val);

    /* This instance's writer, emptied, with an object opened. One writer
     * per instance: calling json_writer again starts over. NULL when `ctx`
     * is not a valid handle. */
    ks_json_writer *(*json_writer)(ks_ctx *ctx);
    /* Add member `name` (NUL-terminated, escaped by the host) with a value:
     * a string of `len` bytes (UTF-8 expected; escaped by the host), an
     * int64, a double (NaN and infinities are refused), a boolean, null,
     * or a value copied as written (`v`, e.g. a span found with json_find).
     * 0, or KS_ERR_INVALID (bad argument, a non-finite double, a writer
     * already finished) or KS_ERR_NOMEM. */
    int (*json_put_string)(ks_json_writer *w, const char *name, const char *s, size_t len);
    int (*json_put_int64)(ks_json_writer *w, const char *name, int64_t v);
    int (*json_put_double)(ks_json_writer *w, const char *name, double v);
    int (*json_put_bool)(ks_json_writer *w, const char *name, int v);
    int (*json_put_null)(ks_json_writer *w, const char *name);
    int (*json_put_raw)(ks_json_writer *w, const char *name, const ks_json_span *v);
    /* Close the object: *json and *len get the text, owned by the host and
     * valid until the next json_writer call for this instance or until
     * close. Pass them to forward() or put() as they are (both copy). 0, or
     * KS_ERR_INVALID when the writer is already finished. */
    int (*json_finish)(ks_json_writer *w, const void **json, size_t *len);

    /* --- 1.5 ----------------------------------------------------------- */

    /* The name of the input (a `from:` entry of the node's YAML: a source,
     * a table or a node) whose record process() is handling now; for a
     * node behind a repartition topic, the name of that topic's internal
     * source (`<node>-repartition-source`), which carries all its inputs.
     * Borrowed for the ctx's lifetime. NULL outside process() or for a bad
     * ctx (nothing to free, no error code). Check KS_API_HAS(api,
     * input_name) before use. */
    const char *(*input_name)(ks_ctx *ctx);

    /* --- 1.6 ----------------------------------------------------------- */

    /* What the values of store st hold (a ks_store_values), so that a node
     * reading a table (`table:`, join.tables) can read both kinds: a table
     * of `tables:` or `global_tables:`, or a node's store read as that
     * node's table (`table: NODE`). A negative ks_err for a bad handle.
     * Check KS_API_HAS(api, store_values) before use (older hosts have
     * table stores only: KS_STORE_VALUES_TABLE). */
    int (*store_values)(ks_store *st);

    /* The serdes of the records this node reads, into *key and *value
     * (either may be NULL). Read from the YAML: an input that is a source
     * or a table has the serdes it declares; an input that is a node
     * passes on what that node reads, except that after a node that
     * keeps state (a store: count, aggregate, reduce, joins make values
     * of their own) the value is KS_SERDE_KIND_UNKNOWN, and after a node
     * that changes keys (KS_PROC_CHANGES_KEY) the key is. Through a
     * repartition topic: what its writers read. Inputs that disagree give
     * KS_SERDE_KIND_UNKNOWN for that part. Any phase; the answer does not
     * change while the ctx lives, so ask in init(). 0, or KS_ERR_INVALID
     * for a bad ctx. Check KS_API_HAS(api, input_serde) before use. */
    int (*input_serde)(ks_ctx *ctx, ks_serde_kind *key, ks_serde_kind *value);
    /* The serdes a child takes: the one named `child` (as for forward_to;
     * a node behind a repartition topic by its own name), or all children
     * when `child` is NULL (parts they disagree on are UNKNOWN). A sink
     * takes the serdes it declares; a node what the sinks and nodes after
     * it take, by the rules of input_serde read the other way (a node
     * with a store: value UNKNOWN; one that changes keys: key UNKNOWN; no
     * children: both UNKNOWN). Any phase. 0, KS_ERR_NOT_FOUND (no such
     * child), KS_ERR_INVALID (bad ctx). */
    int (*child_serde)(ks_ctx *ctx, const char *child, ks_serde_kind *key,
                       ks_serde_kind *value);
    /* Say why the record process() is handling is poison, before
     * returning KS_SKIP: the engine puts `reason` (copied; its first 255
     * bytes) into its log line, after the record's topic/partition/offset,
     * and into the dead letter's header ks.error.reason. The last call for
     * a record counts. Only from process(): KS_ERR_STATE otherwise;
     * KS_ERR_INVALID for a bad ctx or a NULL reason. */
    int (*skip_reason)(ks_ctx *ctx, const char *reason);
    /* 1 when every input of this node is a source or a table with
     * `value: json`: the engine has checked each value (tombstones aside)
     * to be one valid JSON text before process() sees it, so the plugin
     * need not check again. 0 otherwise (an input that is a node or a
     * repartition topic, or another serde), KS_ERR_INVALID for a bad ctx.
     * Any phase. */
    int (*input_checked)(ks_ctx *ctx);

    /* --- 1.7: the ledger and SQL in PostgreSQL ------------------------- *
     * Check KS_API_HAS(api, sql_exec) before use. Built without libpq,
     * every call gives KS_ERR_UNSUPPORTED (sql_exec: KS_FATAL). A ctx
     * holds at most one PostgreSQL connection, owned by the host; it is
     * used by one thread at a time, like the ctx. */

    /* Connect this instance to PostgreSQL: the connection string is read
     * from the environment variable `dsn_env` or, when dsn_env is NULL,
     * taken from the pipeline's `outbox: { backend: postgres }` (its dsn
     * or dsn_env). The string is never logged. Only from init(). 0;
     * KS_ERR_NOT_FOUND (the variable is unset, or no postgres outbox);
     * KS_ERR_STATE (not in init, or already open); KS_ERR_IO (PostgreSQL
     * refused the first connection: the reason is logged without the
     * password); KS_ERR_UNSUPPORTED (no libpq). Later losses of the
     * connection are mended by ledger_begin. */
    int (*ledger_open)(ks_ctx *ctx, const char *dsn_env);
    /* Begin the PostgreSQL transaction of one command and look up its
     * ledger row (group, topic, partition, offset; table
     * ks_mailbox_ledger, sql/outbox_pg_002.sql). 0: the row is there;
     * *stored gets its result JSON, borrowed until the next ledger call
     * of this ctx, and the transaction is already over. KS_ERR_NOT_FOUND:
     * no row; the transaction stays open for sql_exec until
     * ledger_commit or ledger_rollback. KS_ERR_IO: PostgreSQL failed or
     * is away (return KS_RETRY). KS_ERR_STATE: not in process(), no
     * connection, or a transaction still open. */
    int (*ledger_begin)(ks_ctx *ctx, const char *group, const char *topic, int32_t partition,
                        int64_t offset, ks_bytes *stored);
    /* Write the ledger row of the command ledger_begin opened (its event
     * id, 32 hex digits; status SUCCESS, or PUSHED_FAILURE when
     * `pushed_failure`; `result`, copied, the result JSON) and commit it
     * with every sql_exec since ledger_begin. For a PUSHED_FAILURE after
     * a failed statement, the handler's statements are rolled back first
     * and the row alone commits. 0; KS_ERR_STATE: no transaction open, or
     * SUCCESS after a failed statement (everything rolled back: a
     * handler bug); KS_ERR_IO: the commit failed or its outcome is
     * unknown (return KS_RETRY: the replay finds the row or runs again). */
    int (*ledger_commit)(ks_ctx *ctx, const char *event_id, int pushed_failure,
                         ks_bytes result);
    /* Roll back the open transaction (nothing of the command is kept). No
     * effect when none is open. */
    void (*ledger_rollback)(ks_ctx *ctx);
    /* Roll back what is open and close the connection; call from close().
     * No effect when none is open. */
    void (*ledger_close)(ks_ctx *ctx);

    /* Run ONE statement with parameters $1..$nparams inside the open
     * ledger transaction: only from a mailbox handler (between
     * ledger_begin and ledger_commit). Values never go into the SQL text,
     * so quotes need no escaping. params[i]: NULL is SQL NULL; with
     * lengths NULL or lengths[i] < 0 it is NUL-terminated text that
     * PostgreSQL parses as the parameter's type ("42" for an integer);
     * with lengths[i] >= 0 it is exactly that many raw bytes, sent in
     * binary format: for bytea (any bytes, NUL too) and text (UTF-8)
     * parameters only. Transaction control (BEGIN, COMMIT, ROLLBACK,
     * SAVEPOINT, ...) and several statements in one call are refused.
     * All inputs borrowed until return. On KS_OK, *out (when out is not
     * NULL) gets the result, owned by the caller: sql_free it; on any
     * other verdict *out is NULL. KS_RETRY: the connection failed, a
     * serialization failure or deadlock (class 40), or PostgreSQL is
     * short of resources: return it, the command is rolled back and
     * replayed. KS_SKIP: the statement failed (a constraint, bad data,
     * bad SQL; logged with its SQLSTATE): the transaction can do nothing
     * more, return KS_SKIP (PUSHED_FAILURE, the handler's statements
     * rolled back) or KS_RETRY. KS_FATAL: misuse (no open transaction,
     * transaction control, a bad argument). */
    ks_verdict (*sql_exec)(ks_ctx *ctx, const char *sql, int nparams,
                           const char *const *params, const int *lengths,
                           ks_sql_result **out);
    /* Rows and columns of a result (0 for NULL). */
    int (*sql_rows)(const ks_sql_result *r);
    int (*sql_cols)(const ks_sql_result *r);
    /* The value at (row, col) in PostgreSQL's text format (a bytea as
     * hex text "\x..."), borrowed until sql_free; a NUL follows it.
     * 0; KS_ERR_NOT_FOUND for SQL NULL; KS_ERR_INVALID out of range. */
    int (*sql_value)(const ks_sql_result *r, int row, int col, ks_bytes *out);
    /* Free a result; NULL is fine. */
    void (*sql_free)(ks_sql_result *r);
};

/* ks_host_api.store_values: the layout of a store's values. */
typedef enum ks_store_values {
    KS_STORE_VALUES_TABLE = 1, /* a table's: the record's timestamp, 8 bytes
                                  big-endian, then the record's value      */
    KS_STORE_VALUES_PLAIN = 2, /* as the node that writes the store put them
                                  (an aggregate's or a reduce's result)    */
    KS_STORE_VALUES_INT64 = 3  /* the shipped count's: an int64 count, 8
                                  bytes big-endian (ks_int64_decode)       */
} ks_store_values;

/* Bytes of an outbox event id buffer: 32 hex digits and a NUL. */
#define KS_OUTBOX_EVENT_ID_SIZE 33

/* True when the host table has `member` (for members after 1.0). */
#define KS_API_HAS(api, member)                                              \
    ((api)->struct_size >=                                                   \
     offsetof(ks_host_api, member) + sizeof(((ks_host_api *)0)->member))

/* Big-endian int64 helpers for the int64 serde. */
static inline void ks_int64_encode(int64_t v, unsigned char out[8])
{
    uint64_t u = (uint64_t)v;
    for (int i = 7; i >= 0; i--) {
        out[i] = (unsigned char)(u & 0xff);
        u >>= 8;
    }
}

static inline int64_t ks_int64_decode(const void *in)
{
    const unsigned char *p = (const unsigned char *)in;
    uint64_t u = 0;
    for (int i = 0; i < 8; i++)
        u = (u << 8) | p[i];
    return (int64_t)u;
}

#ifdef __cplusplus
}
#endif

#endif /* KSTREAMS_KSTREAMS_H */
