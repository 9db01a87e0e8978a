/*
 * join_fk.c - the foreign-key table-table join (join_fk.h), Kafka Streams'
 * KIP-213 subscription/response protocol in three processor types that a
 * pipeline chains through two topics (docs/tables-and-joins.md, "Foreign-key
 * joins"):
 *
 *  - fk_subscribe (left side, task of the left key K): on each change of the
 *    left table, reads the foreign key f at `foreign_key:` (a JSON pointer)
 *    and sends, keyed by f, a subscription {op, hash of the left value, K};
 *    an unsubscription to the old f when f changed; and, when the value has
 *    no foreign key (pointer absent or null, or a tombstone), an "N" record
 *    keyed by K that the right side answers with no right value. Its store
 *    keeps the foreign key last sent per K (so a change can retract it).
 *  - fk_register (right side, task of f): keeps the subscriptions, key
 *    (f, K), value the hash; answers a subscription with the right table's
 *    value for f (or none), and each change of the right table with one
 *    response per subscriber; responses are keyed by K.
 *  - fk_resolve (left side again): drops a response whose hash is not the
 *    hash of the left table's current value for K (a stale one: the left
 *    value changed after it was sent), else emits the join, or a tombstone
 *    (left value gone; inner join without a right value).
 *
 * Wire formats (topic values, `bytes` serde): subscription = 0xFF, op byte
 * ('S', 'U', 'N'), hash (8 bytes big-endian), K; response = hash, 1 byte (1: a
 * right value follows), the right value's timestamp (8 bytes), the right
 * value. The hash of an absent left value is 0; of a present one FNV-1a
 * 64 with the low bit set (never 0).
 *
 * fk_register tells a subscription from a right table change by its input
 * (input_name) when it reads both directly; behind a repartition topic the
 * engine inserts (fk_subscribe changes keys), both arrive from that topic's
 * source, and a subscription is known by its first byte 0xFF, which no UTF-8
 * text (a json or string value) has.
 */
#include "join_fk.h"

#include <stdlib.h>
#include <string.h>

#include "joiner.h"

static const ks_host_api *host;

#define TS_LEN 8  /* the timestamp before a table store's value */
#define HASH_LEN 8
#define FK_MAX 255 /* bytes of a foreign key (the subscription store's key) */
#define SUB_MAGIC 0xFF /* first byte of a subscription: never in UTF-8 text */

void ks_join_fk_set_host(const ks_host_api *api)
{
    host = api;
}

