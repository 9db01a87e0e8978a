/*
 * test_changes.c - a plugin author's unit test of changes.c, with the
 * kstreams test driver: no broker, real LMDB in a temporary directory.
 *
 * Build (installed kstreams):
 *   cc -o test_changes test_changes.c \
 *      $(pkg-config --cflags --libs kstreams-testdriver) -lcunit
 * PIPELINE and PLUGIN_DIR say where pipeline.yaml and changes.so are.
 */
#include <CUnit/Basic.h>
#include <string.h>

#include <kstreams/testdriver.h>

#ifndef PIPELINE
#define PIPELINE "pipeline.yaml"
#endif
#ifndef PLUGIN_DIR
#define PLUGIN_DIR ".libs"
#endif

static ks_driver *drv;

static void open_driver(void)
{
    ks_driver_options opt = {.plugin_path = PLUGIN_DIR, .wallclock_start_ms = 1000000};
    char err[1024];
    int rc = ks_driver_open(PIPELINE, &opt, &drv, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
}

static int pipe_price(const char *product, const char *price)
{
    return ks_driver_pipe(drv, "prices", product, strlen(product), price, strlen(price),
                          1000);
}

/* 1 when the next output is (key, value). */
static int next_output_is(const char *key, const char *value)
{
    ks_driver_record r;
    if (ks_driver_read_output(drv, "price-changes", &r) != 0)
        return 0;
    return r.key_len == strlen(key) && memcmp(r.key, key, r.key_len) == 0 &&
           r.value_len == strlen(value) && memcmp(r.value, value, r.value_len) == 0;
}

static void test_forwards_only_changes(void)
{
    open_driver();
    CU_ASSERT_EQUAL(pipe_price("apple", "1.20"), 0);
    CU_ASSERT_EQUAL(pipe_price("apple", "1.20"), 0); /* same: dropped */
    CU_ASSERT_EQUAL(pipe_price("pear", "0.80"), 0);
    CU_ASSERT_EQUAL(pipe_price("apple", "1.25"), 0);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, "price-changes"), 3);
    CU_ASSERT(next_output_is("apple", "1.20"));
    CU_ASSERT(next_output_is("pear", "0.80"));
    CU_ASSERT(next_output_is("apple", "1.25"));
    ks_driver_record r;
    CU_ASSERT_EQUAL(ks_driver_read_output(drv, NULL, &r), KS_ERR_NOT_FOUND);

    /* the store holds the last value per key */
    ks_bytes v;
    CU_ASSERT_EQUAL_FATAL(ks_driver_store_get(drv, "last-price", -1, "apple", 5, &v), 0);
    CU_ASSERT(v.len == 4 && memcmp(v.data, "1.25", 4) == 0);
    CU_ASSERT_EQUAL(ks_driver_store_get(drv, "last-price", -1, "plum", 4, &v),
                    KS_ERR_NOT_FOUND);
    ks_driver_close(drv);
}

static void test_reports_suppressed(void)
{
    open_driver();
    pipe_price("apple", "1.20");
    pipe_price("apple", "1.20");
    pipe_price("apple", "1.20");
    ks_driver_record r;
    CU_ASSERT_EQUAL(ks_driver_read_output(drv, NULL, &r), 0); /* the first apple */

    CU_ASSERT_EQUAL(ks_driver_advance_wallclock(drv, 9999), 0); /* not due yet */
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0);
    CU_ASSERT_EQUAL(ks_driver_advance_wallclock(drv, 1), 0); /* 10 s: report */
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, NULL, &r), 0);
    CU_ASSERT(r.key_len == 10 && memcmp(r.key, "suppressed", 10) == 0);
    CU_ASSERT(r.value_len == 1 && memcmp(r.value, "2", 1) == 0);
    CU_ASSERT_EQUAL(r.timestamp, 1000000 + 10000);

    /* nothing dropped since: the next report says nothing */
    CU_ASSERT_EQUAL(ks_driver_advance_wallclock(drv, 60000), 0);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0);
    ks_driver_close(drv);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("changes", NULL, NULL);
    CU_add_test(s, "forwards only changed values", test_forwards_only_changes);
    CU_add_test(s, "reports suppressed records every 10 s", test_reports_suppressed);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failed ? 1 : 0;
}
