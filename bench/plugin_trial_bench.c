/*
 * plugin_trial_bench.c - what the plugin pre-flight adds to loading a
 * build: N loads (ks_plugin_open + ks_plugin_close) of one plugin without
 * the trial, then N with the trial run by the given kstreams binary, in
 * the same run. Prints wall-clock milliseconds per load of each and the
 * difference, and the CPU time of one helper (user + system), which
 * depends less on what else the machine runs.
 *
 *   make -C BUILD/engine plugin_trial_bench &&
 *     BUILD/engine/plugin_trial_bench BUILD/engine/kstreams PLUGIN.so [N]
 *
 * N defaults to 20. Copies go to a temporary directory, removed at the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "loader/plugin.h"
#include "runtime/task.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* CPU time (user + system) of the waited-for children so far, in ms. */
static double children_cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

/* Milliseconds per load over n loads; negative when one failed. */
static double time_loads(const char *plugin, const char *copies, int n)
{
    double t0 = now_ms();
    for (int i = 0; i < n; i++) {
        ks_plugin *pl = NULL;
        char err[1536];
        if (ks_plugin_open(plugin, copies, ks_host_api_table(), &pl, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return -1;
        }
        ks_plugin_close(pl);
    }
    return (now_ms() - t0) / n;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: plugin_trial_bench KSTREAMS PLUGIN.so [N]\n");
        return 64;
    }
    int n = argc > 3 ? atoi(argv[3]) : 20;
    if (n < 1)
        n = 1;
    char copies[] = "/tmp/ks-trial-bench-XXXXXX";
    if (!mkdtemp(copies)) {
        perror("mkdtemp");
        return 1;
    }
    ks_plugin_set_trial(NULL, 0);
    time_loads(argv[2], copies, 1); /* warm the page cache */
    double off = time_loads(argv[2], copies, n);
    ks_plugin_set_trial(argv[1], KS_PLUGIN_TRIAL_TIMEOUT_MS);
    double cpu0 = children_cpu_ms();
    double on = time_loads(argv[2], copies, n);
    double helper_cpu = (children_cpu_ms() - cpu0) / n;
    rmdir(copies);
    if (off < 0 || on < 0)
        return 1;
    printf("%d loads of %s\n  without pre-flight: %.2f ms per load\n"
           "  with pre-flight:    %.2f ms per load\n  added:              %.2f ms per plugin\n"
           "  helper CPU time:    %.2f ms per load\n",
           n, argv[2], off, on, on - off, helper_cpu);
    return 0;
}
