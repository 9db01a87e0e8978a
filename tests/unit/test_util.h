/*
 * test_util.h - shared helpers of the unit tests.
 * Each test_<module>.c defines `void ks_test_register_<module>(void)` that
 * adds its CUnit suite; runner.c calls them all.
 */
#ifndef KS_TEST_UTIL_H
#define KS_TEST_UTIL_H

#include <CUnit/CUnit.h>

/* Directory of test sources (fixtures) and of the build tree (plugins). */
#ifndef KS_TEST_SRCDIR
#define KS_TEST_SRCDIR "tests"
#endif
#ifndef KS_TEST_BUILDDIR
#define KS_TEST_BUILDDIR "."
#endif

/* Assert that ks_pipeline_parse refuses the YAML text `yaml`, read as
 * file `name`, with an error containing `want` (printed with the error
 * when it does not). Borrows everything. */
void ks_test_parse_err(const char *name, const char *yaml, const char *want);

#endif
