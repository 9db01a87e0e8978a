/* suites.h - every unit test suite, registered by runner.c. */
#ifndef KS_TEST_SUITES_H
#define KS_TEST_SUITES_H
void ks_test_register_plugin(void);
void ks_test_register_store(void);
void ks_test_register_config(void);
void ks_test_register_stateful(void);
#define KS_TEST_SUITES ks_test_register_plugin(); ks_test_register_store(); ks_test_register_config(); ks_test_register_stateful();
#endif
