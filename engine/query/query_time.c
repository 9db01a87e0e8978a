/*
 * query_time.c - the times of `kstreams query` on windowed stores (see
 * query_time.h): epoch milliseconds and ISO-8601, without the C library's
 * time zone (the proleptic Gregorian calendar, in UTC).
 */
#include "query/query_time.h"

#include <stdio.h>
#include <string.h>

/* ---- times -------------------------------------------------------------- */

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

/* "2026-03-02T10:15:00.000Z" */
void ks_query_format_time(int64_t ms, char *buf, size_t len)
{
    int64_t days = ms / 86400000, rem = ms % 86400000;
    if (rem < 0) {
        rem += 86400000;
        days--;
    }
    int64_t y;
    int m, d;
    civil_from_days(days, &y, &m, &d);
    snprintf(buf, len, "%04lld-%02d-%02dT%02d:%02d:%02d.%03dZ", (long long)y, m, d,
             (int)(rem / 3600000), (int)(rem / 60000 % 60), (int)(rem / 1000 % 60),
             (int)(rem % 1000));
}

/* n decimal digits at *p into *v; advances *p. */
static int digits(const char **p, int n, int *v)
{
    *v = 0;
    for (int i = 0; i < n; i++, (*p)++) {
        if (**p < '0' || **p > '9')
            return -1;
        *v = *v * 10 + (**p - '0');
    }
    return 0;
}

/* Epoch milliseconds ("-5000", "1700000000000") or an ISO-8601 date-time
 * in UTC or with an offset: YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS[.fff]] with
 * Z or +HH:MM / -HH:MM (a time needs one). 0 or -1. */
int ks_query_parse_time(const char *s, int64_t *ms)
{
    const char *p = s;
    int neg = *p == '-';
    p += neg;
    size_t nd = strspn(p, "0123456789");
    if (nd > 0 && p[nd] == '\0') {
        if (nd > 18)
            return -1;
        int64_t v = 0;
        for (; *p; p++)
            v = v * 10 + (*p - '0');
        *ms = neg ? -v : v;
        return 0;
    }
    if (neg || nd != 4)
        return -1;
    int y, mo, d, h = 0, mi = 0, sec = 0, frac = 0;
    if (digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' ||
        digits(&p, 2, &d))
        return -1;
    static const int mdays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1])
        return -1;
    if (mo == 2 && d == 29 && !(y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)))
        return -1;
    int64_t offset_min = 0;
    if (*p == 'T' || *p == 't') {
        p++;
        if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi))
            return -1;
        if (*p == ':') {
            p++;
            if (digits(&p, 2, &sec))
                return -1;
            if (*p == '.' || *p == ',') {
                p++;
                size_t nf = strspn(p, "0123456789");
                if (nf == 0 || nf > 9)
                    return -1;
                for (size_t i = 0; i < 3; i++)
                    frac = frac * 10 + (i < nf ? p[i] - '0' : 0);
                p += nf;
            }
        }
        if (h > 23 || mi > 59 || sec > 59)
            return -1;
        if (*p == 'Z' || *p == 'z') {
            p++;
        } else if (*p == '+' || *p == '-') {
            int sign = *p++ == '-' ? -1 : 1, oh, om = 0;
            if (digits(&p, 2, &oh))
                return -1;
            if (*p == ':')
                p++;
            if (*p && digits(&p, 2, &om))
                return -1;
            if (oh > 23 || om > 59)
                return -1;
            offset_min = sign * (oh * 60 + om);
        } else {
            return -1; /* local time: not accepted */
        }
    }
    if (*p)
        return -1;
    int64_t days = days_from_civil(y, mo, d);
    *ms = ((days * 24 + h) * 60 + mi - offset_min) * 60000 + (int64_t)sec * 1000 + frac;
    return 0;
}
