/*
 * mailbox.c - the shipped plugin "mailbox", processor type "mailbox".
 *
 * Consumes the mailbox topic the outbox dispatcher publishes to: key = the
 * canonical user id, header `ks.event_id` = the outbox event id. Per
 * command, in the partition's (= the user's) order:
 *
 *  1. look the command up in the idempotency ledger, keyed by
 *     consumer group (the application id) + topic + partition + offset;
 *  2. not there: run the user's handler (`functions: { handler: p.fn }`,
 *     KS_FN_HANDLER): KS_OK -> SUCCESS, KS_SKIP -> PUSHED_FAILURE,
 *     KS_RETRY / KS_FATAL are returned as they are (the batch aborts and
 *     nothing of it is kept); then write the ledger row;
 *  3. there ("already processed"): log, count `already_processed`, do not
 *     run the handler; there but written for another event id (the topic
 *     was recreated and offsets restarted under an old ledger): ERROR,
 *     count `ledger_mismatch`, KS_FATAL; absent but below the partition's ledger horizon
 *     (its row was pruned, see ledger_prune): WARN, count
 *     `beyond_retention`, drop it (no handler, no result);
 *  4. either way forward the result record: key = event id, value
 *     {"status":"SUCCESS"|"PUSHED_FAILURE","result":...,"user":...,
 *     "partition":...,"offset":...,"event":<id>}, to the
 *     node's children (a sink on `<application>-outbox-results`). The
 *     engine owning the outbox applies it to the row by compare-and-set;
 *     re-forwarding the stored result in case 3 is what reconciles a
 *     success transition that went missing, without redoing the work.
 *  5. after a new ledger row, at most once per 64 offsets of its partition,
 *     delete up to 256 rows older than `ledger_retention` offsets.
 *
 * The ledger row and the handler's store writes go through the task's
 * store batch: ONE LMDB transaction, committed together or not at all
 * (with exactly-once also together with the result record and the input
 * offset in the Kafka transaction).
 *
 * State format (state_version 1): ledger store key
 * "ks.ledger/<group>/<topic>/<partition>/<offset>" (offset 20 digits),
 * value = the result record's JSON; and per group/topic/partition the
 * horizon row "ks.ledger/<group>/<topic>/<partition>/horizon", value = the
 * offset (decimal text) below which rows may have been pruned. A store
 * without horizon rows (written by 0.1.0, or never pruned) is read the
 * same way; 0.1.0 reads a pruned ledger and ignores the horizon rows.
 *
 * The ledger in PostgreSQL (`ledger_backend: postgres`, ABI 1.7): steps
 * 1-4 as above, but the row is in the table ks_mailbox_ledger
 * (sql/outbox_pg_002.sql) and each command is one PostgreSQL transaction
 * of its own, opened by ledger_begin, holding the handler's sql_exec
 * statements and the row, committed by ledger_commit before the Kafka
 * transaction: a replay (the Kafka transaction aborted, the engine killed
 * after the PostgreSQL commit) finds the row and only forwards its
 * result again (step 3). The handler's store writes are NOT in that
 * transaction: this ledger is for handlers whose effects are in
 * PostgreSQL. No retention there (step 5): see sql/outbox_pg_002.sql.
 *
 * Retention (`ledger_retention`, default 1 000 000): rows of offsets more
 * than that many offsets below the newest command of their partition are
 * deleted with store_delete (changelog tombstones, so a restore sees the
 * pruned ledger). See ledger_prune() for why this is safe and what a too
 * small retention risks.
 */
#include <kstreams/kstreams.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const ks_host_api *host;

#define EVENT_ID_HEADER "ks.event_id"
#define EVENT_ID_LEN 32
#define LEDGER_PREFIX "ks.ledger/"
#define LEDGER_HORIZON "horizon"
#define LEDGER_KEY_MAX KS_KEY_MAX
#define OFFSET_DIGITS 20
/* Pruning: at most once per LEDGER_PRUNE_EVERY offsets of a partition,
 * deleting at most LEDGER_PRUNE_MAX rows. At most 4 tombstones per command
 * on average, and at most 256 (plus one horizon row) in one record's batch;
 * a ledger over its retention (retention lowered, or an old ledger) shrinks
 * by up to 3 rows per new command until it is back within it. */
#define LEDGER_PRUNE_EVERY 64
#define LEDGER_PRUNE_MAX 256
#define LEDGER_RETENTION_DEFAULT "1000000"

