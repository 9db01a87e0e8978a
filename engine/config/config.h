/*
 * config.h - the pipeline model: one YAML file parsed into plain structs.
 *
 * ks_pipeline_load() parses and validates everything that can be checked
 * without loading plugins: the schema of every key, types, references
 * between sources, nodes, sinks and stores, and cycles. Everything it
 * returns keeps the file:line:column (ks_mark) of where it was written, so
 * later checks (topology.c: plugin names, processor types, config schemas)
 * report the same way.
 */
#ifndef KS_CONFIG_H
#define KS_CONFIG_H

#include <stddef.h>
#include <stdint.h>

/* Where something was written; line and column are 1-based. `file` is
 * borrowed from the owning ks_pipeline. */
typedef struct ks_mark {
    const char *file;
    int line;
    int col;
} ks_mark;

typedef enum ks_serde {
    KS_SERDE_BYTES = 0,
    KS_SERDE_STRING,
    KS_SERDE_JSON,
    KS_SERDE_INT64
} ks_serde;

typedef enum ks_guarantee {
    KS_GUARANTEE_AT_LEAST_ONCE = 0,
    KS_GUARANTEE_EXACTLY_ONCE
} ks_guarantee;

typedef enum ks_poison_policy {
    KS_POISON_FAIL = 0, /* stop with an error naming topic/partition/offset */
    KS_POISON_SKIP,     /* log, count, go on                                 */
    KS_POISON_DEAD_LETTER
} ks_poison_policy;

/* Where a part of a nested config value was written: its path inside the
 * value (member names and indexes joined by '/', as written; "" for the
 * value itself) and its mark (a member's: that of its key). */
typedef struct ks_cfg_inner {
    char *path;
    ks_mark mark;
} ks_cfg_inner;

/* A scalar written in YAML, kept as text with its mark. */
typedef struct ks_cfg_scalar {
    char *key;   /* map key, or NULL in a list */
    char *value; /* the scalar text as written; a nested value as JSON */
    /* NULL for a scalar; "a mapping" or "a list" for a nested value under
     * `config:`, which reaches plugins as its JSON text (string keys only) */
    const char *nested;
    ks_cfg_inner *inner; /* nested: where each of its parts was written */
    size_t inner_count;
    ks_mark mark;     /* of the value */
    ks_mark key_mark; /* of the key   */
} ks_cfg_scalar;

typedef struct ks_cfg_scalars {
    ks_cfg_scalar *items;
    size_t count;
} ks_cfg_scalars;

typedef struct ks_cfg_source {
    char *name;  /* key under `sources:` */
    char *topic;
    ks_serde key_serde;
    ks_serde value_serde;
    int create;          /* create the topic when missing (create: true) */
    int32_t partitions;  /* for create; default 1                       */
    ks_mark mark;        /* of the name (the key under `sources:`) */
    ks_mark topic_mark;  /* of the `topic:` value                   */
    /* 1: a repartition topic's source, added by the topology
     * (repartition.c), never written in YAML; `partitions` is then the
     * node's `repartition: { partitions: N }`, 0 for the sources' count */
    int internal;
    /* 1: a table (`tables:`), read as a changelog into store
     * `table_store` (an index into pipeline->stores), not a stream */
    int table;
    int table_store;
    /* 1: a global table (`global_tables:`, in pipeline->globals, never in
     * sources): read whole by every process into a store shared by its
     * tasks (runtime/global_table.h); table_store is its store */
    int global;
} ks_cfg_source;

typedef struct ks_cfg_store {
    char *name;
    uint64_t map_size;  /* bytes; default 1 GiB, e.g. `map_size: 4GiB` */
    int changelog;      /* default 1 */
    int declared;       /* 1: under `stores:`; 0: created with defaults
                           because a node names it (mark = that use)  */
    int table;          /* 1: the store of the table of the same name: its
                           topic is its changelog; plugins only read it */
    int global;         /* 1: also a global table's: one per process, shared
                           by the tasks, not in their environments */
    char *node_table;   /* the node whose store this is, when other nodes
                           read it as that node's table (`table: NODE`, a
                           side of `join.tables`); they only read it. NULL
                           when no node reads it so */
    ks_mark mark;
} ks_cfg_store;

