/*
 * test_outbox.c - engine/outbox/outbox_status.c (every pair of statuses) and
 * engine/outbox/outbox.c against a real LMDB environment under /tmp.
 */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/outbox.h"
#include "unit/test_util.h"

#define S(x) KS_OUTBOX_##x

/* The allowed moves, written out independently of outbox_status.c. */
static const struct {
    ks_outbox_status from, to;
} ALLOWED[] = {
    {S(PREQUEUED), S(PENDING)},          {S(PENDING), S(DISPATCHING)},
    {S(DISPATCHING), S(PUBLISHED)},      {S(DISPATCHING), S(PENDING)},
    {S(DISPATCHING), S(FAILURE)},        {S(DISPATCHING), S(UNDER_PROCESSING)},
    {S(PUBLISHED), S(UNDER_PROCESSING)}, {S(UNDER_PROCESSING), S(SUCCESS)},
    {S(UNDER_PROCESSING), S(PUSHED_FAILURE)},
};

static int expected(ks_outbox_status a, ks_outbox_status b)
{
    for (size_t i = 0; i < sizeof ALLOWED / sizeof ALLOWED[0]; i++)
        if (ALLOWED[i].from == a && ALLOWED[i].to == b)
            return 1;
    return 0;
}

static void test_every_pair(void)
{
    int allowed = 0;
    for (int a = 0; a < KS_OUTBOX_STATUS_COUNT; a++)
        for (int b = 0; b < KS_OUTBOX_STATUS_COUNT; b++) {
            int got = ks_outbox_transition_allowed(a, b) != 0;
            if (got != expected(a, b))
                fprintf(stderr, "%s -> %s: got %d\n", ks_outbox_status_name(a),
                        ks_outbox_status_name(b), got);
            CU_ASSERT_EQUAL(got, expected(a, b));
            allowed += got;
        }
    CU_ASSERT_EQUAL(allowed, 9);
    /* out of range on either side is refused */
    CU_ASSERT_FALSE(ks_outbox_transition_allowed(-1, S(PENDING)));
    CU_ASSERT_FALSE(ks_outbox_transition_allowed(S(PENDING), 8));
}

static void test_terminal_and_names(void)
{
    for (int a = 0; a < KS_OUTBOX_STATUS_COUNT; a++) {
        int term = a == S(SUCCESS) || a == S(PUSHED_FAILURE) || a == S(FAILURE);
        CU_ASSERT_EQUAL(ks_outbox_status_terminal(a) != 0, term);
        int leaves = 0;
        for (int b = 0; b < KS_OUTBOX_STATUS_COUNT; b++)
            leaves += ks_outbox_transition_allowed(a, b);
        CU_ASSERT_EQUAL(leaves == 0, term);
        ks_outbox_status back;
        CU_ASSERT_EQUAL(ks_outbox_status_parse(ks_outbox_status_name(a), &back), 0);
        CU_ASSERT_EQUAL(back, a);
    }
    ks_outbox_status x;
    CU_ASSERT_EQUAL(ks_outbox_status_parse("pending", &x), -1);
    CU_ASSERT_STRING_EQUAL(ks_outbox_status_name(42), "UNKNOWN");
    CU_ASSERT(ks_outbox_status_published_or_later(S(UNDER_PROCESSING)));
    CU_ASSERT_FALSE(ks_outbox_status_published_or_later(S(DISPATCHING)));
    CU_ASSERT_FALSE(ks_outbox_status_published_or_later(S(FAILURE)));
}

/* ------------------------------------------------------------------ */

static char tmp[64], dir[128];

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static ks_outbox *fx_open(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/ks-outbox-test-XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmp));
    snprintf(dir, sizeof dir, "%s/app/outbox", tmp);
    ks_outbox *ob = NULL;
    char err[256] = "";
    int rc = ks_outbox_open(dir, 16u << 20, &ob, err, sizeof err);
    if (rc)
        fprintf(stderr, "%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    return ob;
}

