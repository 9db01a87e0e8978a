/*
 * outbox_pg_assign.c - see outbox_pg_assign.h.
 *
 * The cache is an open-addressing hash of "topic\0user" -> partition,
 * grown at half full. Users are sent as a text[] literal, each element
 * double-quoted with " and \ escaped, so any aggregate travels unchanged.
 */
#include "outbox/outbox_pg_assign.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka/topic_grow.h"
#include "pg/pq_dl.h"

#define ASSIGN_SQL \
    "SELECT user_id, kafka_partition FROM ks_assign_partitions($1, $2::text[], $3::int)"

typedef struct slot {
    char *key; /* topic, '\0', user, '\0'; NULL: empty */
    size_t len;
    int32_t partition;
} slot;

struct ks_pg_assign {
    int max_users;
    slot *slots;
    size_t cap, used;
};

ks_pg_assign *ks_pg_assign_new(int max_users_per_partition)
{
    ks_pg_assign *a = calloc(1, sizeof *a);
    if (a && !(a->slots = calloc(a->cap = 1024, sizeof *a->slots))) {
        free(a);
        return NULL;
    }
    if (a)
        a->max_users = max_users_per_partition;
    return a;
}

void ks_pg_assign_free(ks_pg_assign *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->cap; i++)
        free(a->slots[i].key);
    free(a->slots);
    free(a);
}

static size_t hash(const char *k, size_t n)
{
    size_t h = 14695981039346656037u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)k[i]) * 1099511628211u;
    return h;
}

/* The slot of key k (found, or the empty one where it would go). */
static slot *find(slot *s, size_t cap, const char *k, size_t n)
{
    for (size_t i = hash(k, n) & (cap - 1);; i = (i + 1) & (cap - 1))
        if (!s[i].key || (s[i].len == n && !memcmp(s[i].key, k, n)))
            return &s[i];
}

/* "topic\0user\0" in buf (malloc'd); its length without the last NUL. */
static char *make_key(const char *topic, const char *user, size_t *len)
{
    size_t t = strlen(topic), u = strlen(user);
    char *k = malloc(t + u + 2);
    if (k) {
        memcpy(k, topic, t + 1);
        memcpy(k + t + 1, user, u + 1);
    }
    *len = t + 1 + u;
    return k;
}

static int lookup(ks_pg_assign *a, const char *topic, const char *user, int32_t *p)
{
    size_t n;
    char *k = make_key(topic, user, &n);
    slot *s = k ? find(a->slots, a->cap, k, n) : NULL;
    free(k);
    if (!s || !s->key)
        return -1;
    *p = s->partition;
    return 0;
}

static int grow_cache(ks_pg_assign *a)
{
    size_t cap = a->cap * 2;
    slot *s = calloc(cap, sizeof *s);
    if (!s)
        return -1;
    for (size_t i = 0; i < a->cap; i++)
        if (a->slots[i].key)
            *find(s, cap, a->slots[i].key, a->slots[i].len) = a->slots[i];
    free(a->slots);
    a->slots = s;
    a->cap = cap;
    return 0;
}

static int remember(ks_pg_assign *a, const char *topic, const char *user, int32_t p)
{
    if ((a->used + 1) * 2 > a->cap && grow_cache(a) != 0)
        return -1;
    size_t n;
    char *k = make_key(topic, user, &n);
    if (!k)
        return -1;
    slot *s = find(a->slots, a->cap, k, n);
    if (s->key) {
        free(k);
    } else {
        s->key = k;
        s->len = n;
        a->used++;
    }
    s->partition = p;
    return 0;
}

/* The users[i] of `topic` that are not cached, as a text[] literal
 * (malloc'd); *count of them. NULL when out of memory. */
static char *missing_array(ks_pg_assign *a, const char *topic, const char *const *topics,
                           const char *const *users, int n, int *count)
{
    size_t cap = 3;
    for (int i = 0; i < n; i++)
        cap += 2 * strlen(users[i]) + 3;
    char *s = malloc(cap), *w = s;
    if (!s)
        return NULL;
    *w++ = '{';
    *count = 0;
    for (int i = 0; i < n; i++) {
        int32_t p;
        if (strcmp(topics[i], topic) != 0 || lookup(a, topic, users[i], &p) == 0)
            continue;
        if ((*count)++)
            *w++ = ',';
        *w++ = '"';
        for (const char *c = users[i]; *c; c++) {
            if (*c == '"' || *c == '\\')
                *w++ = '\\';
            *w++ = *c;
        }
        *w++ = '"';
    }
    *w++ = '}';
    *w = '\0';
    return s;
}

/* One ks_assign_partitions() call for the uncached users of `topic`. */
static int assign_topic(ks_pg_assign *a, PGconn *conn, const char *topic,
                        const char *const *topics, const char *const *users, int n, char *err,
                        size_t errlen)
{
    int count;
    char *arr = missing_array(a, topic, topics, users, n, &count), max[16];
    if (!arr) {
        snprintf(err, errlen, "partition assignment: out of memory");
        return -2;
    }
    if (count == 0) {
        free(arr);
        return 0;
    }
    snprintf(max, sizeof max, "%d", a->max_users);
    const char *v[] = {topic, arr, max};
    PGresult *r = PQexecParams(conn, ASSIGN_SQL, 3, NULL, v, NULL, NULL, 0);
    free(arr);
    int rc = 0;
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        snprintf(err, errlen, "partition assignment (ks_assign_partitions, schema version 3): "
                 "%s", PQresultErrorMessage(r));
        rc = -2;
    }
    for (int i = 0; rc == 0 && i < PQntuples(r); i++)
        if (remember(a, topic, PQgetvalue(r, i, 0), (int32_t)atoi(PQgetvalue(r, i, 1))) != 0) {
            snprintf(err, errlen, "partition assignment: out of memory");
            rc = -2;
        }
    PQclear(r);
    return rc;
}

int ks_pg_assign_partitions(ks_pg_assign *a, PGconn *conn, rd_kafka_t *rk,
                            const char *const *topics, const char *const *users, int n,
                            int32_t *parts, char *err, size_t errlen)
{
    int rc = 0;
    /* each distinct topic once: at its first row */
    for (int i = 0; rc == 0 && i < n; i++) {
        int first = 1;
        for (int j = 0; j < i && first; j++)
            first = strcmp(topics[j], topics[i]) != 0;
        if (first)
            rc = assign_topic(a, conn, topics[i], topics, users, n, err, errlen);
    }
    for (int i = 0; rc == 0 && i < n; i++)
        if (lookup(a, topics[i], users[i], &parts[i]) != 0) {
            snprintf(err, errlen, "user %s: ks_assign_partitions returned no partition",
                     users[i]);
            rc = -2;
        }
    for (int i = 0; rc == 0 && i < n; i++) {
        int32_t need = 0;
        for (int j = i; j < n; j++)
            if (!strcmp(topics[j], topics[i]) && parts[j] + 1 > need)
                need = parts[j] + 1;
        int first = 1;
        for (int j = 0; j < i && first; j++)
            first = strcmp(topics[j], topics[i]) != 0;
        if (first && ks_topic_grow(rk, topics[i], need, NULL, err, errlen) != 0)
            rc = -1;
    }
    return rc;
}