static uint64_t value_hash(const ks_bytes *v)
{
    if (!v)
        return 0;
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = v->data;
    for (size_t i = 0; i < v->len; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h | 1;
}

/* Look up key in a table's store: 0 with *value and *ts, 1 absent, -1 the
 * store failed or holds no table value. */
static int table_get(ks_store *st, ks_bytes key, ks_bytes *value, int64_t *ts)
{
    ks_bytes stored;
    int rc = host->store_get(st, key, &stored);
    if (rc == KS_ERR_NOT_FOUND)
        return 1;
    if (rc != 0 || stored.len < TS_LEN)
        return -1;
    *ts = ks_int64_decode(stored.data);
    *value = (ks_bytes){(const unsigned char *)stored.data + TS_LEN, stored.len - TS_LEN};
    return 0;
}

static ks_verdict forward(ks_ctx *ctx, const ks_record *tmpl, const void *key, size_t klen,
                          const void *value, size_t vlen, int64_t ts)
{
    ks_record out = *tmpl;
    out.key = key;
    out.key_len = klen;
    out.value = value;
    out.value_len = vlen;
    out.timestamp = ts;
    return host->forward(ctx, &out) == 0 ? KS_OK : KS_RETRY;
}

/* The node's store `name`: one of its own (`store:`) or a table it reads
 * (`from:`); KS_FATAL, logged, when it has none of that name. */
static ks_verdict named_store(ks_ctx *ctx, const char *name, ks_store **out)
{
    if (name && host->store(ctx, name, out) == 0)
        return KS_OK;
    host->log(ctx, KS_LOG_ERROR, "join: node '%s': no store '%s' (list it in `store:`, or the "
                                 "table in `from:`)",
              host->node_name(ctx), name ? name : "");
    return KS_FATAL;
}

/* ---- fk_subscribe ------------------------------------------------------ */

typedef struct sub_state {
    char pointer[256];      /* `foreign_key:`, when no function gives it */
    ks_key_mapper_fn fk_fn; /* `functions: { foreign_key: }`, or NULL */
    ks_buf *fk_out;         /* fk_fn's output; owned */
    ks_store *last; /* K -> the foreign key last subscribed */
    unsigned char *buf;
    size_t cap;
} sub_state;

static const ks_config_field sub_fields[] = {
    {"foreign_key", KS_CONFIG_STRING, 0, NULL,
     "JSON pointer to the right table's key in the left value, e.g. /customer_id "
     "(or functions: { foreign_key: plugin.fn })"},
    {"foreign_keys", KS_CONFIG_STRING, 1, NULL,
     "the node's store of the foreign key last subscribed per left key"},
};

static ks_verdict sub_init(ks_ctx *ctx, void **state)
{
    sub_state *s = calloc(1, sizeof *s);
    if (!s)
        return KS_FATAL;
    *state = s;
    void (*fn)(void) = NULL;
    int rc = host->function(ctx, "foreign_key", KS_FN_KEY_MAPPER, &fn);
    if (rc != 0 && rc != KS_ERR_NOT_FOUND)
        return KS_FATAL; /* logged by the host: not a key mapper */
    const char *ptr = NULL, *last = NULL;
    host->config_string(ctx, "foreign_keys", &last);
    if (rc == 0) {
        s->fk_fn = (ks_key_mapper_fn)fn;
        return (s->fk_out = host->buf_new()) ? named_store(ctx, last, &s->last) : KS_FATAL;
    }
    if (host->config_string(ctx, "foreign_key", &ptr) != 0 || !ptr ||
        strlen(ptr) >= sizeof s->pointer || (ptr[0] && ptr[0] != '/')) {
        host->log(ctx, KS_LOG_ERROR, "join: node '%s': foreign_key must be a JSON pointer "
                                     "such as /customer_id",
                  host->node_name(ctx));
        return KS_FATAL;
    }
    strcpy(s->pointer, ptr);
    return named_store(ctx, last, &s->last);
}

static void sub_close(ks_ctx *ctx, void *state)
{
    (void)ctx;
    sub_state *s = state;
    if (s) {
        free(s->buf);
        host->buf_free(s->fk_out);
    }
    free(s);
}

/* The foreign key the node's function gives left record (key, v) into fk
 * (cap FK_MAX), its length into *len as foreign_key does; the function's
 * verdict when it is not KS_OK (KS_SKIP: poison). */
static ks_verdict mapped_foreign_key(const sub_state *s, ks_bytes key, const ks_bytes *v,
                                     char *fk, int *len)
{
    ks_bytes value = v ? *v : (ks_bytes){NULL, 0};
    host->buf_set(s->fk_out, NULL, 0);
    ks_verdict verdict = s->fk_fn(host, key, value, s->fk_out);
    if (verdict != KS_OK)
        return verdict;
    ks_bytes out = host->buf_get(s->fk_out);
    *len = out.len > FK_MAX ? -1 : (int)out.len;
    if (*len > 0)
        memcpy(fk, out.data, out.len);
    return KS_OK;
}

/* The foreign key of left value v into fk (cap FK_MAX): its length, 0 when
 * it has none (absent, null, not a string or number), -1 when too long. */
static int foreign_key(const sub_state *s, const ks_bytes *v, char *fk)
{
    ks_json_span sp;
    if (!v || host->json_find(v->data, v->len, s->pointer, &sp) != KS_JSON_FOUND)
        return 0;
    size_t len = 0;
    if (sp.type == KS_JSON_STRING) {
        if (host->json_string(&sp, fk, FK_MAX, &len) != 0)
            return 0;
    } else if (sp.type == KS_JSON_NUMBER) {
        len = sp.len; /* a number's text is the key, as written */
        if (len <= FK_MAX)
            memcpy(fk, sp.data, len);
    } else {
        return 0;
    }
    return len > FK_MAX ? -1 : (int)len;
}

static ks_verdict send_sub(ks_ctx *ctx, sub_state *s, const ks_record *rec, char op,
                           uint64_t h, const void *to, size_t to_len)
{
    size_t need = 2 + HASH_LEN + rec->key_len;
    if (need > s->cap) {
        unsigned char *b = realloc(s->buf, need);
        if (!b)
            return KS_RETRY;
        s->buf = b;
        s->cap = need;
    }
    s->buf[0] = SUB_MAGIC;
    s->buf[1] = (unsigned char)op;
    ks_int64_encode((int64_t)h, s->buf + 2);
    memcpy(s->buf + 2 + HASH_LEN, rec->key, rec->key_len);
    return forward(ctx, rec, to, to_len, s->buf, need, rec->timestamp);
}

static ks_verdict sub_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    sub_state *s = state;
    if (!rec->key || rec->key_len == 0)
        return KS_OK; /* the table ignored it too */
    ks_bytes key = {rec->key, rec->key_len}, val = {rec->value, rec->value_len};
    const ks_bytes *v = rec->value ? &val : NULL;
    char fk[FK_MAX], old[FK_MAX];
    int fk_len = 0;
    if (!s->fk_fn) {
        fk_len = foreign_key(s, v, fk);
    } else {
        ks_verdict verdict = mapped_foreign_key(s, key, v, fk, &fk_len);
        if (verdict == KS_SKIP)
            host->log(ctx, KS_LOG_WARN, "join: node '%s': poison record %s[%d]@%lld: the "
                                        "foreign key function refused it",
                      host->node_name(ctx), rec->topic ? rec->topic : "-",
                      (int)rec->partition, (long long)rec->offset);
        if (verdict != KS_OK)
            return verdict;
    }
    if (fk_len < 0) {
        host->log(ctx, KS_LOG_WARN, "join: node '%s': foreign key over %d bytes at offset "
                                    "%lld: treated as missing",
                  host->node_name(ctx), FK_MAX, (long long)rec->offset);
        fk_len = 0;
    }
    ks_bytes stored;
    int rc = host->store_get(s->last, key, &stored);
    if (rc != 0 && rc != KS_ERR_NOT_FOUND)
        return KS_RETRY;
    size_t old_len = rc == 0 && stored.len <= FK_MAX ? stored.len : 0;
    if (old_len)
        memcpy(old, stored.data, old_len);
    uint64_t h = value_hash(v);
    ks_verdict out = KS_OK;
    /* the old subscription goes when the key moved or went away */
    if (old_len && (old_len != (size_t)fk_len || memcmp(old, fk, old_len) != 0))
        out = send_sub(ctx, s, rec, 'U', h, old, old_len);
    if (out == KS_OK && fk_len > 0) {
        out = send_sub(ctx, s, rec, 'S', h, fk, (size_t)fk_len);
        if (out == KS_OK && host->store_put(s->last, key, (ks_bytes){fk, (size_t)fk_len}) != 0)
            out = KS_RETRY;
    } else if (out == KS_OK) {
        /* no foreign key: answered without a right value, on the left key */
        out = send_sub(ctx, s, rec, 'N', h, rec->key, rec->key_len);
        if (out == KS_OK && old_len && host->store_delete(s->last, key) != 0)
            out = KS_RETRY;
    }
    return out;
}

