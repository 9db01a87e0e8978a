/*
 * test_restore_fold.c - engine/runtime/restore_fold.c: a restore batch
 * folded by key keeps each key's latest record (a deletion too) and hands
 * the keys over in LMDB's key order.
 */
#include <stdio.h>
#include <string.h>

#include "runtime/restore_fold.h"
#include "unit/test_util.h"

typedef struct seen {
    char keys[8][16];
    char values[8][16]; /* "-" for a deletion */
    int64_t offsets[8];
    int n;
} seen;

static int record(void *arg, ks_bytes key, const ks_bytes *value, int64_t offset)
{
    seen *s = arg;
    if (s->n == 8)
        return KS_ERR_INVALID;
    snprintf(s->keys[s->n], 16, "%.*s", (int)key.len, (const char *)key.data);
    snprintf(s->values[s->n], 16, "%.*s", value ? (int)value->len : 1,
             value ? (const char *)value->data : "-");
    s->offsets[s->n++] = offset;
    return 0;
}

static int put(ks_fold *f, const char *k, const char *v, int64_t offset)
{
    ks_bytes key = {k, strlen(k)};
    ks_bytes val = {v, v ? strlen(v) : 0};
    return ks_fold_put(f, key, v ? &val : NULL, offset);
}

static void test_latest_in_key_order(void)
{
    ks_fold *f = ks_fold_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(put(f, "b", "1", 0), 0);
    CU_ASSERT_EQUAL(put(f, "ab", "1", 1), 0);
    CU_ASSERT_EQUAL(put(f, "a", "1", 2), 0);
    CU_ASSERT_EQUAL(put(f, "b", "22", 3), 0);       /* grows the value */
    CU_ASSERT_EQUAL(put(f, "ab", NULL, 4), 0);      /* deleted */
    CU_ASSERT_EQUAL(put(f, "a", "333", 5), 0);
    CU_ASSERT_EQUAL(put(f, "a", "4", 6), 0);        /* shrinks it */
    CU_ASSERT(ks_fold_bytes(f) > 0);
    seen s = {0};
    CU_ASSERT_EQUAL(ks_fold_drain(f, record, &s), 0);
    CU_ASSERT_EQUAL_FATAL(s.n, 3);
    CU_ASSERT_STRING_EQUAL(s.keys[0], "a"); /* shorter first, then bytewise */
    CU_ASSERT_STRING_EQUAL(s.values[0], "4");
    CU_ASSERT_EQUAL(s.offsets[0], 6);
    CU_ASSERT_STRING_EQUAL(s.keys[1], "ab");
    CU_ASSERT_STRING_EQUAL(s.values[1], "-");
    CU_ASSERT_EQUAL(s.offsets[1], 4);
    CU_ASSERT_STRING_EQUAL(s.keys[2], "b");
    CU_ASSERT_STRING_EQUAL(s.values[2], "22");
    /* drained: empty, and usable again */
    seen again = {0};
    CU_ASSERT_EQUAL(put(f, "c", "", 7), 0); /* an empty value is no deletion */
    CU_ASSERT_EQUAL(ks_fold_drain(f, record, &again), 0);
    CU_ASSERT_EQUAL_FATAL(again.n, 1);
    CU_ASSERT_STRING_EQUAL(again.values[0], "");
    ks_fold_free(f);
}

/* Many keys: the index grows and every key comes back once, latest value. */
static int count_keys(void *arg, ks_bytes key, const ks_bytes *value, int64_t offset)
{
    (void)key;
    long *n = arg;
    if (!value || value->len != sizeof(int64_t) || memcmp(value->data, &offset, sizeof offset))
        return KS_ERR_INVALID;
    ++*n;
    return 0;
}

static void test_many_keys(void)
{
    ks_fold *f = ks_fold_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    int64_t offset = 0;
    for (int round = 0; round < 3; round++)
        for (int k = 0; k < 5000; k++, offset++) {
            char key[16];
            snprintf(key, sizeof key, "k%d", k);
            ks_bytes kb = {key, strlen(key)}, vb = {&offset, sizeof offset};
            CU_ASSERT_EQUAL_FATAL(ks_fold_put(f, kb, &vb, offset), 0);
        }
    long n = 0;
    CU_ASSERT_EQUAL(ks_fold_drain(f, count_keys, &n), 0);
    CU_ASSERT_EQUAL(n, 5000);
    ks_fold_free(f);
}

void ks_test_register_restore_fold(void)
{
    CU_pSuite s = CU_add_suite("restore_fold", NULL, NULL);
    CU_add_test(s, "a key's latest record, deletions too, in LMDB's key order",
                test_latest_in_key_order);
    CU_add_test(s, "5000 keys updated three times: each once, its latest value", test_many_keys);
}
