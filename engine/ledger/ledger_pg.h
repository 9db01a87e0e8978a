/*
 * ledger_pg.h - the mailbox's idempotency ledger in PostgreSQL (table
 * ks_mailbox_ledger, sql/outbox_pg_002.sql) and the handler's SQL in the
 * same transaction: one connection per mailbox instance (ks_ctx), one
 * transaction per command. The host API (runtime/host_api.c, ABI 1.7)
 * passes its calls through to these.
 *
 * Per command: ks_ledger_begin (BEGIN, look the row up; found: the
 * transaction ends there and the stored result is returned), the
 * handler's ks_ledger_exec statements, then ks_ledger_commit (INSERT the
 * row, COMMIT) or ks_ledger_rollback. The row's primary key (group,
 * topic, partition, offset) makes a second commit of one command fail,
 * whichever process tries it.
 *
 * Built without libpq (no KS_HAVE_POSTGRES) every call answers
 * KS_ERR_UNSUPPORTED.
 */
#ifndef KS_LEDGER_PG_H
#define KS_LEDGER_PG_H

#include <stddef.h>
#include <stdint.h>

#include <kstreams/kstreams.h>

/* Crash points (KS_CRASH_AT, base/fault.h): the handler's statements and
 * the ledger row are written, COMMIT not sent; PostgreSQL committed, the
 * Kafka transaction not yet. */
#define KS_FAULT_LEDGER_BEFORE_COMMIT "ledger-pg-before-commit"
#define KS_FAULT_LEDGER_COMMITTED "ledger-pg-committed"

typedef struct ks_ledger_pg ks_ledger_pg;

/* Open a ledger connection for `owner` (the ks_ctx; a key only) with the
 * connection string `dsn` (copied; never logged). `where` (copied) names
 * the instance in log lines. Connects at once to report a bad DSN or
 * password early. 0; KS_ERR_STATE: owner already has one; KS_ERR_IO: the
 * connection failed (logged without the password);
 * KS_ERR_NOMEM; KS_ERR_UNSUPPORTED: built without libpq, or libpq.so.5
 * cannot be loaded (logged, pg/pq_dl.h). */
int ks_ledger_open(const void *owner, const char *dsn, const char *where);

/* The ledger of `owner`, or NULL. */
ks_ledger_pg *ks_ledger_of(const void *owner);

/* Roll back, disconnect and forget owner's ledger. No effect without one. */
void ks_ledger_close(const void *owner);

/* See ks_host_api.ledger_begin: 0 (found; *stored borrowed until the next
 * call on l), KS_ERR_NOT_FOUND (transaction open), KS_ERR_IO, KS_ERR_STATE,
 * KS_ERR_INVALID, KS_ERR_NOMEM. */
int ks_ledger_begin(ks_ledger_pg *l, const char *group, const char *topic, int32_t partition,
                    int64_t offset, ks_bytes *stored);

/* See ks_host_api.ledger_commit. */
int ks_ledger_commit(ks_ledger_pg *l, const char *event_id, int pushed_failure,
                     ks_bytes result);

/* See ks_host_api.ledger_rollback. */
void ks_ledger_rollback(ks_ledger_pg *l);

/* See ks_host_api.sql_exec; l may be NULL (KS_FATAL). */
ks_verdict ks_ledger_exec(ks_ledger_pg *l, const char *sql, int nparams,
                          const char *const *params, const int *lengths, ks_sql_result **out);

/* See ks_host_api.sql_rows, sql_cols, sql_value, sql_free. */
int ks_sql_rows(const ks_sql_result *r);
int ks_sql_cols(const ks_sql_result *r);
int ks_sql_value(const ks_sql_result *r, int row, int col, ks_bytes *out);
void ks_sql_free(ks_sql_result *r);

/* 1 when `sql` begins with a transaction-control keyword (BEGIN, START,
 * COMMIT, END, ROLLBACK, ABORT, SAVEPOINT, RELEASE, PREPARE, SET
 * TRANSACTION/SESSION ...), which a handler must not run. */
int ks_ledger_sql_is_txn_control(const char *sql);

#endif /* KS_LEDGER_PG_H */