const ks_processor_type ks_join_fk_subscribe_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "fk_subscribe",
    .description = "foreign-key join, left side: subscriptions keyed by the foreign key",
    .flags = KS_PROC_NEEDS_STORE | KS_PROC_CHANGES_KEY,
    .config = sub_fields,
    .config_count = sizeof sub_fields / sizeof sub_fields[0],
    .state_version = 1,
    .init = sub_init,
    .process = sub_process,
    .close = sub_close,
};

/* ---- fk_register ------------------------------------------------------- */

typedef struct reg_state {
    ks_store *subs;  /* (f, K) -> hash */
    ks_store *right; /* the right table */
    const char *right_name;
    unsigned char *buf;
    size_t cap;
} reg_state;

static const ks_config_field reg_fields[] = {
    {"right", KS_CONFIG_STRING, 1, NULL, "the right table (one of the node's from:)"},
    {"subscriptions", KS_CONFIG_STRING, 1, NULL, "the node's store of subscriptions"},
};

static ks_verdict reg_init(ks_ctx *ctx, void **state)
{
    reg_state *s = calloc(1, sizeof *s);
    if (!s)
        return KS_FATAL;
    *state = s;
    const char *subs = NULL;
    host->config_string(ctx, "right", &s->right_name);
    host->config_string(ctx, "subscriptions", &subs);
    if (named_store(ctx, s->right_name, &s->right) != KS_OK ||
        named_store(ctx, subs, &s->subs) != KS_OK)
        return KS_FATAL;
    return KS_OK;
}

static void reg_close(ks_ctx *ctx, void *state)
{
    (void)ctx;
    reg_state *s = state;
    if (s)
        free(s->buf);
    free(s);
}

static int reserve(unsigned char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    unsigned char *b = realloc(*buf, need);
    if (!b)
        return -1;
    *buf = b;
    *cap = need;
    return 0;
}

/* Store key of subscription (f, K): 2 bytes f's length, f, K. */
static size_t sub_key(unsigned char *out, const void *f, size_t flen, const void *k,
                      size_t klen)
{
    out[0] = (unsigned char)(flen >> 8);
    out[1] = (unsigned char)flen;
    memcpy(out + 2, f, flen);
    if (klen)
        memcpy(out + 2 + flen, k, klen);
    return 2 + flen + klen;
}

