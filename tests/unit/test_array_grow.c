/*
 * test_array_grow.c - the doubling growth of the engine's arrays
 * (engine/base/grow.c): room is made only when full, the first size and
 * the doubling hold, contents survive, and an impossible size leaves the
 * caller's array and capacity untouched.
 */
#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/grow.h"

static void test_first_room_then_doubling(void)
{
    int *v = NULL;
    size_t cap = 0, n = 0;
    for (int i = 0; i < 40; i++) {
        int *grown = ks_grow(v, &cap, n, sizeof *grown, 8);
        CU_ASSERT_PTR_NOT_NULL_FATAL(grown);
        v = grown;
        v[n++] = i;
        if (n <= 8)
            CU_ASSERT_EQUAL(cap, 8);
    }
    CU_ASSERT_EQUAL(cap, 64); /* 8, 16, 32, 64 */
    for (int i = 0; i < 40; i++)
        CU_ASSERT_EQUAL(v[i], i);
    free(v);
}

static void test_room_left_returns_the_same_array(void)
{
    size_t cap = 4;
    int *v = malloc(cap * sizeof *v);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_PTR_EQUAL(ks_grow(v, &cap, 3, sizeof *v, 8), v);
    CU_ASSERT_EQUAL(cap, 4);
    free(v);
}

static void test_overflow_leaves_the_array_alone(void)
{
    size_t cap = 4;
    char *v = malloc(cap);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_PTR_NULL(ks_grow(v, &cap, cap, SIZE_MAX / 4, 8));
    CU_ASSERT_EQUAL(cap, 4);
    size_t huge = SIZE_MAX / 2 + 1; /* doubling would wrap */
    CU_ASSERT_PTR_NULL(ks_grow(v, &huge, huge, 1, 8));
    CU_ASSERT_EQUAL(huge, SIZE_MAX / 2 + 1);
    free(v); /* still the caller's */
}

void ks_test_register_array_grow(void)
{
    CU_pSuite s = CU_add_suite("array_grow", NULL, NULL);
    CU_add_test(s, "the first room, then doubling, contents kept", test_first_room_then_doubling);
    CU_add_test(s, "with room left the array comes back as it was",
                test_room_left_returns_the_same_array);
    CU_add_test(s, "a size that would overflow leaves the array and its capacity alone",
                test_overflow_leaves_the_array_alone);
}