/* When each (group, topic, partition) of the ledger is pruned next. Only a
 * hint: an aborted batch leaves it ahead, which delays one prune. */
typedef struct prune_slot {
    char *prefix; /* "ks.ledger/<group>/<topic>/<partition>/" */
    int64_t next_due; /* prune at the first command at or above this offset */
} prune_slot;

typedef struct mailbox_state {
    ks_store *ledger; /* NULL when the ledger is in PostgreSQL */
    int pg;           /* `ledger_backend: postgres` */
    ks_handler_fn handler;
    ks_buf *out;
    char group[256];
    int64_t retention; /* offsets kept per partition; 0: every row */
    uint64_t already;  /* repeats seen (logged sampled) */
    uint64_t beyond;   /* commands below the horizon (logged sampled) */
    prune_slot *slots;
    size_t slot_count;
    int64_t victims[LEDGER_PRUNE_MAX]; /* offsets collected by a prune scan */
} mailbox_state;

static void init_failed(ks_ctx *ctx, mailbox_state *st)
{
    if (st->pg)
        host->ledger_close(ctx);
    free(st);
}

/* `ledger_backend: postgres`: connect this instance (ABI 1.7). */
static ks_verdict open_pg_ledger(ks_ctx *ctx, mailbox_state *st)
{
    if (!KS_API_HAS(host, sql_exec)) {
        host->log(ctx, KS_LOG_ERROR,
                  "mailbox: node '%s': `ledger_backend: postgres` needs a kstreams of ABI "
                  "1.7 or later",
                  host->node_name(ctx));
        return KS_FATAL;
    }
    const char *env = NULL;
    if (host->config_string(ctx, "ledger_dsn_env", &env) != 0 || !env || !*env)
        env = NULL; /* the pipeline's postgres outbox */
    int rc = host->ledger_open(ctx, env);
    if (rc == KS_ERR_NOT_FOUND)
        host->log(ctx, KS_LOG_ERROR,
                  env ? "mailbox: node '%s': the environment variable %s (ledger_dsn_env) "
                        "is not set"
                      : "mailbox: node '%s': `ledger_backend: postgres` needs "
                        "`ledger_dsn_env` or an `outbox: { backend: postgres }`%s",
                  host->node_name(ctx), env ? env : "");
    else if (rc == KS_ERR_UNSUPPORTED) /* the engine logged why */
        host->log(ctx, KS_LOG_ERROR,
                  "mailbox: node '%s': this kstreams cannot use PostgreSQL for the ledger",
                  host->node_name(ctx));
    else if (rc != 0)
        host->log(ctx, KS_LOG_ERROR,
                  "mailbox: node '%s': cannot open the PostgreSQL ledger (error %d)",
                  host->node_name(ctx), rc);
    st->pg = rc == 0;
    return rc == 0 ? KS_OK : KS_FATAL;
}

/* Where the ledger is: 1 postgres, 0 the store, -1 a bad value (logged). */
static int ledger_backend(ks_ctx *ctx)
{
    const char *b = NULL;
    if (host->config_string(ctx, "ledger_backend", &b) != 0 || !b || !*b ||
        strcmp(b, "store") == 0)
        return 0;
    if (strcmp(b, "postgres") == 0)
        return 1;
    host->log(ctx, KS_LOG_ERROR,
              "mailbox: node '%s': config key 'ledger_backend' must be store or postgres, "
              "found '%s'",
              host->node_name(ctx), b);
    return -1;
}

