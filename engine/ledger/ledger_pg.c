/*
 * ledger_pg.c - see ledger_pg.h.
 *
 * Round trips per new command: BEGIN, the lookup, SAVEPOINT, the
 * handler's statements, the INSERT, COMMIT. The savepoint lets a
 * PUSHED_FAILURE after a failed statement still commit its ledger row.
 * Every value is a parameter; the SQL text is constant.
 */
#include "ledger/ledger_pg.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/fault.h"
#include "base/log.h"

int ks_ledger_sql_is_txn_control(const char *sql)
{
    static const char *const words[] = {"BEGIN",   "START",   "COMMIT",  "END",
                                        "ROLLBACK", "ABORT",  "SAVEPOINT", "RELEASE",
                                        "PREPARE", "SET",     "LISTEN",  "UNLISTEN",
                                        "DISCARD", "RESET"};
    if (!sql)
        return 0;
    while (isspace((unsigned char)*sql) || *sql == '(')
        sql++;
    size_t n = 0;
    while (isalpha((unsigned char)sql[n]))
        n++;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strlen(words[i]) == n && strncasecmp(sql, words[i], n) == 0)
            return 1;
    return 0;
}

#ifndef KS_HAVE_POSTGRES

int ks_ledger_open(const void *owner, const char *dsn, const char *where)
{
    (void)owner, (void)dsn, (void)where;
    return KS_ERR_UNSUPPORTED;
}
ks_ledger_pg *ks_ledger_of(const void *owner)
{
    (void)owner;
    return NULL;
}
void ks_ledger_close(const void *owner) { (void)owner; }
int ks_ledger_begin(ks_ledger_pg *l, const char *group, const char *topic, int32_t partition,
                    int64_t offset, ks_bytes *stored)
{
    (void)l, (void)group, (void)topic, (void)partition, (void)offset, (void)stored;
    return KS_ERR_UNSUPPORTED;
}
int ks_ledger_commit(ks_ledger_pg *l, const char *event_id, int pushed_failure,
                     ks_bytes result)
{
    (void)l, (void)event_id, (void)pushed_failure, (void)result;
    return KS_ERR_UNSUPPORTED;
}
void ks_ledger_rollback(ks_ledger_pg *l) { (void)l; }
ks_verdict ks_ledger_exec(ks_ledger_pg *l, const char *sql, int nparams,
                          const char *const *params, const int *lengths, ks_sql_result **out)
{
    (void)l, (void)sql, (void)nparams, (void)params, (void)lengths;
    if (out)
        *out = NULL;
    return KS_FATAL;
}
int ks_sql_rows(const ks_sql_result *r)
{
    (void)r;
    return 0;
}
int ks_sql_cols(const ks_sql_result *r)
{
    (void)r;
    return 0;
}
int ks_sql_value(const ks_sql_result *r, int row, int col, ks_bytes *out)
{
    (void)r, (void)row, (void)col, (void)out;
    return KS_ERR_UNSUPPORTED;
}
void ks_sql_free(ks_sql_result *r) { (void)r; }

#else /* KS_HAVE_POSTGRES */

#include "pg/pq_dl.h"

#define WHERE_MAX 160
#define KEY_TEXT 32

static const char SELECT_ROW[] =
    "SELECT result::text FROM ks_mailbox_ledger WHERE consumer_group = $1 AND topic = $2 "
    "AND kafka_partition = $3::int AND kafka_offset = $4::bigint";
static const char INSERT_ROW[] =
    "INSERT INTO ks_mailbox_ledger (consumer_group, topic, kafka_partition, kafka_offset, "
    "event_id, status, result) VALUES ($1, $2, $3::int, $4::bigint, $5, $6, $7::json)";

struct ks_sql_result {
    PGresult *res;
};

