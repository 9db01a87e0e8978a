/*
 * outbox_pg_sql.h - the statements of the PostgreSQL outbox dispatcher
 * (outbox_pg.c), each a compare-and-set on the row's status. Values are
 * always parameters ($1...); only the table name is spliced in, and the
 * configuration allows it to be [A-Za-z_][A-Za-z0-9_]* only.
 */
#ifndef KS_OUTBOX_PG_SQL_H
#define KS_OUTBOX_PG_SQL_H

typedef struct ks_pg_sql {
    char claim[768];   /* $1 batch size, $2 default topic -> the claimed rows */
    char plan[512];    /* $1 event ids, $2 partitions, $3 probe_from, $4 attempts */
    char done[384];    /* $1 event id, $2 attempts, $3 partition, $4 offset */
    char requeue[384]; /* $1 event id, $2 attempts, $3 error, $4 attempt given back */
    char fail[384];    /* $1 event id, $2 attempts, $3 error */
    char stale[512];   /* $1 interval, $2 default topic -> stale DISPATCHING rows */
    char pending[160]; /* any PENDING row? */
    char counts[160];  /* rows per status */
} ks_pg_sql;

/* Fill q for `table` (a plain identifier of at most 63 bytes). */
void ks_pg_sql_build(ks_pg_sql *q, const char *table);

#endif /* KS_OUTBOX_PG_SQL_H */