static ks_verdict mailbox_init(ks_ctx *ctx, void **state)
{
    mailbox_state *st = calloc(1, sizeof *st);
    if (!st) {
        host->log(ctx, KS_LOG_ERROR, "mailbox: out of memory");
        return KS_FATAL;
    }
    int backend = ledger_backend(ctx);
    if (backend < 0 || (backend == 1 && open_pg_ledger(ctx, st) != KS_OK)) {
        free(st);
        return KS_FATAL;
    }
    const char *ledger = NULL;
    if (host->config_string(ctx, "ledger", &ledger) != 0 || !ledger || !*ledger)
        ledger = NULL; /* the node's first store */
    int rc = st->pg ? 0 : host->store(ctx, ledger, &st->ledger);
    if (rc != 0) {
        host->log(ctx, KS_LOG_ERROR,
                  "mailbox: node '%s' has no store %s%s%s for the idempotency ledger "
                  "(error %d); name one with `stores:`",
                  host->node_name(ctx), ledger ? "'" : "", ledger ? ledger : "",
                  ledger ? "'" : "", rc);
        free(st);
        return KS_FATAL;
    }
    void (*fn)(void) = NULL;
    rc = host->function(ctx, "handler", KS_FN_HANDLER, &fn);
    if (rc != 0 || !fn) {
        host->log(ctx, KS_LOG_ERROR,
                  "mailbox: node '%s' needs `functions: { handler: plugin.function }` "
                  "naming a KS_FN_HANDLER (error %d)",
                  host->node_name(ctx), rc);
        init_failed(ctx, st);
        return KS_FATAL;
    }
    st->handler = (ks_handler_fn)fn;
    /* the consumer group is the application id (ABI 1.1); `group:` may
     * override it (a ledger shared by several applications' tasks) */
    const char *group = NULL;
    if (host->config_string(ctx, "group", &group) != 0 || !group || !*group)
        group = KS_API_HAS(host, application_id) ? host->application_id(ctx) : NULL;
    snprintf(st->group, sizeof st->group, "%s", group ? group : "");
    st->retention = strtoll(LEDGER_RETENTION_DEFAULT, NULL, 10);
    int64_t keep;
    if (host->config_int(ctx, "ledger_retention", &keep) == 0)
        st->retention = keep;
    if (st->retention < 0) {
        host->log(ctx, KS_LOG_ERROR,
                  "mailbox: node '%s': config key 'ledger_retention' must be 0 (keep every "
                  "ledger row) or a number of offsets per partition >= 1, found %lld",
                  host->node_name(ctx), (long long)st->retention);
        init_failed(ctx, st);
        return KS_FATAL;
    }
    if (!(st->out = host->buf_new())) {
        init_failed(ctx, st);
        return KS_FATAL;
    }
    *state = st;
    return KS_OK;
}

static int find_event_id(const ks_record *rec, char id[EVENT_ID_LEN + 1])
{
    int found = 0;
    for (size_t i = 0; i < rec->header_count; i++) {
        const ks_header *h = &rec->headers[i];
        if (h->name && strcmp(h->name, EVENT_ID_HEADER) == 0 && h->value_len == EVENT_ID_LEN) {
            memcpy(id, h->value, EVENT_ID_LEN);
            id[EVENT_ID_LEN] = '\0';
            found = 1; /* the last one wins, as rd_kafka_header_get_last */
        }
    }
    return found;
}

