/*
 * reload_client.c - see reload_client.h. The engine's side (reload.c)
 * numbers the SIGHUPs it handles in status.json ("reload": {"hup":
 * {"seq", "done", "results"}}); a request is answered when a SIGHUP
 * numbered after the ones seen before sending is done. Several SIGHUPs
 * that arrive together are handled as one: every one of them is answered
 * by it, since it reloads every file after they were sent.
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

/* The status document's "reload": {"hup": ...} (reload.c): the SIGHUPs
 * the engine has answered or is answering, and whether it is done. */
static long hup_seq(const json_t *doc, int *done)
{
    const json_t *h = json_object_get(json_object_get(doc, "reload"), "hup");
    *done = json_is_true(json_object_get(h, "done"));
    return (long)json_integer_value(json_object_get(h, "seq"));
}

/* The SIGHUPs seen so far; -1 when the status file is unreadable. */
static long hups_seen(const char *path)
{
    json_t *doc = NULL;
    char err[512];
    if (ks_status_read(path, &doc, err, sizeof err) != 0)
        return -1;
    int done;
    long n = hup_seq(doc, &done);
    json_decref(doc);
    return n;
}

/* The status document once a SIGHUP after the `before`-th is answered
 * (every plugin file reloaded); NULL while not yet. */
static json_t *finished_after(const char *status_path, long before)
{
    json_t *doc = NULL;
    char err[512];
    if (ks_status_read(status_path, &doc, err, sizeof err) != 0)
        return NULL;
    int done;
    if (hup_seq(doc, &done) > before && done)
        return doc;
    json_decref(doc);
    return NULL;
}

int ks_reload_request(long pid, const char *status_path, int timeout_ms, json_t **doc,
                      char *err, size_t errlen)
{
    *doc = NULL;
    long before = hups_seen(status_path);
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
