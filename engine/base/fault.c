/*
 * fault.c - see fault.h. The configuration is read once; the visit counter
 * is atomic because every worker thread passes the same points.
 */
#include "base/fault.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char target[64];
static long target_visit = 1;
static atomic_long visits;
static char pause_target[64];
static long pause_ms;

/* KS_PAUSE_AT=<point>:<ms> */
static void read_pause(void)
{
    const char *spec = getenv("KS_PAUSE_AT");
    if (!spec || !*spec)
        return;
    snprintf(pause_target, sizeof pause_target, "%s", spec);
    char *colon = strchr(pause_target, ':');
    if (colon) {
        *colon = '\0';
        pause_ms = strtol(colon + 1, NULL, 10);
    }
    if (pause_ms <= 0 || pause_ms > 10000)
        pause_target[0] = '\0';
}

static void read_config(void)
{
    read_pause();
    const char *spec = getenv("KS_CRASH_AT");
    if (!spec || !*spec)
        return;
    snprintf(target, sizeof target, "%s", spec);
    char *colon = strchr(target, ':');
    if (colon) {
        *colon = '\0';
        target_visit = strtol(colon + 1, NULL, 10);
        if (target_visit < 1)
            target_visit = 1;
    }
}

void ks_fault_point(const char *point)
{
    pthread_once(&once, read_config);
    if (pause_target[0] && strcmp(point, pause_target) == 0)
        usleep((useconds_t)pause_ms * 1000);
    if (!target[0] || strcmp(point, target) != 0)
        return;
    if (atomic_fetch_add(&visits, 1) + 1 == target_visit) {
        ks_warn("fault", "KS_CRASH_AT: killing the process at %s (visit %ld)", point,
                target_visit);
        kill(getpid(), SIGKILL);
    }
}