/* The result record's JSON; NULL when out of memory. Free with free(). */
static char *result_json(const char *status, ks_bytes result, const ks_record *rec,
                         const char *id)
{
    json_t *o = json_object();
    json_t *r = NULL;
    if (result.len) {
        json_error_t e;
        r = json_loadb(result.data, result.len, JSON_DECODE_ANY, &e);
        if (!r)
            r = json_stringn(result.data, result.len);
    }
    json_object_set_new(o, "status", json_string(status));
    json_object_set_new(o, "result", r ? r : json_null());
    json_object_set_new(o, "user", json_stringn(rec->key, rec->key_len));
    json_object_set_new(o, "partition", json_integer(rec->partition));
    json_object_set_new(o, "offset", json_integer(rec->offset));
    json_object_set_new(o, "event", json_string(id));
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

/* The event id a ledger row was written for (`"event":"<id>"` of its
 * JSON, as json_dumps writes it); 0 when the row has none (0.1.x rows). */
static int ledger_event(ks_bytes row, char id[EVENT_ID_LEN + 1])
{
    static const char field[] = "\"event\":\"";
    const size_t flen = sizeof field - 1;
    const char *v = row.data;
    for (size_t i = 0; row.len >= flen + EVENT_ID_LEN && i <= row.len - flen - EVENT_ID_LEN;
         i++)
        if (memcmp(v + i, field, flen) == 0) {
            memcpy(id, v + i + flen, EVENT_ID_LEN);
            id[EVENT_ID_LEN] = '\0';
            return 1;
        }
    return 0;
}

static ks_verdict forward_result(ks_ctx *ctx, const ks_record *rec, const char *id,
                                 const void *value, size_t len)
{
    ks_header h = {"ks.user", rec->key, rec->key_len};
    ks_record out = {.key = id,
                     .key_len = EVENT_ID_LEN,
                     .value = value,
                     .value_len = len,
                     .timestamp = rec->timestamp,
                     .headers = &h,
                     .header_count = 1};
    return host->forward(ctx, &out) == 0 ? KS_OK : KS_RETRY;
}

/* A failed ledger write or scan: a full store stops the task (retrying
 * cannot help), anything else aborts the batch for a replay. */
static ks_verdict store_failed(ks_ctx *ctx, int rc, const char *what)
{
    if (rc == KS_ERR_STORE_FULL) {
        host->log(ctx, KS_LOG_ERROR,
                  "mailbox: the ledger store is full (%s); raise its `map_size` or lower "
                  "`ledger_retention`",
                  what);
        return KS_FATAL;
    }
    host->log(ctx, KS_LOG_WARN, "mailbox: ledger %s failed (error %d); retrying", what, rc);
    return KS_RETRY;
}

/* The offset of a ledger key "<prefix><20 digits>", or -1 for any other key
 * under the prefix (the horizon row; a group name that merely extends it). */
static int64_t key_offset(ks_bytes key, size_t plen)
{
    if (key.len != plen + OFFSET_DIGITS)
        return -1;
    const char *d = (const char *)key.data + plen;
    int64_t v = 0;
    for (size_t i = 0; i < OFFSET_DIGITS; i++) {
        if (d[i] < '0' || d[i] > '9' || v > (INT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (d[i] - '0');
    }
    return v;
}

/* Read the horizon row of the partition whose ledger keys start with
 * lk[0..plen) into *horizon (-1 when there is none). */
static ks_verdict read_horizon(ks_ctx *ctx, mailbox_state *st, const char *lk, size_t plen,
                               int64_t *horizon)
{
    char hk[LEDGER_KEY_MAX + 1];
    memcpy(hk, lk, plen);
    memcpy(hk + plen, LEDGER_HORIZON, sizeof LEDGER_HORIZON - 1);
    ks_bytes v;
    *horizon = -1;
    int rc = host->store_get(st->ledger, (ks_bytes){hk, plen + sizeof LEDGER_HORIZON - 1}, &v);
    if (rc == KS_ERR_NOT_FOUND)
        return KS_OK;
    if (rc != 0)
        return store_failed(ctx, rc, "horizon read");
    char text[32];
    if (v.len == 0 || v.len >= sizeof text)
        return KS_OK; /* not ours: ignore */
    memcpy(text, v.data, v.len);
    text[v.len] = '\0';
    char *end;
    long long h = strtoll(text, &end, 10);
    if (*end == '\0' && h > 0)
        *horizon = h;
    return KS_OK;
}

static prune_slot *prune_slot_for(mailbox_state *st, const char *prefix, size_t plen)
{
    for (size_t i = 0; i < st->slot_count; i++)
        if (strlen(st->slots[i].prefix) == plen && memcmp(st->slots[i].prefix, prefix, plen) == 0)
            return &st->slots[i];
    prune_slot *grown = realloc(st->slots, (st->slot_count + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    st->slots = grown;
    char *copy = malloc(plen + 1);
    if (!copy)
        return NULL;
    memcpy(copy, prefix, plen);
    copy[plen] = '\0';
    prune_slot *s = &st->slots[st->slot_count++];
    s->prefix = copy;
    s->next_due = 0; /* the first command after init prunes: catch up */
    return s;
}

typedef struct prune_scan {
    mailbox_state *st;
    size_t plen;
    size_t n;
} prune_scan;

static int prune_collect(void *arg, ks_bytes key, ks_bytes value)
{
    (void)value;
    prune_scan *ps = arg;
    int64_t off = key_offset(key, ps->plen);
    if (off >= 0)
        ps->st->victims[ps->n++] = off;
    return ps->n == LEDGER_PRUNE_MAX; /* a bounded batch */
}

/*
 * Retention of the ledger, after a new row at `offset` of the partition
 * whose keys start with lk[0..plen): delete rows of offsets below
 * offset - retention + 1, in a bounded batch, and move the horizon row up.
 *
 * Why this is safe. The ledger is there for commands delivered again, and
 * Kafka redelivers only from the consumer group's committed offset onwards
 * (a crash or rebalance after the store commit but before the offset
 * commit under at-least-once; another process that restored the task from
 * the changelog). Under exactly-once the engine's transaction already
 * commits the store writes, the results and the input offset together, so
 * an aborted batch is replayed with its ledger rows aborted too; the ledger
 * is the defence for at-least-once and for replays across processes. The
 * committed offset trails the newest processed command by what was
 * processed since the last successful offset commit, so a retention (in
 * offsets, the unit of the replayable range) far above that keeps every
 * row a replay can ask for; the default, 1 000 000 offsets per partition,
 * is many commit intervals at any realistic rate.
 *
 * What a too small retention risks (or resetting the group's offsets
 * further back than it): a replayed command whose row is gone. Rows are
 * only pruned below offsets already processed, so such a command was
 * processed; the horizon row says where pruning reached, and a command
 * below it is dropped (WARN, metric `beyond_retention`) instead of running
 * the handler twice, as a record for an expired window is. Its stored
 * result is gone though, so an outbox row whose result went missing is not
 * reconciled.
 */
static ks_verdict ledger_prune(ks_ctx *ctx, mailbox_state *st, const char *lk, size_t plen,
                               int64_t offset, int64_t horizon)
{
    if (st->retention <= 0 || offset < 0)
        return KS_OK;
    prune_slot *slot = prune_slot_for(st, lk, plen);
    if (slot) { /* out of memory: prune now, as if due */
        if (offset < slot->next_due)
            return KS_OK;
        slot->next_due = offset + LEDGER_PRUNE_EVERY;
    }
    if (offset < st->retention)
        return KS_OK; /* fewer offsets than the retention so far */
    int64_t below = offset - st->retention + 1;
    char from[LEDGER_KEY_MAX + 1], to[LEDGER_KEY_MAX + 1];
    memcpy(from, lk, plen);
    memcpy(to, lk, plen);
    snprintf(to + plen, sizeof to - plen, "%020lld", (long long)below);
    prune_scan ps = {st, plen, 0};
    int rc = host->store_range(st->ledger, (ks_bytes){from, plen},
                               (ks_bytes){to, plen + OFFSET_DIGITS}, prune_collect, &ps);
    if (rc != 0)
        return store_failed(ctx, rc, "prune scan");
    for (size_t i = 0; i < ps.n; i++) {
        snprintf(from + plen, sizeof from - plen, "%020lld", (long long)st->victims[i]);
        rc = host->store_delete(st->ledger, (ks_bytes){from, plen + OFFSET_DIGITS});
        if (rc != 0)
            return store_failed(ctx, rc, "prune delete");
    }
    if (below > horizon) {
        char value[24];
        int vn = snprintf(value, sizeof value, "%lld", (long long)below);
        memcpy(from + plen, LEDGER_HORIZON, sizeof LEDGER_HORIZON - 1);
        rc = host->store_put(st->ledger, (ks_bytes){from, plen + sizeof LEDGER_HORIZON - 1},
                             (ks_bytes){value, (size_t)vn});
        if (rc != 0)
            return store_failed(ctx, rc, "horizon write");
    }
    if (ps.n)
        host->metric_add(ctx, "ledger_pruned", (double)ps.n);
    return KS_OK;
}

static void log_mismatch(ks_ctx *ctx, const ks_record *rec, const char *id, const char *was)
{
    /* same offset, another event: this is not a replay (the topic was
     * recreated, or the ledger belongs to another topic); skipping it
     * would lose the command, running it could run another twice */
    host->log(ctx, KS_LOG_ERROR,
              "mailbox: %s[%d]@%lld is event %s, but the ledger row of that offset is "
              "event %s: the topic was recreated or its offsets reused while node "
              "'%s''s ledger still holds the old ones; delete this application's "
              "state and ledger changelog (or its ks_mailbox_ledger rows), or give the "
              "new topic a new name",
              rec->topic ? rec->topic : "-", (int)rec->partition, (long long)rec->offset, id,
              was, host->node_name(ctx));
    host->metric_add(ctx, "ledger_mismatch", 1);
}

/* Step 3: already processed; reconcile by sending the stored result again. */
static ks_verdict resend(ks_ctx *ctx, mailbox_state *st, const ks_record *rec, const char *id,
                         ks_bytes done)
{
    if (st->already++ % 1000 == 0)
        host->log(ctx, KS_LOG_INFO,
                  "mailbox: event %s (%s[%d]@%lld) already processed; result sent "
                  "again, handler not run (%llu so far)",
                  id, rec->topic ? rec->topic : "-", (int)rec->partition,
                  (long long)rec->offset, (unsigned long long)st->already);
    host->metric_add(ctx, "already_processed", 1);
    /* copy: the borrowed value ends with the next store write */
    char *copy = malloc(done.len ? done.len : 1);
    if (!copy)
        return KS_RETRY;
    memcpy(copy, done.data, done.len);
    ks_verdict v = forward_result(ctx, rec, id, copy, done.len);
    free(copy);
    return v;
}

/* Steps 1-4 with the ledger in PostgreSQL: one transaction per command. */
static ks_verdict process_pg(ks_ctx *ctx, mailbox_state *st, const ks_record *rec,
                             const char *id)
{
    ks_bytes done;
    int rc = host->ledger_begin(ctx, st->group, rec->topic ? rec->topic : "-", rec->partition,
                                rec->offset, &done);
    if (rc == 0) {
        char was[EVENT_ID_LEN + 1];
        if (ledger_event(done, was) && strcmp(was, id) != 0) {
            log_mismatch(ctx, rec, id, was);
            return KS_FATAL;
        }
        return resend(ctx, st, rec, id, done);
    }
    if (rc != KS_ERR_NOT_FOUND) {
        host->log(ctx, KS_LOG_WARN, "mailbox: ledger lookup failed (error %d); retrying", rc);
        return KS_RETRY;
    }
    host->buf_set(st->out, NULL, 0);
    ks_verdict v = st->handler(ctx, rec, st->out);
    if (v != KS_OK && v != KS_SKIP) {
        host->ledger_rollback(ctx); /* its statements go with it */
        return v;
    }
    char *text = result_json(v == KS_OK ? "SUCCESS" : "PUSHED_FAILURE",
                             host->buf_get(st->out), rec, id);
    if (!text) {
        host->ledger_rollback(ctx);
        return KS_RETRY;
    }
    size_t len = strlen(text);
    rc = host->ledger_commit(ctx, id, v == KS_SKIP, (ks_bytes){text, len});
    if (rc == KS_ERR_STATE) {
        host->log(ctx, KS_LOG_ERROR,
                  "mailbox: the handler of node '%s' returned KS_OK after one of its SQL "
                  "statements failed (%s[%d]@%lld); return KS_SKIP or KS_RETRY then",
                  host->node_name(ctx), rec->topic ? rec->topic : "-", (int)rec->partition,
                  (long long)rec->offset);
        free(text);
        return KS_FATAL;
    }
    if (rc != 0) {
        free(text);
        host->log(ctx, KS_LOG_WARN, "mailbox: ledger commit failed (error %d); retrying", rc);
        return KS_RETRY;
    }
    host->metric_add(ctx, v == KS_OK ? "success" : "pushed_failure", 1);
    ks_verdict fv = forward_result(ctx, rec, id, text, len);
    free(text);
    return fv;
}

static ks_verdict mailbox_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    mailbox_state *st = state;
    char id[EVENT_ID_LEN + 1];
    if (!rec->key || rec->key_len == 0 || !find_event_id(rec, id)) {
        host->log(ctx, KS_LOG_WARN,
                  "mailbox: command at %s[%d]@%lld has no %s; it did not come "
                  "from an outbox and has no row to report to",
                  rec->topic ? rec->topic : "-", (int)rec->partition,
                  (long long)rec->offset, !rec->key || !rec->key_len ? "user key" : "ks.event_id header");
        host->metric_add(ctx, "no_event_id", 1);
        return KS_SKIP;
    }
    if (st->pg)
        return process_pg(ctx, st, rec, id);
    char lk[LEDGER_KEY_MAX + 1];
    int pn = snprintf(lk, sizeof lk, LEDGER_PREFIX "%s/%s/%d/", st->group,
                      rec->topic ? rec->topic : "-", (int)rec->partition);
    if (pn < 0 || (size_t)pn + OFFSET_DIGITS > LEDGER_KEY_MAX) {
        host->log(ctx, KS_LOG_ERROR, "mailbox: ledger key over %d bytes (group %s)",
                  LEDGER_KEY_MAX, st->group);
        return KS_FATAL;
    }
    size_t plen = (size_t)pn;
    int n = pn + snprintf(lk + plen, sizeof lk - plen, "%020lld", (long long)rec->offset);
    ks_bytes key = {lk, (size_t)n}, done;
    int rc = host->store_get(st->ledger, key, &done);
    char was[EVENT_ID_LEN + 1];
    if (rc == 0 && ledger_event(done, was) && strcmp(was, id) != 0) {
        log_mismatch(ctx, rec, id, was);
        return KS_FATAL;
    }
    if (rc == 0)
        return resend(ctx, st, rec, id, done);
    if (rc != KS_ERR_NOT_FOUND)
        return store_failed(ctx, rc, "read");
    int64_t horizon = -1;
    if (rec->offset >= 0) {
        ks_verdict hv = read_horizon(ctx, st, lk, plen, &horizon);
        if (hv != KS_OK)
            return hv;
    }
    if (rec->offset >= 0 && rec->offset < horizon) {
        /* processed long ago, its row pruned (see ledger_prune) */
        if (st->beyond++ % 1000 == 0)
            host->log(ctx, KS_LOG_WARN,
                      "mailbox: event %s (%s[%d]@%lld) is below the ledger horizon %lld "
                      "(ledger_retention %lld): it was processed and its row pruned; "
                      "dropped, handler not run, no result sent (%llu so far)",
                      id, rec->topic ? rec->topic : "-", (int)rec->partition,
                      (long long)rec->offset, (long long)horizon, (long long)st->retention,
                      (unsigned long long)st->beyond);
        host->metric_add(ctx, "beyond_retention", 1);
        return KS_OK;
    }
    host->buf_set(st->out, NULL, 0);
    ks_verdict v = st->handler(ctx, rec, st->out);
    const char *status;
    if (v == KS_OK)
        status = "SUCCESS";
    else if (v == KS_SKIP)
        status = "PUSHED_FAILURE";
    else
        return v; /* RETRY / FATAL: the batch aborts, nothing is kept */
    char *text = result_json(status, host->buf_get(st->out), rec, id);
    if (!text)
        return KS_RETRY;
    size_t len = strlen(text);
    rc = host->store_put(st->ledger, key, (ks_bytes){text, len});
    if (rc != 0) {
        free(text);
        return store_failed(ctx, rc, "write");
    }
    ks_verdict pv = ledger_prune(ctx, st, lk, plen, rec->offset, horizon);
    if (pv != KS_OK) {
        free(text);
        return pv;
    }
    host->metric_add(ctx, v == KS_OK ? "success" : "pushed_failure", 1);
    ks_verdict fv = forward_result(ctx, rec, id, text, len);
    free(text);
    return fv;
}

static void mailbox_close(ks_ctx *ctx, void *state)
{
    (void)ctx;
    mailbox_state *st = state;
    if (!st)
        return;
    if (st->pg)
        host->ledger_close(ctx);
    host->buf_free(st->out);
    for (size_t i = 0; i < st->slot_count; i++)
        free(st->slots[i].prefix);
    free(st->slots);
    free(st);
}

static const ks_config_field mailbox_config[] = {
    {"ledger", KS_CONFIG_STRING, 0, "",
     "store of the idempotency ledger; default: the node's first store"},
    {"group", KS_CONFIG_STRING, 0, "",
     "consumer group in the ledger key; default: the application id"},
    {"ledger_retention", KS_CONFIG_INT, 0, LEDGER_RETENTION_DEFAULT,
     "ledger rows kept per input partition: the newest N offsets; 0 keeps every row"},
    {"ledger_backend", KS_CONFIG_STRING, 0, "store",
     "store: the ledger in the node's LMDB store; postgres: in PostgreSQL, one transaction "
     "with the handler's sql_exec statements"},
    {"ledger_dsn_env", KS_CONFIG_STRING, 0, "",
     "postgres ledger: environment variable holding the libpq connection string; default: "
     "the pipeline's `outbox: { backend: postgres }` connection"},
};

static const ks_processor_type mailbox_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "mailbox",
    .description = "runs a user's handler per command once (idempotency ledger) and "
                   "forwards (event id, result) for the outbox row",
    .flags = KS_PROC_NEEDS_STORE | KS_PROC_KEYED | KS_PROC_NEEDS_FUNCTIONS |
             KS_PROC_CHANGES_KEY,
    .config = mailbox_config,
    .config_count = sizeof mailbox_config / sizeof mailbox_config[0],
    .state_version = 1,
    .init = mailbox_init,
    .process = mailbox_process,
    .close = mailbox_close,
};

static const ks_processor_type *const processors[] = {&mailbox_type};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "mailbox",
    .version = "0.3.0",
    .build_id = KS_BUILD_ID,
    .processors = processors,
    .processor_count = 1,
    .functions = NULL,
    .function_count = 0,
};

KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *api)
{
    host = api;
    return &descriptor;
}