static void fx_done(ks_outbox *ob)
{
    ks_outbox_close(ob);
    nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void enqueue(ks_outbox *ob, const char *user, int held, char *id)
{
    CU_ASSERT_EQUAL_FATAL(ks_outbox_enqueue(ob, user, "mailbox", NULL, "{}", 2, held, id), 0);
}

static ks_outbox_status status_of(ks_outbox *ob, const char *id)
{
    ks_outbox_event ev;
    CU_ASSERT_EQUAL_FATAL(ks_outbox_get(ob, id, &ev), 0);
    ks_outbox_status s = ev.status;
    ks_outbox_event_clear(&ev);
    return s;
}

static void test_enqueue_get(void)
{
    ks_outbox *ob = fx_open();
    char a[33], b[33];
    CU_ASSERT_EQUAL(ks_outbox_enqueue(ob, "u1", "mailbox", "k", "{\"x\":1}", 7, 0, a), 0);
    enqueue(ob, "u1", 1, b);
    CU_ASSERT_EQUAL(strlen(a), 32);
    CU_ASSERT(strcmp(a, b) < 0); /* ids sort in enqueue order */
    CU_ASSERT_EQUAL(memcmp(a, b, 16), 0); /* one prefix per outbox */
    ks_outbox_event ev;
    CU_ASSERT_EQUAL_FATAL(ks_outbox_get(ob, a, &ev), 0);
    CU_ASSERT_EQUAL(ev.status, S(PENDING));
    CU_ASSERT_STRING_EQUAL(ev.user, "u1");
    CU_ASSERT_STRING_EQUAL(ev.topic, "mailbox");
    CU_ASSERT_STRING_EQUAL(ev.key, "k");
    CU_ASSERT_EQUAL(ev.payload_len, 7);
    CU_ASSERT_EQUAL(memcmp(ev.payload, "{\"x\":1}", 7), 0);
    CU_ASSERT_EQUAL(ev.partition, -1);
    CU_ASSERT_EQUAL(ev.attempts, 0);
    ks_outbox_event_clear(&ev);
    CU_ASSERT_EQUAL(status_of(ob, b), S(PREQUEUED));
    /* bad input writes nothing */
    char c[33];
    CU_ASSERT_EQUAL(ks_outbox_enqueue(ob, "", "mailbox", NULL, "{}", 2, 0, c), KS_ERR_INVALID);
    CU_ASSERT_EQUAL(ks_outbox_enqueue(ob, "u", "bad topic", NULL, "{}", 2, 0, c),
                    KS_ERR_INVALID);
    CU_ASSERT_EQUAL(ks_outbox_get(ob, "00000000000000000000000000000000", &ev),
                    KS_ERR_NOT_FOUND);
    CU_ASSERT_EQUAL(ks_outbox_get(ob, "short", &ev), KS_ERR_INVALID);
    uint64_t counts[KS_OUTBOX_STATUS_COUNT];
    CU_ASSERT_EQUAL(ks_outbox_counts(ob, counts), 0);
    CU_ASSERT_EQUAL(counts[S(PENDING)], 1);
    CU_ASSERT_EQUAL(counts[S(PREQUEUED)], 1);
    /* durable: visible after reopening, read-only as the CLI does */
    ks_outbox_close(ob);
    char err[256];
    CU_ASSERT_EQUAL_FATAL(ks_outbox_open_readonly(dir, &ob, err, sizeof err), 0);
    CU_ASSERT_EQUAL(status_of(ob, a), S(PENDING));
    CU_ASSERT_EQUAL(ks_outbox_release(ob, b), KS_ERR_INVALID); /* read-only */
    fx_done(ob);
}

static void test_claim_order_per_user(void)
{
    ks_outbox *ob = fx_open();
    char held[33], u1a[33], u2a[33], u1b[33], u3a[33];
    enqueue(ob, "u3", 1, held); /* blocks u3 until released */
    enqueue(ob, "u1", 0, u1a);
    enqueue(ob, "u2", 0, u2a);
    enqueue(ob, "u1", 0, u1b);
    enqueue(ob, "u3", 0, u3a);
    ks_outbox_event *evs;
    size_t n;
    /* max 1: only u1a; u1b must not overtake it in a later claim */
    CU_ASSERT_EQUAL_FATAL(ks_outbox_claim_pending(ob, 1, &evs, &n), 0);
    CU_ASSERT_EQUAL_FATAL(n, 1);
    CU_ASSERT_STRING_EQUAL(evs[0].id, u1a);
    CU_ASSERT_EQUAL(evs[0].status, S(DISPATCHING));
    CU_ASSERT_EQUAL(evs[0].attempts, 1);
    ks_outbox_events_free(evs, n);
    CU_ASSERT_EQUAL_FATAL(ks_outbox_claim_pending(ob, 10, &evs, &n), 0);
    CU_ASSERT_EQUAL_FATAL(n, 1); /* u2a; u1b waits for u1a, u3a for held */
    CU_ASSERT_STRING_EQUAL(evs[0].id, u2a);
    ks_outbox_events_free(evs, n);
    CU_ASSERT_EQUAL(ks_outbox_mark_published(ob, u1a, 0, 5, NULL), 0);
    CU_ASSERT_EQUAL(ks_outbox_release(ob, held), 0);
    CU_ASSERT_EQUAL(ks_outbox_release(ob, held), KS_ERR_STATE); /* CAS */
    CU_ASSERT_EQUAL_FATAL(ks_outbox_claim_pending(ob, 10, &evs, &n), 0);
    /* held, u1b, then u3a behind held in the same batch (produced in
     * this order); u2a is still DISPATCHING */
    CU_ASSERT_EQUAL_FATAL(n, 3);
    CU_ASSERT_STRING_EQUAL(evs[0].id, held);
    CU_ASSERT_STRING_EQUAL(evs[1].id, u1b);
    CU_ASSERT_STRING_EQUAL(evs[2].id, u3a);
    ks_outbox_events_free(evs, n);
    fx_done(ob);
}

static void test_publication_moves(void)
{
    ks_outbox *ob = fx_open();
    char a[33], b[33], c[33];
    enqueue(ob, "a", 0, a);
    enqueue(ob, "b", 0, b);
    enqueue(ob, "c", 0, c);
    /* nothing but claim leaves PENDING */
    CU_ASSERT_EQUAL(ks_outbox_mark_published(ob, a, 0, 1, NULL), KS_ERR_STATE);
    CU_ASSERT_EQUAL(ks_outbox_mark_failed(ob, a, "x"), KS_ERR_STATE);
    CU_ASSERT_EQUAL(ks_outbox_start_processing(ob, a, NULL), KS_ERR_STATE);
    ks_outbox_event *evs;
    size_t n;
    CU_ASSERT_EQUAL_FATAL(ks_outbox_claim_pending(ob, 10, &evs, &n), 0);
    CU_ASSERT_EQUAL(n, 3);
    ks_outbox_events_free(evs, n);
    /* a: consumer faster than the delivery report */
    ks_outbox_status was;
    CU_ASSERT_EQUAL(ks_outbox_start_processing(ob, a, &was), 0);
    CU_ASSERT_EQUAL(was, S(DISPATCHING));
    int moved = -1;
    CU_ASSERT_EQUAL(ks_outbox_mark_published(ob, a, 2, 40, &moved), 0);
    CU_ASSERT_EQUAL(moved, 0); /* not moved backward */
    ks_outbox_event ev;
    CU_ASSERT_EQUAL_FATAL(ks_outbox_get(ob, a, &ev), 0);
    CU_ASSERT_EQUAL(ev.status, S(UNDER_PROCESSING));
    CU_ASSERT_EQUAL(ev.partition, 2); /* position filled in */
    CU_ASSERT_EQUAL(ev.offset, 40);
    ks_outbox_event_clear(&ev);
    CU_ASSERT_EQUAL(ks_outbox_finish(ob, a, 1, "{\"balance\":3}", &was), 0);
    CU_ASSERT_EQUAL(ks_outbox_finish(ob, a, 0, NULL, &was), KS_ERR_STATE);
    CU_ASSERT_EQUAL(was, S(SUCCESS));
    CU_ASSERT_EQUAL(ks_outbox_mark_published(ob, a, 2, 40, &moved), 0);
    CU_ASSERT_EQUAL(status_of(ob, a), S(SUCCESS));
    /* b: retry, then failure with the reason kept */
    CU_ASSERT_EQUAL(ks_outbox_requeue(ob, b, "broker down"), 0);
    CU_ASSERT_EQUAL(ks_outbox_requeue(ob, b, "again"), KS_ERR_STATE);
    CU_ASSERT_EQUAL_FATAL(ks_outbox_claim_pending(ob, 10, &evs, &n), 0);
    CU_ASSERT_EQUAL_FATAL(n, 1);
    CU_ASSERT_EQUAL(evs[0].attempts, 2);
    CU_ASSERT_STRING_EQUAL(evs[0].last_error, "broker down");
    ks_outbox_events_free(evs, n);
    CU_ASSERT_EQUAL(ks_outbox_mark_failed(ob, b, "gave up"), 0);
    CU_ASSERT_EQUAL(ks_outbox_requeue(ob, b, "no"), KS_ERR_STATE); /* terminal */
    /* c: published, processed, pushed failure */
    CU_ASSERT_EQUAL(ks_outbox_mark_published(ob, c, 1, 7, &moved), 0);
    CU_ASSERT_EQUAL(moved, 1);
    CU_ASSERT_EQUAL(ks_outbox_requeue(ob, c, "x"), KS_ERR_STATE);
    CU_ASSERT_EQUAL(ks_outbox_start_processing(ob, c, NULL), 0);
    CU_ASSERT_EQUAL(ks_outbox_finish(ob, c, 0, "overdraft", NULL), 0);
    CU_ASSERT_EQUAL_FATAL(ks_outbox_get(ob, c, &ev), 0);
    CU_ASSERT_EQUAL(ev.status, S(PUSHED_FAILURE));
    CU_ASSERT_STRING_EQUAL(ev.result, "overdraft");
    ks_outbox_event_clear(&ev);
    uint64_t counts[KS_OUTBOX_STATUS_COUNT];
    CU_ASSERT_EQUAL(ks_outbox_counts(ob, counts), 0);
    CU_ASSERT_EQUAL(counts[S(SUCCESS)] + counts[S(FAILURE)] + counts[S(PUSHED_FAILURE)], 3);
    fx_done(ob);
}

static void test_stale(void)
{
    ks_outbox *ob = fx_open();
    char a[33], b[33];
    enqueue(ob, "a", 0, a);
    enqueue(ob, "b", 0, b);
    ks_outbox_event *evs;
    size_t n;
    CU_ASSERT_EQUAL_FATAL(ks_outbox_claim_pending(ob, 1, &evs, &n), 0);
    ks_outbox_events_free(evs, n);
    int64_t now = ks_outbox_now_ms();
    CU_ASSERT_EQUAL(ks_outbox_stale(ob, now - 60000, 10, &evs, &n), 0);
    CU_ASSERT_EQUAL(n, 0); /* claimed just now: not stale */
    ks_outbox_events_free(evs, n);
    CU_ASSERT_EQUAL(ks_outbox_stale(ob, now + 1, 10, &evs, &n), 0);
    CU_ASSERT_EQUAL_FATAL(n, 1);
    CU_ASSERT_STRING_EQUAL(evs[0].id, a);
    ks_outbox_events_free(evs, n);
    fx_done(ob);
}

/* ------------------------------------------------------------------ */
/* The row decoder against damaged and hostile rows                    */
/* ------------------------------------------------------------------ */

#define ROW_ID "0123456789abcdef0123456789abcdef"

/* A valid row with every field set, *len bytes (caller frees). */
static unsigned char *good_row(size_t *len)
{
    ks_outbox_event ev = {.status = S(PENDING), .user = "alice", .topic = "mailbox",
                          .key = "k1", .payload = "{\"a\":1}", .payload_len = 7,
                          .last_error = "timeout", .result = "ok", .partition = -1,
                          .offset = -1};
    unsigned char *row = ks_outbox_row_encode(&ev, len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(row);
    return row;
}

/* Decode (a copy of exactly len bytes, so ASan sees any overread): the
 * return code, err holding the message. */
static int decode(const unsigned char *row, size_t len, char *err, size_t errlen)
{
    unsigned char *copy = malloc(len ? len : 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(copy);
    memcpy(copy, row, len);
    ks_outbox_event ev;
    err[0] = '\0';
    int rc = ks_outbox_row_decode(ROW_ID, copy, len, &ev, err, errlen);
    if (rc == 0) {
        CU_ASSERT_EQUAL(ev.payload_len, 7);
        ks_outbox_event_clear(&ev);
    } else {
        CU_ASSERT_PTR_NULL(ev.user); /* nothing half-decoded is left */
        CU_ASSERT_PTR_NULL(ev.payload);
    }
    free(copy);
    return rc;
}

static void test_row_decoder_hostile(void)
{
    size_t len;
    unsigned char *row = good_row(&len);
    char err[512];
    ks_outbox_row_hdr h;
    const size_t hs = sizeof h;

    CU_ASSERT_EQUAL(decode(row, len, err, sizeof err), 0);

    /* the crash: payload_len UINT64_MAX and result_len 8 bytes
     * longer, so the 64-bit sum of the lengths wraps to exactly len and
     * the old check passed (then malloc(0) and a memcpy of 2^64-1 bytes) */
    memcpy(&h, row, hs);
    h.payload_len = UINT64_MAX;
    h.result_len += 8;
    CU_ASSERT_EQUAL((uint64_t)(hs + h.user_len + h.topic_len + h.key_len + h.payload_len +
                               h.error_len + h.result_len),
                    (uint64_t)len);
    memcpy(row, &h, hs);
    CU_ASSERT_EQUAL(decode(row, len, err, sizeof err), KS_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "outbox event " ROW_ID ": unreadable row: payload"));
    free(row);

    /* payload_len = UINT64_MAX outright */
    row = good_row(&len);
    memcpy(&h, row, hs);
    h.payload_len = UINT64_MAX;
    memcpy(row, &h, hs);
    CU_ASSERT_EQUAL(decode(row, len, err, sizeof err), KS_ERR_INVALID);
    free(row);

    /* 32-bit lengths that together wrap a 32-bit sum, and each one alone
     * larger than the row */
    const char *names[] = {"user", "topic", "key", "last_error", "result"};
    for (int f = 0; f < 5; f++) {
        row = good_row(&len);
        memcpy(&h, row, hs);
        uint32_t *field[] = {&h.user_len, &h.topic_len, &h.key_len, &h.error_len,
                             &h.result_len};
        *field[f] = UINT32_MAX - 1; /* UINT32_MAX is "no key" for key_len */
        memcpy(row, &h, hs);
        CU_ASSERT_EQUAL(decode(row, len, err, sizeof err), KS_ERR_INVALID);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, names[f]));
        CU_ASSERT_PTR_NOT_NULL(strstr(err, ROW_ID));
        free(row);
    }
    row = good_row(&len);
    memcpy(&h, row, hs);
    h.user_len = 0x80000000u;
    h.topic_len = 0x80000000u;
    memcpy(row, &h, hs);
    CU_ASSERT_EQUAL(decode(row, len, err, sizeof err), KS_ERR_INVALID);
    free(row);

    /* every truncation, and one byte too many */
    row = good_row(&len);
    for (size_t cut = 0; cut < len; cut++) {
        CU_ASSERT_EQUAL(decode(row, cut, err, sizeof err), KS_ERR_INVALID);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, ROW_ID));
    }
    unsigned char *longer = malloc(len + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(longer);
    memcpy(longer, row, len);
    longer[len] = 'x';
    CU_ASSERT_EQUAL(decode(longer, len + 1, err, sizeof err), KS_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "1 bytes after its last field"));
    free(longer);

    /* wrong version, status out of range */
    memcpy(&h, row, hs);
    h.status = 200;
    memcpy(row, &h, hs);
    CU_ASSERT_EQUAL(decode(row, len, err, sizeof err), KS_ERR_INVALID);
    h.status = S(PENDING);
    h.version = 9;
    memcpy(row, &h, hs);
    CU_ASSERT_EQUAL(decode(row, len, err, sizeof err), KS_ERR_INVALID);

    /* a NUL byte inside a text field (found by tests/fuzz/fuzz_outbox_row):
     * decoded as a C string it would cut "alice" to "al" */
    free(row);
    row = good_row(&len);
    row[hs + 2] = '\0';
    CU_ASSERT_EQUAL(decode(row, len, err, sizeof err), KS_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "unreadable row: user holds a NUL byte"));
    row[hs + 2] = 'i';
    row[len - 1] = '\0'; /* the last byte of the result */
    CU_ASSERT_EQUAL(decode(row, len, err, sizeof err), KS_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "unreadable row: result holds a NUL byte"));

    /* every single byte of the header flipped to 0xff: an error or a row,
     * never a crash (ASan build) */
    free(row);
    row = good_row(&len);
    for (size_t i = 0; i < hs; i++) {
        unsigned char keep = row[i];
        row[i] = 0xff;
        int rc = decode(row, len, err, sizeof err);
        CU_ASSERT(rc == 0 || rc == KS_ERR_INVALID);
        row[i] = keep;
    }
    free(row);
}