struct ks_ledger_pg {
    const void *owner;
    struct ks_ledger_pg *next;
    char *dsn; /* owned; never logged */
    char where[WHERE_MAX];
    PGconn *conn;
    int open;      /* a command's transaction is open */
    int warned;    /* PostgreSQL unreachable was logged */
    PGresult *row; /* the last lookup's result (stored borrows from it) */
    /* the open command's key, as text parameters */
    char *group, *topic;
    char part[16], off[24];
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static ks_ledger_pg *reg_head;

static int connect_now(ks_ledger_pg *l)
{
    if (l->conn && PQstatus(l->conn) == CONNECTION_OK)
        return 0;
    if (l->conn)
        PQfinish(l->conn);
    l->conn = PQconnectdb(l->dsn);
    if (PQstatus(l->conn) != CONNECTION_OK) {
        if (!l->warned) /* libpq names host and database, never the password */
            ks_warn(l->where, "ledger: PostgreSQL unreachable, the command is retried: %s",
                    PQerrorMessage(l->conn));
        l->warned = 1;
        return KS_ERR_IO;
    }
    ks_info(l->where, "ledger: connected to PostgreSQL %s/%s", PQhost(l->conn), PQdb(l->conn));
    l->warned = 0;
    return 0;
}

int ks_ledger_open(const void *owner, const char *dsn, const char *where)
{
    if (!owner || !dsn)
        return KS_ERR_INVALID;
    if (ks_ledger_of(owner))
        return KS_ERR_STATE;
    char why[512];
    if (ks_pq_load(why, sizeof why) != 0) {
        ks_error(where ? where : "ledger", "ledger: %s", why);
        return KS_ERR_UNSUPPORTED;
    }
    ks_ledger_pg *l = calloc(1, sizeof *l);
    if (!l || !(l->dsn = strdup(dsn))) {
        free(l);
        return KS_ERR_NOMEM;
    }
    l->owner = owner;
    snprintf(l->where, sizeof l->where, "%s", where ? where : "ledger");
    if (connect_now(l) != 0) {
        PQfinish(l->conn);
        free(l->dsn);
        free(l);
        return KS_ERR_IO;
    }
    pthread_mutex_lock(&reg_lock);
    l->next = reg_head;
    reg_head = l;
    pthread_mutex_unlock(&reg_lock);
    return 0;
}

ks_ledger_pg *ks_ledger_of(const void *owner)
{
    pthread_mutex_lock(&reg_lock);
    ks_ledger_pg *l = reg_head;
    while (l && l->owner != owner)
        l = l->next;
    pthread_mutex_unlock(&reg_lock);
    return l;
}

static void forget_key(ks_ledger_pg *l)
{
    free(l->group);
    free(l->topic);
    l->group = l->topic = NULL;
}

/* Run a statement without parameters; 0 or KS_ERR_IO (logged). */
static int simple(ks_ledger_pg *l, const char *sql)
{
    PGresult *r = PQexec(l->conn, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        ks_warn(l->where, "ledger: %s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
    return ok ? 0 : KS_ERR_IO;
}

void ks_ledger_rollback(ks_ledger_pg *l)
{
    if (!l || !l->open)
        return;
    l->open = 0;
    forget_key(l);
    if (PQstatus(l->conn) == CONNECTION_OK)
        (void)simple(l, "ROLLBACK");
}

void ks_ledger_close(const void *owner)
{
    pthread_mutex_lock(&reg_lock);
    ks_ledger_pg **p = &reg_head;
    while (*p && (*p)->owner != owner)
        p = &(*p)->next;
    ks_ledger_pg *l = *p;
    if (l)
        *p = l->next;
    pthread_mutex_unlock(&reg_lock);
    if (!l)
        return;
    ks_ledger_rollback(l);
    PQclear(l->row);
    PQfinish(l->conn);
    free(l->dsn);
    free(l);
}

int ks_ledger_begin(ks_ledger_pg *l, const char *group, const char *topic, int32_t partition,
                    int64_t offset, ks_bytes *stored)
{
    if (!l || !group || !topic || !stored)
        return KS_ERR_INVALID;
    if (l->open)
        return KS_ERR_STATE;
    PQclear(l->row);
    l->row = NULL;
    if (connect_now(l) != 0)
        return KS_ERR_IO;
    if (PQtransactionStatus(l->conn) != PQTRANS_IDLE)
        (void)simple(l, "ROLLBACK"); /* left over from a lost connection */
    if (simple(l, "BEGIN") != 0)
        return KS_ERR_IO;
    snprintf(l->part, sizeof l->part, "%d", (int)partition);
    snprintf(l->off, sizeof l->off, "%lld", (long long)offset);
    const char *v[] = {group, topic, l->part, l->off};
    PGresult *r = PQexecParams(l->conn, SELECT_ROW, 4, NULL, v, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        ks_warn(l->where, "ledger: lookup failed: %s", PQresultErrorMessage(r));
        PQclear(r);
        (void)simple(l, "ROLLBACK");
        return KS_ERR_IO;
    }
    if (PQntuples(r) > 0) { /* processed: nothing more in this transaction */
        l->row = r;
        *stored = (ks_bytes){PQgetvalue(r, 0, 0), (size_t)PQgetlength(r, 0, 0)};
        return simple(l, "COMMIT") == 0 ? 0 : KS_ERR_IO;
    }
    PQclear(r);
    if (simple(l, "SAVEPOINT ks_handler") != 0) {
        (void)simple(l, "ROLLBACK");
        return KS_ERR_IO;
    }
    if (!(l->group = strdup(group)) || !(l->topic = strdup(topic))) {
        forget_key(l);
        (void)simple(l, "ROLLBACK");
        return KS_ERR_NOMEM;
    }
    l->open = 1;
    return KS_ERR_NOT_FOUND;
}

int ks_ledger_commit(ks_ledger_pg *l, const char *event_id, int pushed_failure,
                     ks_bytes result)
{
    if (!l || !l->open)
        return KS_ERR_STATE;
    if (!event_id || (result.len && !result.data) || memchr(result.data ? result.data : "",
                                                            '\0', result.len)) {
        ks_ledger_rollback(l);
        return KS_ERR_INVALID;
    }
    if (PQtransactionStatus(l->conn) == PQTRANS_INERROR) {
        if (!pushed_failure) {
            ks_warn(l->where, "ledger: the handler returned KS_OK after a failed SQL "
                              "statement; nothing of the command is kept");
            ks_ledger_rollback(l);
            return KS_ERR_STATE;
        }
        if (simple(l, "ROLLBACK TO SAVEPOINT ks_handler") != 0) {
            ks_ledger_rollback(l);
            return KS_ERR_IO;
        }
    }
    char *json = malloc(result.len + 1);
    if (!json) {
        ks_ledger_rollback(l);
        return KS_ERR_NOMEM;
    }
    memcpy(json, result.data ? result.data : "", result.len);
    json[result.len] = '\0';
    const char *v[] = {l->group, l->topic, l->part, l->off, event_id,
                       pushed_failure ? "PUSHED_FAILURE" : "SUCCESS", json};
    PGresult *r = PQexecParams(l->conn, INSERT_ROW, 7, NULL, v, NULL, NULL, 0);
    free(json);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok) /* a unique violation: another process committed it first */
        ks_warn(l->where, "ledger: row of %s[%s]@%s not written: %s", l->topic, l->part,
                l->off, PQresultErrorMessage(r));
    PQclear(r);
    if (!ok) {
        ks_ledger_rollback(l);
        return KS_ERR_IO;
    }
    ks_fault_point(KS_FAULT_LEDGER_BEFORE_COMMIT);
    l->open = 0;
    forget_key(l);
    r = PQexec(l->conn, "COMMIT");
    /* COMMIT of a failed transaction answers ROLLBACK */
    ok = PQresultStatus(r) == PGRES_COMMAND_OK && strcmp(PQcmdStatus(r), "COMMIT") == 0;
    if (!ok)
        ks_warn(l->where, "ledger: COMMIT failed or unknown: %s", PQresultErrorMessage(r));
    PQclear(r);
    if (!ok)
        return KS_ERR_IO;
    ks_fault_point(KS_FAULT_LEDGER_COMMITTED);
    return 0;
}

/* Whether a failed statement is worth a replay: connection (08), the
 * transaction was rolled back (40: serialization, deadlock), resources
 * (53), operator intervention (57: shutdown, cancel). */
static int transient(const PGresult *r, const PGconn *c)
{
    if (PQstatus(c) != CONNECTION_OK)
        return 1;
    const char *s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    if (!s)
        return 1;
    return !strncmp(s, "08", 2) || !strncmp(s, "40", 2) || !strncmp(s, "53", 2) ||
           !strncmp(s, "57", 2);
}

ks_verdict ks_ledger_exec(ks_ledger_pg *l, const char *sql, int nparams,
                          const char *const *params, const int *lengths, ks_sql_result **out)
{
    if (out)
        *out = NULL;
    const char *why = NULL;
    if (!l || !l->open)
        why = "sql_exec outside a mailbox handler (no ledger transaction open)";
    else if (!sql || nparams < 0 || nparams > 65535 || (nparams && !params))
        why = "sql_exec: bad argument";
    else if (ks_ledger_sql_is_txn_control(sql))
        why = "sql_exec: transaction control is the ledger's (BEGIN, COMMIT, ROLLBACK, "
              "SAVEPOINT, SET ... refused)";
    if (why) {
        ks_error(l ? l->where : "ledger", "%s", why);
        return KS_FATAL;
    }
    int *fmt = NULL;
    if (lengths && nparams) {
        if (!(fmt = calloc((size_t)nparams, sizeof *fmt)))
            return KS_RETRY;
        for (int i = 0; i < nparams; i++)
            fmt[i] = lengths[i] >= 0; /* raw bytes: binary format */
    }
    PGresult *r = PQexecParams(l->conn, sql, nparams, NULL, params, lengths, fmt, 0);
    free(fmt);
    ExecStatusType s = PQresultStatus(r);
    if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) {
        ks_sql_result *res = out ? malloc(sizeof *res) : NULL;
        if (out && !res) {
            PQclear(r);
            return KS_RETRY;
        }
        if (res) {
            res->res = r;
            *out = res;
        } else
            PQclear(r);
        return KS_OK;
    }
    ks_verdict v = transient(r, l->conn) ? KS_RETRY : KS_SKIP;
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    ks_warn(l->where, "ledger: handler statement failed (SQLSTATE %s, %s): %s",
            state ? state : "-", v == KS_RETRY ? "retried" : "the transaction is failed",
            PQresultErrorMessage(r));
    PQclear(r);
    return v;
}

int ks_sql_rows(const ks_sql_result *r)
{
    return r ? PQntuples(r->res) : 0;
}

int ks_sql_cols(const ks_sql_result *r)
{
    return r ? PQnfields(r->res) : 0;
}

int ks_sql_value(const ks_sql_result *r, int row, int col, ks_bytes *out)
{
    if (!r || !out || row < 0 || col < 0 || row >= PQntuples(r->res) ||
        col >= PQnfields(r->res))
        return KS_ERR_INVALID;
    if (PQgetisnull(r->res, row, col))
        return KS_ERR_NOT_FOUND;
    *out = (ks_bytes){PQgetvalue(r->res, row, col), (size_t)PQgetlength(r->res, row, col)};
    return 0;
}

void ks_sql_free(ks_sql_result *r)
{
    if (!r)
        return;
    PQclear(r->res);
    free(r);
}

#endif /* KS_HAVE_POSTGRES */