/* `functions: { init: plugin.fn, add: plugin.fn }` */
typedef struct ks_cfg_function {
    char *role;   /* init, add, reduce, merge, handler ... */
    char *plugin; /* part before '.' (or ':')              */
    char *name;   /* part after                            */
    ks_mark mark;
} ks_cfg_function;

typedef struct ks_cfg_node {
    char *name;
    char *type;           /* as written: "count" or "plugin.processor"   */
    char *plugin;         /* "count" for "count"; "plugin" for "p.x"     */
    char *processor;      /* "count" for "count"; "x" for "p.x"          */
    char **from;          /* names of sources or nodes; >= 1             */
    ks_mark *from_marks;
    size_t from_count;
    char **stores;        /* store names this node uses (store:/stores:) */
    ks_mark *store_marks;
    size_t store_count;
    ks_cfg_scalars config;        /* `config:` map, scalars only        */
    ks_cfg_function *functions;
    size_t function_count;
    ks_cfg_scalars window;        /* `window:` map, kept for windows.c  */
    int repartition;              /* `repartition:` true or a map: force
                                     a repartition topic in front of it */
    int32_t repartition_partitions; /* `repartition: { partitions: N }`;
                                       0: the sources' count         */
    ks_mark repartition_mark;     /* of the `repartition:` key          */
    char *repartition_topic;      /* that topic's name when not the
                                     default <app>-<node>-repartition (a
                                     foreign-key join's, config_fk.c)   */
    char *table;                  /* `table:` the table it looks up, or
                                     NULL; its store is stores[0]      */
    int table_node;               /* 1: `table:` names a node (a count,
                                     aggregate, reduce ...): its store */
    ks_mark table_mark;
    /* `cache_bytes:` the record cache of a cacheable node (KS_PROC_CACHEABLE,
     * not windowed), per task; KS_CACHE_DEFAULT_BYTES unless set, 0: off */
    uint64_t cache_bytes;
    int cache_set;                /* written in the YAML */
    ks_mark cache_mark;
    ks_mark mark;       /* of the node's map */
    ks_mark type_mark;  /* of the `type:` value */
    ks_mark name_mark;  /* of the `name:` value */
} ks_cfg_node;

typedef struct ks_cfg_sink {
    char *name;  /* `name:` or "sink-<n>", n = 1-based index in `sinks:` */
    char *from;  /* a node or source name */
    char *topic;
    ks_serde key_serde;
    ks_serde value_serde;
    int create;
    int32_t partitions;  /* for create; 0 (default): the sources' count */
    ks_mark mark;
    ks_mark from_mark;
    ks_mark name_mark;  /* of the `name:` value; = mark when defaulted */
    ks_mark topic_mark; /* of the `topic:` value                      */
    /* a repartition topic's sink, added by the topology (repartition.c):
     * the name of the node it feeds (owned), NULL for a sink of the YAML */
    char *feeds;
} ks_cfg_sink;

/* What one HTTP server (the outbox's, the metrics') lets a client hold
 * (docs/reliability.md): keys max_connections, idle_timeout and
 * connection_deadline of `outbox:` and of `metrics:`. */
typedef struct ks_cfg_http_limits {
    int64_t max_connections;        /* open at once; more wait unaccepted   */
    int64_t idle_timeout_ms;        /* silent this long: closed (whole s)   */
    int64_t connection_deadline_ms; /* a connection's whole life, however
                                       busy (slow senders, keep-alive)    */
} ks_cfg_http_limits;

/* The record cache of a cacheable node, per task, unless `cache_bytes:`
 * says otherwise (docs/stores.md): 1 MiB, about 8 000 keys with small
 * values, more than a cache that passes on keys untouched for 4 096
 * updates (cache.h) usually holds. */
#define KS_CACHE_DEFAULT_BYTES (UINT64_C(1) << 20)
#define KS_HTTP_MAX_CONNECTIONS_LIMIT 1000 /* below the usual 1024 fds */

