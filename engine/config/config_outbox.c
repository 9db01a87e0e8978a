/*
 * config_outbox.c - `outbox:`: the keys of both backends (embedded LMDB
 * with HTTP ingest, and postgres), their defaults, and the refusal of a
 * key that belongs to the other backend. `backend: postgres` loads libpq
 * (pg/pq_dl.h) and a postgres `dsn` is checked with libpq's own parser (no
 * connection is made).
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"

#ifdef KS_HAVE_POSTGRES
#include "pg/pq_dl.h"
#endif

/* `outbox: { name, topic, listen, token, max_users_per_partition,
 * stale_after, retry: { max_attempts }, max_event_bytes,
 * recover_unknown_partition, results_topic, max_connections, idle_timeout,
 * connection_deadline, backend, dsn, dsn_env, table, poll_interval }` */
enum { O_NAME, O_TOPIC, O_LISTEN, O_TOKEN, O_MAX_USERS, O_STALE, O_RETRY, O_MAX_BYTES,
       O_RECOVER, O_RESULTS, O_MAX_CONN, O_IDLE, O_DEADLINE, O_BACKEND, O_DSN, O_DSN_ENV,
       O_TABLE, O_POLL, O_N };
static const char *const OUTBOX_KEYS[O_N] = {
    "name",        "topic", "listen",          "token", "max_users_per_partition",
    "stale_after", "retry", "max_event_bytes", "recover_unknown_partition",
    "results_topic", "max_connections", "idle_timeout", "connection_deadline",
    "backend", "dsn", "dsn_env", "table", "poll_interval"};

/* The keys that only the embedded (LMDB/HTTP) backend reads, and the ones
 * only postgres reads: a key of the other backend is a mistake to report. */
static const int OUTBOX_LMDB_ONLY[] = {O_LISTEN, O_TOKEN, O_MAX_BYTES, O_RESULTS,
                                       O_MAX_CONN, O_IDLE, O_DEADLINE, O_RECOVER};
static const int OUTBOX_PG_ONLY[] = {O_DSN, O_DSN_ENV, O_TABLE, O_POLL};

/* [A-Za-z_][A-Za-z0-9_]*, at most 63 bytes: a PostgreSQL identifier that
 * needs no quoting, and a NOTIFY channel of the same name. */
static int is_sql_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
            return 0;
    return 1;
}

/* backend, dsn, dsn_env, table and poll_interval; the keys of the other
 * backend refused at their position. */
static int parse_outbox_backend(pctx *c, const fields *f, const ks_ynode *v, ks_cfg_outbox *o)
{
    if (f->val[O_BACKEND]) {
        const ks_ynode *b = f->val[O_BACKEND];
        if (want_scalar(c, f->key[O_BACKEND], b, "lmdb or postgres") != 0)
            return -1;
        if (!strcmp(b->text, "postgres"))
            o->backend = KS_OUTBOX_BACKEND_POSTGRES;
        else if (strcmp(b->text, "lmdb") != 0)
            return FAIL_AT(c, b, "invalid outbox backend '%s'; expected lmdb or postgres",
                           b->text);
#ifndef KS_HAVE_POSTGRES
        if (o->backend == KS_OUTBOX_BACKEND_POSTGRES)
            return FAIL_AT(c, b, "this kstreams was built without PostgreSQL (configure "
                                 "did not find libpq: install libpq-dev and rebuild)");
#else
        char why[512]; /* here, so that `kstreams check` reports a missing libpq */
        if (o->backend == KS_OUTBOX_BACKEND_POSTGRES && ks_pq_load(why, sizeof why) != 0)
            return FAIL_AT(c, b, "%s", why);
#endif
    }
    int pg = o->backend == KS_OUTBOX_BACKEND_POSTGRES;
    const int *other = pg ? OUTBOX_LMDB_ONLY : OUTBOX_PG_ONLY;
    size_t n_other = pg ? sizeof OUTBOX_LMDB_ONLY / sizeof *OUTBOX_LMDB_ONLY
                        : sizeof OUTBOX_PG_ONLY / sizeof *OUTBOX_PG_ONLY;
    for (size_t i = 0; i < n_other; i++)
        if (f->key[other[i]])
            return FAIL_AT(c, f->key[other[i]], "'%s' is not a key of the %s outbox backend",
                           f->key[other[i]]->text, pg ? "postgres" : "lmdb");
    if (!pg)
        return 0;
    o->poll_interval_ms = 1000;
    o->max_users_per_partition = 0; /* no key: murmur2 partitions, no assignment */
    if (f->val[O_DSN] && want_string(c, f->key[O_DSN], f->val[O_DSN], &o->dsn) != 0)
        return -1;
#ifdef KS_HAVE_POSTGRES
    if (o->dsn) { /* libpq's own parser; its message never repeats a password */
        char *why = NULL;
        PQconninfoOption *opts = PQconninfoParse(o->dsn, &why);
        if (!opts) {
            size_t l = why ? strlen(why) : 0;
            while (l && why[l - 1] == '\n')
                why[--l] = '\0';
            FAIL_AT(c, f->val[O_DSN], "invalid PostgreSQL connection string for 'dsn': %s",
                    why ? why : "out of memory");
            PQfreemem(why);
            return -1;
        }
        PQconninfoFree(opts);
    }
#endif
    if (f->val[O_DSN_ENV]) {
        if (want_string(c, f->key[O_DSN_ENV], f->val[O_DSN_ENV], &o->dsn_env) != 0)
            return -1;
        if (!is_sql_name(o->dsn_env))
            return FAIL_AT(c, f->val[O_DSN_ENV], "invalid environment variable name '%s' "
                                                 "for 'dsn_env'", o->dsn_env);
    }
    if (!o->dsn == !o->dsn_env)
        return FAIL_AT(c, f->val[O_DSN] ? f->key[O_DSN_ENV] : v,
                       "a postgres outbox needs exactly one of 'dsn' (a libpq connection "
                       "string) and 'dsn_env' (the environment variable holding it)");
    if (f->val[O_TABLE]) {
        if (want_string(c, f->key[O_TABLE], f->val[O_TABLE], &o->table) != 0)
            return -1;
        if (!is_sql_name(o->table))
            return FAIL_AT(c, f->val[O_TABLE], "invalid table name '%s'; expected "
                                               "[A-Za-z_][A-Za-z0-9_]* (at most 63)",
                           o->table);
    } else if (!(o->table = strdup("ks_outbox")))
        return oom(c, v);
    if (f->val[O_POLL] &&
        want_duration(c, f->key[O_POLL], f->val[O_POLL], &o->poll_interval_ms) != 0)
        return -1;
    return 0;
}