/* The same row reached through the store, as GET /outbox/events/<id>,
 * `kstreams outbox-status` and the dispatcher's claim reach it: an error
 * naming the event, not a crash. */
static void test_damaged_row_in_store(void)
{
    ks_outbox *ob = fx_open();
    char id[33];
    enqueue(ob, "alice", 0, id);
    ks_outbox_close(ob);

    ks_store_env *env = NULL;
    ks_store_db *events = NULL;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(ks_store_env_open(dir, 16u << 20, 16, &env, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(ks_store_db_open(env, "events", &events), 0);
    size_t len;
    unsigned char *row = good_row(&len);
    ks_outbox_row_hdr h;
    memcpy(&h, row, sizeof h);
    h.payload_len = UINT64_MAX; /* with result_len + 8: wraps the old sum */
    h.result_len += 8;
    memcpy(row, &h, sizeof h);
    CU_ASSERT_EQUAL_FATAL(ks_store_begin(env), 0);
    CU_ASSERT_EQUAL(ks_store_put(events, (ks_bytes){id, 32}, (ks_bytes){row, len}), 0);
    CU_ASSERT_EQUAL_FATAL(ks_store_commit(env), 0);
    ks_store_env_close(env);
    free(row);

    CU_ASSERT_EQUAL_FATAL(ks_outbox_open(dir, 16u << 20, &ob, err, sizeof err), 0);
    ks_outbox_event ev;
    CU_ASSERT_EQUAL(ks_outbox_get(ob, id, &ev), KS_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(ks_outbox_last_error(ob), id));
    CU_ASSERT_PTR_NOT_NULL(strstr(ks_outbox_last_error(ob), "unreadable row: payload"));
    ks_outbox_event *rows = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL(ks_outbox_claim_pending(ob, 10, &rows, &n), KS_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(ks_outbox_last_error(ob), id));
    fx_done(ob);
}

void ks_test_register_outbox(void)
{
    CU_pSuite s = CU_add_suite("outbox", NULL, NULL);
    CU_add_test(s, "every pair of statuses", test_every_pair);
    CU_add_test(s, "terminal statuses and names", test_terminal_and_names);
    CU_add_test(s, "enqueue, get, durable reopen", test_enqueue_get);
    CU_add_test(s, "claim keeps per-user order", test_claim_order_per_user);
    CU_add_test(s, "publication and processing moves are CAS", test_publication_moves);
    CU_add_test(s, "stale dispatching rows", test_stale);
    CU_add_test(s, "row decoder: wrapped, truncated, oversized rows", test_row_decoder_hostile);
    CU_add_test(s, "a damaged row in the store is an error naming it", test_damaged_row_in_store);
}
