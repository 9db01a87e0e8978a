/*
 * query_time.h - times on the command line of `kstreams query` (window
 * bounds): parsed from epoch milliseconds or ISO-8601, printed as
 * ISO-8601 UTC with milliseconds.
 */
#ifndef KS_CLI_QUERY_TIME_H
#define KS_CLI_QUERY_TIME_H

#include <stddef.h>
#include <stdint.h>

/* Epoch milliseconds ("-5000", "1700000000000") or an ISO-8601 date-time
 * in UTC or with an offset: YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS[.fff]] with
 * Z or +HH:MM / -HH:MM (a time needs one: local time is refused). 0 with
 * *ms, or -1 when `s` is none of these. */
int ks_query_parse_time(const char *s, int64_t *ms);

/* `ms` as "2026-03-02T10:15:00.000Z" into buf (len >= 32 holds any). */
void ks_query_format_time(int64_t ms, char *buf, size_t len);

#endif /* KS_CLI_QUERY_TIME_H */