/* Send the response (hash h, right value of f or none) to left key k. */
static ks_verdict respond(ks_ctx *ctx, reg_state *s, const ks_record *tmpl, ks_bytes f,
                          uint64_t h, const void *k, size_t klen)
{
    ks_bytes rv = {NULL, 0};
    int64_t rts = 0;
    int rrc = f.len ? table_get(s->right, f, &rv, &rts) : 1;
    if (rrc < 0)
        return KS_RETRY;
    size_t need = HASH_LEN + 1 + TS_LEN + (rrc == 0 ? rv.len : 0);
    if (reserve(&s->buf, &s->cap, need) != 0)
        return KS_RETRY;
    ks_int64_encode((int64_t)h, s->buf);
    s->buf[HASH_LEN] = rrc == 0;
    ks_int64_encode(rts, s->buf + HASH_LEN + 1);
    if (rrc == 0 && rv.len)
        memcpy(s->buf + HASH_LEN + 1 + TS_LEN, rv.data, rv.len);
    return forward(ctx, tmpl, k, klen, s->buf, need, tmpl->timestamp);
}

typedef struct scan {
    ks_ctx *ctx;
    reg_state *s;
    const ks_record *rec;
    size_t flen;
    ks_verdict v;
    /* responses are collected first: no store access inside the scan */
    unsigned char *keys;
    size_t len, cap;
} scan;

static int collect(void *arg, ks_bytes key, ks_bytes value)
{
    scan *sc = arg;
    if (value.len != HASH_LEN || key.len <= 2 + sc->flen)
        return 0;
    size_t klen = key.len - 2 - sc->flen;
    if (reserve(&sc->keys, &sc->cap, sc->len + 2 + HASH_LEN + klen) != 0) {
        sc->v = KS_RETRY;
        return 1;
    }
    unsigned char *p = sc->keys + sc->len;
    p[0] = (unsigned char)(klen >> 8);
    p[1] = (unsigned char)klen;
    memcpy(p + 2, value.data, HASH_LEN);
    memcpy(p + 2 + HASH_LEN, (const unsigned char *)key.data + 2 + sc->flen, klen);
    sc->len += 2 + HASH_LEN + klen;
    return 0;
}

/* A change of the right table at f: a response to every subscriber. */
static ks_verdict right_changed(ks_ctx *ctx, reg_state *s, const ks_record *rec)
{
    if (!rec->key || rec->key_len == 0 || rec->key_len > FK_MAX)
        return KS_OK; /* no subscription can have it */
    unsigned char from[2 + FK_MAX], to[2 + FK_MAX];
    size_t n = sub_key(from, rec->key, rec->key_len, NULL, 0), tn = n;
    memcpy(to, from, n);
    /* the end of the prefix range: the prefix plus one, carried */
    while (tn > 0 && to[tn - 1] == 0xff)
        tn--;
    if (tn > 0)
        to[tn - 1]++;
    scan sc = {ctx, s, rec, rec->key_len, KS_OK, NULL, 0, 0};
    int rc = host->store_range(s->subs, (ks_bytes){from, n}, (ks_bytes){to, tn}, collect,
                               &sc);
    ks_verdict v = rc != 0 ? KS_RETRY : sc.v;
    ks_bytes f = {rec->key, rec->key_len};
    for (size_t off = 0; v == KS_OK && off < sc.len;) {
        const unsigned char *p = sc.keys + off;
        size_t klen = (size_t)p[0] << 8 | p[1];
        uint64_t h = (uint64_t)ks_int64_decode(p + 2);
        v = respond(ctx, s, rec, f, h, p + 2 + HASH_LEN, klen);
        off += 2 + HASH_LEN + klen;
    }
    free(sc.keys);
    return v;
}

