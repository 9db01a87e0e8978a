/*
 * runner.c - the one CUnit runner of the unit tests (no broker).
 * Prints CUnit's summary, then "unit: N passed, N failed" for scripts/test.sh.
 */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "loader/plugin.h"
#include "runtime/task.h"
#include "unit/suites.h"

int main(int argc, char **argv)
{
    /* The plugin pre-flight's helper is this binary, as in the engine. */
    if (argc > 1 && strcmp(argv[1], KS_PLUGIN_TRIAL_COMMAND) == 0)
        ks_plugin_trial_main(argc, argv, ks_host_api_table());
    ks_plugin_set_trial("/proc/self/exe", KS_PLUGIN_TRIAL_TIMEOUT_MS);
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    KS_TEST_SUITES
    CU_basic_set_mode(CU_BRM_VERBOSE);
    if (argc > 1) { /* run one suite by name */
        CU_pSuite s = CU_get_suite(argv[1]);
        if (!s) {
            fprintf(stderr, "no suite %s\n", argv[1]);
            return 2;
        }
        CU_basic_run_suite(s);
    } else {
        CU_basic_run_tests();
    }
    unsigned failed = CU_get_number_of_tests_failed();
    unsigned run = CU_get_number_of_tests_run();
    printf("\nunit: %u passed, %u failed\n", run - failed, failed);
    CU_cleanup_registry();
    return failed ? 1 : 0;
}
