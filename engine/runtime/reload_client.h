/*
 * reload_client.h - the other side of hot deploy (reload.h): a process
 * that is not the engine (`kstreams reload`, `kstreams status`) finds the
 * engine that runs a pipeline by the pid file it wrote
 * (<state_dir>/<application>/kstreams.pid), asks it to reload (SIGHUP) and
 * reads the outcome from its status file (status.json).
 */
#ifndef KS_RELOAD_CLIENT_H
#define KS_RELOAD_CLIENT_H

#include <jansson.h>
#include <stddef.h>

/* Whether an engine runs, as its pid file tells. */
typedef enum ks_engine_liveness {
    KS_ENGINE_NO_PID_FILE, /* no pid file (or no pid in it): never ran, or stopped */
    KS_ENGINE_GONE,        /* a pid that no longer runs: killed (kill -9)? */
    KS_ENGINE_ALIVE,       /* the pid runs */
} ks_engine_liveness;

/*
 * Read the pid file at pid_path. *pid is the pid it holds (0 without one).
 * kill(pid, 0) decides whether it runs, as SIGHUP would (EPERM: a process
 * of another user runs). A pid the system has given to another process
 * since reads as alive.
 */
ks_engine_liveness ks_reload_engine_liveness(const char *pid_path, long *pid);

/*
 * Ask engine `pid` to reload every plugin file (SIGHUP) and wait up to
 * timeout_ms for the outcome in its status file status_path: the signal
 * is sent, then the status file is read until the engine has answered it
 * ("reload": {"hup": {"done": true, "results": {FILE: {"result":
 * "swapped" | "unchanged" | "refused", "build_id", "error"}}}}: what this
 * signal did to each file, also when a reload of a watched file ran
 * between or coalesced with it). 0 with *doc,
 * the status document (a new reference, the caller's); KS_ERR_NOT_FOUND
 * when no result came in time; KS_ERR_IO with err ("cannot signal pid N:
 * reason") when the signal cannot be sent.
 */
int ks_reload_request(long pid, const char *status_path, int timeout_ms, json_t **doc,
                      char *err, size_t errlen);

#endif /* KS_RELOAD_CLIENT_H */