static ks_verdict reg_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    reg_state *s = state;
    const char *in = host->input_name(ctx);
    const unsigned char *v = rec->value;
    int is_sub = v && rec->value_len > 2 + HASH_LEN && v[0] == SUB_MAGIC;
    if (!is_sub || (in && s->right_name && strcmp(in, s->right_name) == 0))
        return right_changed(ctx, s, rec);
    if (!rec->key || rec->key_len == 0) {
        host->metric_add(ctx, "bad_subscriptions", 1);
        return KS_OK;
    }
    char op = (char)v[1];
    uint64_t h = (uint64_t)ks_int64_decode(v + 2);
    const void *k = v + 2 + HASH_LEN;
    size_t klen = rec->value_len - 2 - HASH_LEN;
    if (op == 'N')
        return respond(ctx, s, rec, (ks_bytes){NULL, 0}, h, k, klen);
    if (rec->key_len > FK_MAX || 2 + rec->key_len + klen > KS_KEY_MAX) {
        host->log(ctx, KS_LOG_WARN, "join: node '%s': subscription key over %d bytes",
                  host->node_name(ctx), KS_KEY_MAX);
        return KS_SKIP;
    }
    unsigned char skey[KS_KEY_MAX];
    size_t sn = sub_key(skey, rec->key, rec->key_len, k, klen);
    if (op == 'U')
        return host->store_delete(s->subs, (ks_bytes){skey, sn}) == 0 ? KS_OK : KS_RETRY;
    unsigned char hb[HASH_LEN];
    ks_int64_encode((int64_t)h, hb);
    if (host->store_put(s->subs, (ks_bytes){skey, sn}, (ks_bytes){hb, HASH_LEN}) != 0)
        return KS_RETRY;
    return respond(ctx, s, rec, (ks_bytes){rec->key, rec->key_len}, h, k, klen);
}

const ks_processor_type ks_join_fk_register_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "fk_register",
    .description = "foreign-key join, right side: subscriptions and responses",
    .flags = KS_PROC_NEEDS_STORE | KS_PROC_CHANGES_KEY,
    .config = reg_fields,
    .config_count = sizeof reg_fields / sizeof reg_fields[0],
    .state_version = 1,
    .init = reg_init,
    .process = reg_process,
    .close = reg_close,
};

/* ---- fk_resolve -------------------------------------------------------- */

typedef struct res_state {
    ks_store *left; /* the left table (`table:`) */
    int left_join;
    ks_joiner joiner;
} res_state;

static const ks_config_field res_fields[] = {
    {"kind", KS_CONFIG_STRING, 0, "inner",
     "inner: a result when the foreign key finds a right value; left: for every left value"},
    {"joiner", KS_CONFIG_STRING, 0, "pair",
     "built-in JSON joiner: pair or merge; ignored when functions: { joiner: ... } names one"},
};

static ks_verdict res_init(ks_ctx *ctx, void **state)
{
    res_state *s = calloc(1, sizeof *s);
    if (!s)
        return KS_FATAL;
    *state = s;
    if (host->store(ctx, NULL, &s->left) != 0)
        return KS_FATAL;
    static const char *const kinds[] = {"inner", "left", NULL};
    int kind = ks_join_config_choice(host, ctx, "kind", kinds);
    if (kind < 0)
        return KS_FATAL;
    s->left_join = kind == 1;
    return ks_joiner_init(&s->joiner, host, ctx);
}

static void res_close(ks_ctx *ctx, void *state)
{
    (void)ctx;
    res_state *s = state;
    if (s)
        ks_joiner_free(&s->joiner);
    free(s);
}

static ks_verdict res_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    res_state *s = state;
    if (!rec->key || rec->key_len == 0 || !rec->value ||
        rec->value_len < HASH_LEN + 1 + TS_LEN) {
        host->metric_add(ctx, "bad_responses", 1);
        return KS_OK;
    }
    const unsigned char *v = rec->value;
    uint64_t h = (uint64_t)ks_int64_decode(v);
    int has_right = v[HASH_LEN] == 1;
    int64_t ts = rec->timestamp, lts = 0, rts = ks_int64_decode(v + HASH_LEN + 1);
    ks_bytes right = {v + HASH_LEN + 1 + TS_LEN, rec->value_len - HASH_LEN - 1 - TS_LEN};
    ks_bytes l;
    int lrc = table_get(s->left, (ks_bytes){rec->key, rec->key_len}, &l, &lts);
    if (lrc < 0)
        return KS_RETRY;
    if (value_hash(lrc == 0 ? &l : NULL) != h) {
        host->metric_add(ctx, "stale_responses", 1); /* the left value moved on */
        return KS_OK;
    }
    if (lrc == 0 && lts > ts)
        ts = lts;
    if (has_right && rts > ts)
        ts = rts;
    if (lrc != 0 || (!has_right && !s->left_join))
        return forward(ctx, rec, rec->key, rec->key_len, NULL, 0, ts);
    return ks_joiner_emit(&s->joiner, ctx, rec, &l, has_right ? &right : NULL, ts);
}

const ks_processor_type ks_join_fk_resolve_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "fk_resolve",
    .description = "foreign-key join, left side: drops stale responses, emits the join",
    .flags = KS_PROC_NEEDS_STORE,
    .config = res_fields,
    .config_count = sizeof res_fields / sizeof res_fields[0],
    .state_version = 1,
    .init = res_init,
    .process = res_process,
    .close = res_close,
};