int ks_cfg_parse_outbox(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    fields f;
    if (want_map(c, kn, v, 0) != 0 || take_fields(c, v, "outbox", OUTBOX_KEYS, O_N, &f) != 0)
        return -1;
    ks_cfg_outbox *o = calloc(1, sizeof *o);
    if (!o)
        return oom(c, v);
    c->p->outbox = o;
    o->mark = mark_of(c, v);
    o->max_users_per_partition = 100;
    o->stale_after_ms = 30000;
    o->max_attempts = 5;
    o->max_event_bytes = 65536;
    o->recover_unknown_partition = 1;
    o->limits = (ks_cfg_http_limits){64, 10000, 30000};
    if (parse_outbox_backend(c, &f, v, o) != 0)
        return -1;
    if (f.val[O_NAME]) {
        if (want_string(c, f.key[O_NAME], f.val[O_NAME], &o->name) != 0)
            return -1;
        if (!is_name(o->name))
            return FAIL_AT(c, f.val[O_NAME], "invalid outbox name '%s'; expected "
                                             "[A-Za-z0-9_-]+",
                           o->name);
    }
    if (f.val[O_TOPIC] && want_topic(c, f.key[O_TOPIC], f.val[O_TOPIC], &o->topic) != 0)
        return -1;
    if (f.val[O_RESULTS] &&
        want_topic(c, f.key[O_RESULTS], f.val[O_RESULTS], &o->results_topic) != 0)
        return -1;
    if (f.val[O_LISTEN] && want_listen(c, f.key[O_LISTEN], f.val[O_LISTEN], &o->listen) != 0)
        return -1;
    if (f.val[O_TOKEN] && want_string(c, f.key[O_TOKEN], f.val[O_TOKEN], &o->token) != 0)
        return -1;
    if (f.val[O_MAX_USERS] && want_int(c, f.key[O_MAX_USERS], f.val[O_MAX_USERS], 1,
                                       INT32_MAX, &o->max_users_per_partition) != 0)
        return -1;
    if (f.val[O_STALE] && want_duration(c, f.key[O_STALE], f.val[O_STALE],
                                        &o->stale_after_ms) != 0)
        return -1;
    if (f.val[O_RETRY]) {
        static const char *const rkeys[] = {"max_attempts"};
        fields r;
        if (want_map(c, f.key[O_RETRY], f.val[O_RETRY], 0) != 0 ||
            take_fields(c, f.val[O_RETRY], "retry", rkeys, 1, &r) != 0)
            return -1;
        if (r.val[0] && want_int(c, r.key[0], r.val[0], 1, 1000000, &o->max_attempts) != 0)
            return -1;
    }
    if (f.val[O_MAX_BYTES]) {
        uint64_t b;
        if (want_scalar(c, f.key[O_MAX_BYTES], f.val[O_MAX_BYTES], "a size") != 0)
            return -1;
        if (ks_parse_size(f.val[O_MAX_BYTES]->text, &b) != 0 || b == 0 || b > (64u << 20))
            return FAIL_AT(c, f.val[O_MAX_BYTES],
                           "expected a size between 1 and 64MiB for 'max_event_bytes', "
                           "found '%s'",
                           f.val[O_MAX_BYTES]->text);
        o->max_event_bytes = (int64_t)b;
    }
    if (f.val[O_RECOVER] && want_bool(c, f.key[O_RECOVER], f.val[O_RECOVER],
                                      &o->recover_unknown_partition) != 0)
        return -1;
    if (want_limits(c, &f.key[O_MAX_CONN], &f.val[O_MAX_CONN], &o->limits) != 0)
        return -1;
    if (!f.val[O_TOPIC])
        return missing(c, v, "outbox", "topic");
    if (o->backend == KS_OUTBOX_BACKEND_POSTGRES) /* no HTTP: the name labels metrics */
        return o->name || (o->name = strdup(o->table)) ? 0 : oom(c, v);
    if (!f.val[O_NAME])
        return missing(c, v, "outbox", "name");
    if (!o->listen && !(o->listen = strdup("127.0.0.1:8470")))
        return oom(c, v);
    if (!ks_listen_is_loopback(o->listen) && !o->token)
        return FAIL_AT(c, f.val[O_LISTEN] ? f.val[O_LISTEN] : v,
                       "outbox listens on '%s', which is not a loopback address: set "
                       "'token' (clients then send Authorization: Bearer <token>)",
                       o->listen);
    return 0;
}
