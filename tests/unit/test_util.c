/*
 * test_util.c - shared helpers of the unit tests (test_util.h).
 */
#include "unit/test_util.h"

#include <stdio.h>
#include <string.h>

#include "config/config.h"

void ks_test_parse_err(const char *name, const char *yaml, const char *want)
{
    ks_pipeline *p = NULL;
    char err[1024] = "";
    CU_ASSERT_EQUAL(ks_pipeline_parse(name, yaml, strlen(yaml), &p, err, sizeof err), -1);
    if (!strstr(err, want))
        fprintf(stderr, "\nwant '%s'\ngot  '%s'\n", want, err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
    ks_pipeline_free(p);
}
