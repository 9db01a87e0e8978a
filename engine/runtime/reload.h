/*
 * reload.h - hot deploy: replace a plugin build while the engine runs.
 *
 * Triggers: the plugin file changes (inotify on its directory; a file is
 * loaded once it has been quiet for KS_RELOAD_SETTLE_MS), SIGHUP (every
 * plugin whose file holds another build), and `kstreams reload FILE`
 * (reload_client.h: sends SIGHUP to the pid in
 * <state_dir>/<application>/kstreams.pid and waits for the result in
 * status.json).
 *
 * One reload (a "generation") runs at a time; requests that arrive
 * meanwhile are queued. A generation:
 *   1. load (reload thread): ks_plugin_open (private copy, ELF and ABI
 *      checks), same plugin name, every processor type and function the
 *      pipeline uses present and accepting its YAML (topology.c), state
 *      version equal or a `migrate` offered.
 *   2. prepare (each worker, at its next commit boundary, on its thread):
 *      init a new instance for every affected node of every task it owns.
 *      One failure anywhere refuses the build: prepared instances are
 *      closed, the old build runs on. All or nothing.
 *   3. commit (reload thread, once all workers prepared): new tasks get the
 *      new build from now on.
 *   4. swap (each worker, at its next commit boundary): close the old
 *      instances, run the prepared ones. Records of the batch before the
 *      boundary were processed by the old build, records after it by the
 *      new one; stores are untouched (or migrated inside the first batch).
 *   5. unload (reload thread, once every worker swapped): no instance of
 *      the old build is left; dlclose it and check /proc/self/maps.
 * Results go to the log, to status.json ("processors", "reload") and, for
 * refusals, name the file and the reason.
 */
#ifndef KS_RELOAD_H
#define KS_RELOAD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/engine.h"
#include "runtime/task.h"

#define KS_RELOAD_SETTLE_MS 300

typedef struct ks_reload ks_reload;

/*
 * Start hot deploy for `eng` (its topology, eng->topo, must be built and
 * its workers not yet started): write the pid and status files under
 * <state_dir>/<application>/, watch the plugin files, start the reload
 * thread. Plugin copies go to `copy_dir`. 0 and *out, or -1 with err.
 *
 * Automatic rollback happens here, before any task opens: a plugin whose
 * build crashed `rollback.crashes` times within `rollback.within` (the
 * crash history, rollback.h) runs the last other build of it that
 * committed a batch (kept under <state_dir>/<application>/good-builds/),
 * with one WARN line and "rollback" in status.json. While the engine
 * runs, the reload thread keeps a copy of each build that commits a batch
 * (ks_reload_note_commit).
 */
int ks_reload_start(ks_engine *eng, const ks_host_api *api, const char *copy_dir,
                    ks_reload **out, char *err, size_t errlen);

/* A worker committed a batch with records in it: the builds running now
 * become the good builds a rollback returns to (kept by the reload
 * thread). Any thread; NULL rl is fine. */
void ks_reload_note_commit(ks_reload *rl);

/* Show the first line of the crash report a previous run left under
 * "crash": {"previous_run": LINE} in status.json. NULL rl is fine. */
void ks_reload_note_crash(ks_reload *rl, const char *line);

/* Show the committed state version of each processor node's stores of
 * `task` under "state_versions" in status.json ({"task-P": {"node": V}},
 * null while none is recorded). Worker thread, outside a batch. NULL rl is fine. */
void ks_reload_note_versions(ks_reload *rl, ks_task *task);

/* Drop task-P from "state_versions" (the task moved away). */
void ks_reload_forget_task(ks_reload *rl, const char *where);

/* Stop the reload thread (a generation in progress stays as it is). Call
 * before joining the workers. NULL is fine. */
void ks_reload_stop(ks_reload *rl);

/* After the workers are joined: close any build no longer in the topology,
 * remove the pid and status files, free. NULL is fine. */
void ks_reload_free(ks_reload *rl);

/*
 * Worker `worker`'s commit boundary (no batch open: after a commit, after
 * an abort and rewind, or idle). Prepares, swaps or discards instances of
 * the worker's `tasks` (n entries, NULL where not assigned) as the current
 * generation needs. Cheap when there is nothing to do. Worker thread only.
 */
void ks_reload_at_boundary(ks_reload *rl, int worker, ks_task **tasks, int32_t n);

/* A worker opened `task`: when a generation is committed, move the task
 * to the new build before it processes anything (per partition the switch
 * happens once, even when a partition moves to a worker that has not
 * reached its boundary yet). Worker thread only. */
void ks_reload_task_opened(ks_reload *rl, int worker, ks_task *task);

#endif /* KS_RELOAD_H */