typedef enum ks_outbox_backend {
    KS_OUTBOX_BACKEND_LMDB = 0, /* embedded, fed over HTTP and by processors */
    KS_OUTBOX_BACKEND_POSTGRES  /* the application's database (outbox_pg.h) */
} ks_outbox_backend;

/* `outbox:` - the durable outbox, its HTTP endpoint and its dispatcher
 * (docs/outbox-and-mailbox.md). */
typedef struct ks_cfg_outbox {
    ks_outbox_backend backend; /* `backend: lmdb|postgres`; lmdb          */
    char *dsn;      /* postgres: libpq connection string; never logged   */
    char *dsn_env;  /* postgres: or the environment variable holding it  */
    char *table;    /* postgres: the outbox table; default ks_outbox     */
    int64_t poll_interval_ms; /* postgres: poll when no NOTIFY came; 1s */
    char *name;   /* URL segment: POST /outbox/<name>/events           */
    char *topic;  /* the mailbox topic events are published to        */
    char *listen; /* host:port; default 127.0.0.1:8470                  */
    char *token;  /* Bearer token; required when listen is not loopback */
    char *results_topic; /* mailbox results; NULL: <application>-outbox-results */
    int64_t max_users_per_partition; /* default 100; postgres: 0 (off) */
    int64_t stale_after_ms;          /* default 30s                    */
    int64_t max_attempts;            /* retry: { max_attempts }; 5     */
    int64_t max_event_bytes;         /* request body limit; 64 KiB     */
    int recover_unknown_partition;   /* default true                   */
    ks_cfg_http_limits limits;       /* 64 connections, 10s idle, 30s  */
    ks_mark mark;
} ks_cfg_outbox;

typedef struct ks_pipeline {
    char *file;        /* path as given to ks_pipeline_load */
    char *application; /* [A-Za-z0-9._-]+ */
    char **bootstrap;
    size_t bootstrap_count;
    ks_cfg_scalars kafka_properties; /* passed to librdkafka as is */
    ks_guarantee guarantee;          /* default exactly-once */
    int64_t commit_interval_ms;      /* default 100 */
    int64_t stall_warning_ms;        /* a partition with lag and no committed
                                        progress this long is logged; 60000 */
    char *state_dir;                 /* default ./state */
    int rollback_crashes;            /* `rollback: { crashes }`: crashes of one
                                        build that make the next start run the
                                        last good build; 0 = never; default 3 */
    int64_t rollback_within_ms;      /* `rollback: { within }`: counted over
                                        this window; default 10 minutes */
    int static_membership;           /* 1: each worker's consumer is a static
                                        member (group.instance.id); default 0 */
    int standby_replicas;            /* processes besides the owner that keep
                                        a task's stores warm (standby.h);
                                        0..16, default 0 */
    int workers;                     /* default 1 */
    int32_t replication_factor;      /* topics the engine creates; -1 (default):
                                        the broker's default.replication.factor */
    char **plugins;                  /* `plugins:` paths or names */
    ks_mark *plugin_marks;
    size_t plugin_count;
    char **plugin_path;              /* `plugin_path:` extra search dirs */
    size_t plugin_path_count;
    ks_poison_policy poison;         /* `poison: fail|skip|dead-letter` */
    char *dead_letter_topic;         /* default <application>-dlq */
    char *metrics_listen;            /* `metrics: 127.0.0.1:9400`, or its
                                        `listen:`; NULL = off            */
    char *metrics_token;             /* Bearer token; required when
                                        metrics_listen is not loopback   */
    ks_cfg_http_limits metrics_limits; /* 16 connections, 10s idle, 10s */
    char *query_listen;              /* `query: { listen }`: the query server
                                        (docs/scaling.md); NULL = off    */
    char *query_token;               /* Bearer token; required when
                                        query_listen is not loopback     */
    char *query_advertise;           /* host:port the other processes reach
                                        this one at; NULL: query_listen  */
    ks_cfg_http_limits query_limits; /* 32 connections, 10s idle, 10s */
    ks_cfg_source *sources;          /* the streams, then the tables */
    size_t source_count;
    ks_cfg_node *nodes;
    size_t node_count;
    ks_cfg_sink *sinks;
    size_t sink_count;
    ks_cfg_store *stores;
    size_t store_count;
    ks_cfg_outbox *outbox;           /* `outbox:`; NULL when absent */
    ks_cfg_source *globals;          /* `global_tables:`, global set */
    size_t global_count;
} ks_pipeline;

