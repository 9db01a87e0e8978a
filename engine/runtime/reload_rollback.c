/*
 * reload_rollback.c - automatic rollback (reload_internal.h): the builds
 * that committed a batch are kept (rollback.h), and at start a build that
 * crashed rollback.crashes times within rollback.within is replaced by the
 * kept good build before any task opens.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "runtime/reload_internal.h"
#include "runtime/rollback.h"
#include "state/layout.h"

/* Keep a copy of each running build that committed a batch since it
 * became the running one: the build an automatic rollback goes back to. */
void ks_reload_keep_good_builds(ks_reload *rl)
{
    long commits = __atomic_load_n(&rl->commits, __ATOMIC_ACQUIRE);
    for (size_t i = 0; i < rl->file_count; i++) {
        watched *f = &rl->files[i];
        const ks_plugin *pl = rl->topo->plugins[i];
        if (commits <= f->commits_at_load || strcmp(f->kept_build, pl->desc->build_id) == 0)
            continue;
        char err[1024];
        snprintf(f->kept_build, sizeof f->kept_build, "%s", pl->desc->build_id);
        if (ks_rollback_keep(rl->good_dir, pl->desc->name, pl->desc->build_id, pl->copy_path,
                             err, sizeof err) != 0)
            ks_warn(WHERE, "plugin %s: build %s committed a batch but cannot be kept for a "
                    "rollback: %s", pl->desc->name, pl->desc->build_id, err);
        else
            ks_info(WHERE, "plugin %s: build %s committed a batch: kept in %s as the build a "
                    "rollback returns to", pl->desc->name, pl->desc->build_id, rl->good_dir);
    }
}

/* "rollback": {PLUGIN: {...}} in status.json, and the one log line. */
static void report_rollback(ks_reload *rl, const ks_plugin *bad, const ks_plugin *good,
                            int crashes)
{
    const ks_pipeline *p = rl->topo->pipeline;
    ks_warn(WHERE, "plugin %s: build %s crashed %d times within %lld s (rollback.crashes: %d): "
            "rolled back to build %s, the last one that committed a batch (%s); %s still "
            "holds build %s", bad->desc->name, bad->desc->build_id, crashes,
            (long long)(p->rollback_within_ms / 1000), p->rollback_crashes, good->desc->build_id,
            good->path, bad->path, bad->desc->build_id);
    json_t *o = json_pack("{s:s, s:i, s:s, s:s, s:s, s:o}", "crashing_build",
                          bad->desc->build_id, "crashes", crashes, "rolled_back_to",
                          good->desc->build_id, "from", good->path, "file", bad->path, "at",
                          ks_reload_iso_time(time(NULL)));
    ks_status_set(rl->status, "rollback", bad->desc->name, o);
}

/* The build in topo->plugins[slot] crashed too often: run the kept good
 * build instead. No worker runs yet, so no instance exists to swap. */
static void roll_back(ks_reload *rl, size_t slot, int crashes)
{
    ks_plugin *bad = rl->topo->plugins[slot], *good = NULL;
    char path[4200], build[256], err[1536];
    if (!ks_rollback_find(rl->good_dir, bad->desc->name, bad->desc->build_id, path,
                          sizeof path, build, sizeof build)) {
        ks_error(WHERE, "plugin %s: build %s crashed %d times, but no other build of it that "
                 "committed a batch is kept in %s: running it again", bad->desc->name,
                 bad->desc->build_id, crashes, rl->good_dir);
        return;
    }
    gen *g = ks_reload_gen_new(rl);
    if (!g || ks_plugin_open(path, rl->copy_dir, rl->api, &good, err, sizeof err) != 0) {
        ks_error(WHERE, "plugin %s: cannot roll back to build %s: %s", bad->desc->name, build,
                 g ? err : "out of memory");
        ks_reload_gen_free(rl, g);
        return;
    }
    g->slot = slot;
    g->old_pl = bad;
    g->new_pl = good;
    if (ks_reload_validate_build(rl, g, 1, err, sizeof err) != 0) {
        ks_error(WHERE, "plugin %s: cannot roll back to build %s (%s): %s", bad->desc->name,
                 build, path, err);
        ks_plugin_close(good);
        ks_reload_gen_free(rl, g);
        return;
    }
    ks_reload_bind_build(rl, g);
    report_rollback(rl, bad, good, crashes);
    ks_plugin_close(bad);
    ks_reload_gen_free(rl, g);
}

/* At start: every plugin whose build crashed rollback.crashes times within
 * rollback.within is rolled back; older crashes are forgotten. */
void ks_reload_roll_back_crashing_builds(ks_reload *rl)
{
    const ks_pipeline *p = rl->topo->pipeline;
    char history[4200], err[512];
    ks_layout_crash_history_file(p->state_dir, p->application, history, sizeof history);
    int64_t now = (int64_t)time(NULL);
    if (ks_rollback_prune_history(history, now, p->rollback_within_ms, err, sizeof err) != 0)
        ks_warn(WHERE, "%s", err);
    for (size_t i = 0; p->rollback_crashes > 0 && i < rl->file_count; i++) {
        const ks_plugin *pl = rl->topo->plugins[i];
        int n = ks_rollback_count_crashes(history, pl->desc->name, pl->desc->build_id, now,
                                          p->rollback_within_ms);
        if (n >= p->rollback_crashes)
            roll_back(rl, i, n);
    }
}

