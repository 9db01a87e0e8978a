/*
 * reload_client.c - see reload_client.h. The engine's side (reload.c)
 * counts attempts in status.json ("reload": {"attempts", "in_progress"});
 * a request is answered when the count has grown and nothing is in
 * progress.
 */
#include "runtime/reload_client.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kstreams/kstreams.h"
#include "runtime/status.h"

#define POLL_MS 100
#define BUSY (-2) /* a reload is in progress */

ks_engine_liveness ks_reload_engine_liveness(const char *pid_path, long *pid)
{
    *pid = 0;
    FILE *pf = fopen(pid_path, "r");
    long p = 0;
    int ok = pf && fscanf(pf, "%ld", &p) == 1 && p > 0;
    if (pf)
        fclose(pf);
    if (!ok)
        return KS_ENGINE_NO_PID_FILE;
    *pid = p;
    return kill((pid_t)p, 0) == 0 || errno == EPERM ? KS_ENGINE_ALIVE : KS_ENGINE_GONE;
}

/* Reload attempts counted in the status file; -1 when unreadable, BUSY
 * while one is in progress. */
static long status_attempts(const char *path)
{
    json_t *doc = NULL;
    char err[512];
    if (ks_status_read(path, &doc, err, sizeof err) != 0)
        return -1;
    const json_t *rl = json_object_get(doc, "reload");
    long n = (long)json_integer_value(json_object_get(rl, "attempts"));
    int busy = json_is_true(json_object_get(rl, "in_progress"));
    json_decref(doc);
    return busy ? BUSY : n;
}

/* The status document once the reloads after attempt `before` are done
 * (SIGHUP tries every plugin file: all of them); NULL while not yet. */
static json_t *finished_after(const char *status_path, long before)
{
    long now = status_attempts(status_path);
    if (now < 0 || now <= before)
        return NULL;
    json_t *doc = NULL;
    char err[512];
    if (ks_status_read(status_path, &doc, err, sizeof err) != 0)
        return NULL;
    if (json_is_true(json_object_get(json_object_get(doc, "reload"), "in_progress"))) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

int ks_reload_request(long pid, const char *status_path, int timeout_ms, json_t **doc,
                      char *err, size_t errlen)
{
    *doc = NULL;
    long before = status_attempts(status_path);
    while (before == BUSY && timeout_ms > 0) { /* let the one in progress finish */
        usleep(POLL_MS * 1000);
        timeout_ms -= POLL_MS;
        before = status_attempts(status_path);
    }
    if (kill((pid_t)pid, SIGHUP) != 0) {
        snprintf(err, errlen, "cannot signal pid %ld: %s", pid, strerror(errno));
        return KS_ERR_IO;
    }
    for (int waited = 0; waited < timeout_ms; waited += POLL_MS) {
        usleep(POLL_MS * 1000);
        if ((*doc = finished_after(status_path, before)))
            return 0;
    }
    return KS_ERR_NOT_FOUND;
}
