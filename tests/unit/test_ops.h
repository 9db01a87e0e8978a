/*
 * test_ops.h - helpers shared by the unit tests of the ops plugin
 * (test_ops.c, test_ops_examples.c).
 */
#ifndef KS_TEST_OPS_H
#define KS_TEST_OPS_H

#include "kstreams/testdriver.h"

/* The build's shipped plugins. */
#define OPS_PLUGIN_PATH KS_TEST_BUILDDIR "/plugins/.libs"

/* Open `yaml` (named ops.yaml in messages) with fd 2 going to a file;
 * *log gets what was logged and the open error (static). The driver, or
 * NULL when it did not open. */
ks_driver *ks_test_ops_open_logged(const char *yaml, const char **log);

/* The same; a failure to open fails the test (and is printed). */
ks_driver *ks_test_ops_open(const char *yaml);

/* 1 when the next record of `sink` has this key and value (NULL: null). */
int ks_test_ops_next_is(ks_driver *drv, const char *sink, const char *key, const char *value);

#endif
