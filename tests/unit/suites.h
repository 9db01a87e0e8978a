/* suites.h - every unit test suite, registered by runner.c. */
#ifndef KS_TEST_SUITES_H
#define KS_TEST_SUITES_H
#define KS_TEST_SUITES
#endif
