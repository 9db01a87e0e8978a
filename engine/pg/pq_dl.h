/*
 * pq_dl.h - libpq, loaded at run time. The engine binary does not link
 * libpq: the first PostgreSQL backend to start (an `outbox: { backend:
 * postgres }`, a mailbox's `ledger_backend: postgres`) calls ks_pq_load(),
 * which dlopens libpq.so.5 (Debian: libpq5) and fills ks_pq_fn with the
 * functions the engine uses. A pipeline without PostgreSQL never loads it.
 *
 * Files that call libpq include this header instead of <libpq-fe.h>: the
 * macros at the end turn each PQxxx(...) into a call through ks_pq_fn, so
 * the code reads as plain libpq. A PQ function missing from the list
 * below is a link error (no libpq on the link line), not a silent direct
 * call. Only the headers of libpq (libpq-dev) are needed to build.
 *
 * KS_LIBPQ=PATH (environment) loads PATH instead of libpq.so.5.
 */
#ifndef KS_PQ_DL_H
#define KS_PQ_DL_H

#include <stddef.h>

#include <libpq-fe.h>

/* Every libpq function the engine calls. */
#define KS_PQ_FUNCTIONS(X)                                                                    \
    X(PQclear) X(PQcmdStatus) X(PQcmdTuples) X(PQconnectdb) X(PQconninfoFree)                 \
    X(PQconninfoParse) X(PQconsumeInput) X(PQdb) X(PQerrorMessage) X(PQexec)                  \
    X(PQexecParams) X(PQfinish) X(PQfreemem) X(PQgetisnull) X(PQgetlength) X(PQgetvalue)     \
    X(PQhost) X(PQnfields) X(PQnotifies) X(PQntuples) X(PQresultErrorField)                  \
    X(PQresultErrorMessage) X(PQresultStatus) X(PQsocket) X(PQstatus)                        \
    X(PQtransactionStatus) X(PQunescapeBytea)

/* __typeof__ (a GNU extension gcc and clang have in C11 mode) gives each
 * pointer exactly the type libpq-fe.h declares. */
#define KS_PQ_FIELD(f) __typeof__(f) *f;
typedef struct ks_pq_table {
    KS_PQ_FUNCTIONS(KS_PQ_FIELD)
} ks_pq_table;
#undef KS_PQ_FIELD

/* The functions, all set once ks_pq_load() returned 0; NULL before. */
extern ks_pq_table ks_pq_fn;

/* Load libpq (KS_LIBPQ or libpq.so.5) and fill ks_pq_fn, once per process
 * (thread-safe; later calls answer what the first one found). 0; or
 * KS_ERR_UNSUPPORTED, with err (may be NULL) saying which library or
 * function is missing and which package provides it. */
int ks_pq_load(char *err, size_t errlen);

/* Not in pq_dl.c, which names the fields through KS_PQ_FUNCTIONS (an
 * X-macro's arguments are expanded before use). */
#ifndef KS_PQ_DL_SELF
#define PQclear (ks_pq_fn.PQclear)
#define PQcmdStatus (ks_pq_fn.PQcmdStatus)
#define PQcmdTuples (ks_pq_fn.PQcmdTuples)
#define PQconnectdb (ks_pq_fn.PQconnectdb)
#define PQconninfoFree (ks_pq_fn.PQconninfoFree)
#define PQconninfoParse (ks_pq_fn.PQconninfoParse)
#define PQconsumeInput (ks_pq_fn.PQconsumeInput)
#define PQdb (ks_pq_fn.PQdb)
#define PQerrorMessage (ks_pq_fn.PQerrorMessage)
#define PQexec (ks_pq_fn.PQexec)
#define PQexecParams (ks_pq_fn.PQexecParams)
#define PQfinish (ks_pq_fn.PQfinish)
#define PQfreemem (ks_pq_fn.PQfreemem)
#define PQgetisnull (ks_pq_fn.PQgetisnull)
#define PQgetlength (ks_pq_fn.PQgetlength)
#define PQgetvalue (ks_pq_fn.PQgetvalue)
#define PQhost (ks_pq_fn.PQhost)
#define PQnfields (ks_pq_fn.PQnfields)
#define PQnotifies (ks_pq_fn.PQnotifies)
#define PQntuples (ks_pq_fn.PQntuples)
#define PQresultErrorField (ks_pq_fn.PQresultErrorField)
#define PQresultErrorMessage (ks_pq_fn.PQresultErrorMessage)
#define PQresultStatus (ks_pq_fn.PQresultStatus)
#define PQsocket (ks_pq_fn.PQsocket)
#define PQstatus (ks_pq_fn.PQstatus)
#define PQtransactionStatus (ks_pq_fn.PQtransactionStatus)
#define PQunescapeBytea (ks_pq_fn.PQunescapeBytea)
#endif

#endif /* KS_PQ_DL_H */