/*
 * Parse and validate `path`. On success returns 0 and *out owns a new
 * pipeline (free with ks_pipeline_free). On error returns -1, *out is NULL
 * and `err` holds one line "FILE:LINE:COL: what was expected" (errlen
 * bytes at most, always NUL-terminated).
 */
int ks_pipeline_load(const char *path, ks_pipeline **out, char *err,
                     size_t errlen);

/* Same, from a YAML text in memory; `name` is used as the file name in
 * marks and errors. */
int ks_pipeline_parse(const char *name, const char *text, size_t len,
                      ks_pipeline **out, char *err, size_t errlen);

/* Free a pipeline and everything it owns. NULL is fine. */
void ks_pipeline_free(ks_pipeline *p);

/* Lookups; return NULL when absent. Borrowed from p. */
const ks_cfg_source *ks_pipeline_source(const ks_pipeline *p, const char *name);
/* The global table (`global_tables:`) named `name`, or NULL. Borrowed. */
const ks_cfg_source *ks_pipeline_global(const ks_pipeline *p, const char *name);
const ks_cfg_node *ks_pipeline_node(const ks_pipeline *p, const char *name);
const ks_cfg_store *ks_pipeline_store(const ks_pipeline *p, const char *name);
/* 1 when node `node` may write store index `store` it lists: not a
 * table's store, nor another node's store it reads as that node's table. */
int ks_cfg_store_writable(const ks_pipeline *p, const ks_cfg_node *node, int store);
/* 1 when other nodes read the store of node `name` as its table. */
int ks_cfg_node_is_table(const ks_pipeline *p, const char *name);
/* The item `key` of a `config:` or `window:` mapping, or NULL. Borrowed. */
const ks_cfg_scalar *ks_cfg_scalars_find(const ks_cfg_scalars *s, const char *key);

/* 1 when node n is of type PLUGIN.PROCESSOR (a shipped type the engine
 * checks more closely, e.g. "join", "streams"), else 0. */
int ks_cfg_node_is(const ks_cfg_node *n, const char *plugin, const char *processor);

/* The function node `n` names for `role` (`functions: { role: ... }`),
 * borrowed from n; NULL when it names none. */
const ks_cfg_function *ks_cfg_node_function(const ks_cfg_node *n, const char *role);

/* Writes "FILE:LINE:COL: message" for mark `m` into err (the format the
 * parser uses, for the checks made after it: topology.c, repartition.c)
 * and returns -1, so a check can `return ks_mark_fail(...)`. */
int ks_mark_fail(char *err, size_t errlen, const ks_mark *m, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Parse "250ms", "10s", "5m", "1h", "2d" or a plain integer (ms).
 * Returns 0 and *ms, or -1 when malformed. */
int ks_parse_duration_ms(const char *text, int64_t *ms);

/* Parse "1048576", "512MiB", "4GiB", "64KiB". Returns 0 or -1. */
int ks_parse_size(const char *text, uint64_t *bytes);

const char *ks_serde_name(ks_serde s);

/* A listen address as the HTTP servers bind it: "A.B.C.D:PORT" (an IPv4
 * literal, parsed exactly with inet_pton) or "localhost:PORT", port
 * 1..65535 in decimal digits. 0 with *addr (4 bytes, network order) and
 * *port, or -1 when malformed ("127.0.0.1.example.com:80" is). */
int ks_parse_listen(const char *text, unsigned char addr[4], uint16_t *port);

/* 1 when `text` parses (ks_parse_listen) to an address in 127.0.0.0/8,
 * else 0: the only addresses served without a token. */
int ks_listen_is_loopback(const char *text);

#endif /* KS_CONFIG_H */
