/*
 * reload.c - hot deploy (see reload.h for the protocol).
 *
 * Owns: the reload thread, the watch on the plugin files (plugin_watch.c),
 * the pid file, and the generation in progress (new build, its per-node
 * bindings, the old build until it is unloaded). The status document is
 * written by reload_status.c, automatic rollback is reload_rollback.c;
 * the types they share are in reload_internal.h.
 *
 * Invariants:
 *  - At most one generation exists; the next starts only when the last one
 *    is finished (swapped everywhere, or refused and every prepared
 *    instance closed).
 *  - Topology nodes' plugin/ptype/fns change only at commit, by this
 *    thread, with atomic stores; tasks read them atomically when they
 *    create instances (task.c), so a new task gets one build or the other,
 *    and ks_reload_task_opened / the boundary swap fix the old one.
 *  - The old build is closed only when every worker acknowledged the swap
 *    at a boundary after the commit: from then on no instance, timer or
 *    named-function pointer of it is left in any task.
 * Thread: the reload thread runs the generation; workers only set their
 * own per-worker slot under `lock`.
 */
#include "runtime/reload.h"
#include "runtime/reload_internal.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "base/log.h"
#include "http/metrics.h"
#include "runtime/plugin_watch.h"
#include "runtime/rollback.h"
#include "runtime/status.h"
#include "base/clock.h"
#include "state/layout.h"

#define PREPARE_TIMEOUT_MS 60000

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- generations ------------------------------------------------------- */

void ks_reload_gen_free(ks_reload *rl, gen *g)
{
    if (!g)
        return;
    for (size_t i = 0; g->new_fns && i < rl->topo->node_count; i++)
        free(g->new_fns[i]);
    for (size_t i = 0; g->old_fns && i < rl->topo->node_count; i++)
        free(g->old_fns[i]);
    free(g->new_fns);
    free(g->old_fns);
    free(g->builds);
    free(g->worker);
    free(g);
}

/* Refuse the build of file `f`: log, record, count. */
static void refuse(ks_reload *rl, watched *f, const char *why)
{
    ks_error(WHERE, "%s: new build refused, the running build stays: %s", f->path, why);
    snprintf(f->last_error, sizeof f->last_error, "%s", why);
    rl->refused++;
    ks_metrics_add(rl->eng->metrics, "kstreams_reload_failures_total", "", 1);
    ks_reload_hup_note(rl, f, "refused", NULL, why);
    ks_reload_status_processors(rl);
    ks_reload_status_write(rl, f->path, "refused", NULL, why);
}

/* Same name, processor types, functions, config and state versions (not
 * the versions for a rollback, whose stores are checked at task open). */
int ks_reload_validate_build(ks_reload *rl, gen *g, int rollback, char *err, size_t errlen)
{
    const ks_plugin_descriptor *od = g->old_pl->desc, *nd = g->new_pl->desc;
    if (strcmp(od->name, nd->name) != 0) {
        snprintf(err, errlen, "the new build calls itself '%s', the running one is '%s'",
                 nd->name, od->name);
        return -1;
    }
    for (size_t i = 0; i < rl->topo->node_count; i++) {
        const ks_topo_node *n = &rl->topo->nodes[i];
        const ks_processor_type *pt;
        int rc = ks_topology_prepare_swap(n, g->new_pl, &pt, &g->new_fns[i], err, errlen);
        if (rc < 0)
            return -1;
        if (rc == 0)
            continue;
        /* a rollback runs before any task opens: the stores' own version
         * decides at task open (task.c), not the crashing build's */
        if (!rollback && pt->state_version < n->ptype->state_version) {
            snprintf(err, errlen,
                     "node '%s': type '%s' writes state version %u, older than the %u the "
                     "stores are in: kstreams does not downgrade state",
                     n->name, n->cfg->type, (unsigned)pt->state_version,
                     (unsigned)n->ptype->state_version);
            return -1;
        }
        if (!rollback && pt->state_version != n->ptype->state_version && !pt->migrate) {
            snprintf(err, errlen,
                     "node '%s': type '%s' writes state version %u, the running build %u, "
                     "and the new build has no migrate()",
                     n->name, n->cfg->type, (unsigned)pt->state_version,
                     (unsigned)n->ptype->state_version);
            return -1;
        }
        g->builds[i] = (ks_node_build){.plugin = n->plugin == g->old_pl ? g->new_pl : n->plugin,
                                       .ptype = pt,
                                       .fns = g->new_fns[i],
                                       .fn_count = n->fn_count};
    }
    return 0;
}

/* A new, empty generation; NULL when out of memory. */
gen *ks_reload_gen_new(ks_reload *rl)
{
    gen *g = calloc(1, sizeof *g);
    size_t nn = rl->topo->node_count + 1;
    if (!g || !(g->builds = calloc(nn, sizeof *g->builds)) ||
        !(g->new_fns = calloc(nn, sizeof *g->new_fns)) ||
        !(g->old_fns = calloc(nn, sizeof *g->old_fns)) ||
        !(g->worker = calloc((size_t)rl->workers + 1, sizeof *g->worker))) {
        ks_reload_gen_free(rl, g);
        return NULL;
    }
    return g;
}

/* Load and validate the build at f->path as a new generation. 0 when it
 * started (or the file holds the running build), -1 when refused. */
static int gen_start(ks_reload *rl, size_t slot)
{
    watched *f = &rl->files[slot];
    ks_plugin *old_pl = rl->topo->plugins[slot];
    ks_plugin *pl = NULL;
    char err[1536];
    rl->attempts++;
    if (ks_plugin_open(f->path, rl->copy_dir, rl->api, &pl, err, sizeof err) != 0) {
        refuse(rl, f, err);
        return -1;
    }
    if (strcmp(pl->desc->build_id, old_pl->desc->build_id) == 0) {
        ks_info(WHERE, "%s: build %s is already running; nothing to do", f->path,
                pl->desc->build_id);
        ks_plugin_close(pl);
        ks_reload_hup_note(rl, f, "unchanged", old_pl->desc->build_id, NULL);
        ks_reload_status_write(rl, f->path, "unchanged", old_pl->desc->build_id, NULL);
        return 0;
    }
    gen *g = ks_reload_gen_new(rl);
    if (!g) {
        ks_plugin_close(pl);
        refuse(rl, f, "out of memory");
        return -1;
    }
    g->slot = slot;
    g->old_pl = old_pl;
    g->new_pl = pl;
    if (ks_reload_validate_build(rl, g, 0, err, sizeof err) != 0) {
        char why[2048];
        snprintf(why, sizeof why, "%s (build %s)", err, pl->desc->build_id);
        ks_reload_gen_free(rl, g);
        ks_plugin_close(pl);
        refuse(rl, f, why);
        return -1;
    }
    g->started_ms = ks_mono_ms();
    ks_info(WHERE, "%s: build %s (%s) loaded from %s; workers prepare it at their next commit",
            f->path, pl->desc->build_id, pl->desc->version, pl->copy_path);
    pthread_mutex_lock(&rl->lock);
    rl->g = g;
    pthread_mutex_unlock(&rl->lock);
    ks_reload_status_write(rl, NULL, NULL, NULL, NULL);
    return 0;
}

/* All workers prepared: publish the new bindings for tasks created from
 * now on (atomic stores; task.c loads them atomically). */
void ks_reload_bind_build(ks_reload *rl, gen *g)
{
    for (size_t i = 0; i < rl->topo->node_count; i++) {
        ks_topo_node *n = &rl->topo->nodes[i];
        if (!g->builds[i].ptype)
            continue;
        g->old_fns[i] = n->fns;
        __atomic_store_n(&n->fns, g->new_fns[i], __ATOMIC_RELEASE);
        g->new_fns[i] = NULL; /* the topology owns it now */
        __atomic_store_n(&n->ptype, g->builds[i].ptype, __ATOMIC_RELEASE);
        __atomic_store_n(&n->plugin, g->builds[i].plugin, __ATOMIC_RELEASE);
    }
    rl->topo->plugins[g->slot] = g->new_pl; /* topology frees it at the end */
}

static void gen_commit(ks_reload *rl, gen *g)
{
    ks_reload_bind_build(rl, g);
    pthread_mutex_lock(&rl->lock);
    g->state = GEN_COMMITTED;
    pthread_mutex_unlock(&rl->lock);
    ks_info(WHERE, "build %s of plugin %s prepared on every task (%lld ms); workers swap "
            "at their next commit", g->new_pl->desc->build_id, g->new_pl->desc->name,
            (long long)(ks_mono_ms() - g->started_ms));
}

/* Is `path` still mapped into this process? (/proc/self/maps) */
static int still_mapped(const char *path)
{
    FILE *m = fopen("/proc/self/maps", "r");
    if (!m)
        return -1;
    char line[8192];
    int found = 0;
    while (!found && fgets(line, sizeof line, m))
        found = strstr(line, path) != NULL;
    fclose(m);
    return found;
}

/* Every worker swapped: unload the old build and show that it is gone. */
static void gen_finish(ks_reload *rl, gen *g)
{
    watched *f = &rl->files[g->slot];
    char copy[4096], old_build[256];
    snprintf(copy, sizeof copy, "%s", g->old_pl->copy_path);
    snprintf(old_build, sizeof old_build, "%s", g->old_pl->desc->build_id);
    ks_plugin_close(g->old_pl);
    int mapped = still_mapped(copy);
    if (mapped == 0)
        ks_info(WHERE, "unloaded build %s (copy %s): no longer mapped", old_build, copy);
    else
        ks_warn(WHERE, "closed build %s (copy %s) but it is still mapped (a plugin left "
                "something registered?)", old_build, copy);
    ks_info(WHERE, "%s: swapped to build %s on every task in %lld ms", f->path,
            g->new_pl->desc->build_id, (long long)(ks_mono_ms() - g->started_ms));
    f->last_error[0] = '\0';
    rl->swapped++;
    ks_metrics_add(rl->eng->metrics, "kstreams_reloads_total", "", 1);
    const char *build = g->new_pl->desc->build_id;
    pthread_mutex_lock(&rl->lock);
    rl->g = NULL;
    pthread_mutex_unlock(&rl->lock);
    /* commits counted from here on are the new build's (every worker swapped) */
    f->commits_at_load = __atomic_load_n(&rl->commits, __ATOMIC_ACQUIRE);
    ks_reload_hup_note(rl, f, "swapped", build, NULL);
    ks_reload_status_processors(rl);
    ks_reload_status_write(rl, f->path, "swapped", build, NULL);
    ks_reload_gen_free(rl, g);
}

/* Drive the generation one step. */
static void gen_step(ks_reload *rl)
{
    gen *g = rl->g;
    if (!g)
        return;
    int ready = 0, failed = 0, busy = 0, swapped = 0;
    pthread_mutex_lock(&rl->lock);
    for (int w = 0; w < rl->workers; w++) {
        ready += g->worker[w] == W_READY;
        failed += g->worker[w] == W_FAILED;
        busy += g->worker[w] == W_BUSY;
        swapped += g->worker[w] == W_SWAPPED;
    }
    enum gen_state st = g->state;
    if (st == GEN_PREPARING &&
        (failed || ks_mono_ms() - g->started_ms > PREPARE_TIMEOUT_MS)) {
        if (!failed)
            snprintf(g->error, sizeof g->error,
                     "workers did not reach a commit boundary within %d s",
                     PREPARE_TIMEOUT_MS / 1000);
        g->state = st = GEN_FAILED;
    }
    pthread_mutex_unlock(&rl->lock);
    if (st == GEN_PREPARING && ready == rl->workers)
        gen_commit(rl, g);
    else if (st == GEN_COMMITTED && swapped == rl->workers)
        gen_finish(rl, g);
    else if (st == GEN_FAILED && !busy && !ready) {
        /* every prepared instance is closed: the new build can go */
        watched *f = &rl->files[g->slot];
        char why[2048];
        snprintf(why, sizeof why, "%s (build %s)", g->error, g->new_pl->desc->build_id);
        ks_plugin_close(g->new_pl);
        pthread_mutex_lock(&rl->lock);
        rl->g = NULL;
        pthread_mutex_unlock(&rl->lock);
        ks_reload_gen_free(rl, g);
        refuse(rl, f, why);
    }
}

/* ---- worker side --------------------------------------------------------- */

/* Prepare new instances of every affected node of `task`. */
static int prepare_task(gen *g, const ks_topology *topo, ks_task *task, char *err,
                        size_t errlen)
{
    for (size_t i = 0; i < topo->node_count; i++) {
        if (!g->builds[i].ptype)
            continue;
        const struct ks_ctx *live = ks_task_live(task, (int)i);
        if (live && live->build.ptype == g->builds[i].ptype &&
            live->build.fns == g->builds[i].fns)
            continue; /* created on the new build already */
        const struct ks_ctx *next = task->next[i];
        if (next && next->build.ptype == g->builds[i].ptype &&
            next->build.fns == g->builds[i].fns)
            continue; /* prepared already */
        uint32_t from = live ? live->build.ptype->state_version
                             : g->builds[i].ptype->state_version;
        if (ks_task_prepare_node(task, &topo->nodes[i], &g->builds[i], from, err, errlen) != 0)
            return -1;
    }
    return 0;
}

/* Swap every affected node of `task`, preparing what is not prepared yet
 * (tasks opened after this worker prepared). */
static int swap_task(ks_reload *rl, gen *g, ks_task *task)
{
    char err[1024];
    if (prepare_task(g, rl->topo, task, err, sizeof err) != 0) {
        ks_error(WHERE, "%s", err);
        return -1;
    }
    for (size_t i = 0; i < rl->topo->node_count; i++)
        if (g->builds[i].ptype)
            ks_task_swap_node(task, (int)i);
    return 0;
}

void ks_reload_at_boundary(ks_reload *rl, int worker, ks_task **tasks, int32_t n)
{
    if (!rl || worker < 0 || worker >= rl->workers)
        return;
    pthread_mutex_lock(&rl->lock);
    gen *g = rl->g;
    int st = g ? (int)g->state : -1, mine = g ? g->worker[worker] : 0;
    if (g && st == GEN_PREPARING && mine == W_IDLE)
        g->worker[worker] = W_BUSY;
    pthread_mutex_unlock(&rl->lock);
    if (!g)
        return;
    int64_t t0 = mono_us();
    if (st == GEN_PREPARING && mine == W_IDLE) {
        char err[1024] = "";
        int rc = 0;
        for (int32_t p = 0; p < n && rc == 0; p++)
            if (tasks[p])
                rc = prepare_task(g, rl->topo, tasks[p], err, sizeof err);
        pthread_mutex_lock(&rl->lock);
        g->worker[worker] = rc == 0 ? W_READY : W_FAILED;
        if (rc != 0) { /* refused for everyone: others discard at their boundary */
            g->state = GEN_FAILED;
            if (!g->error[0])
                snprintf(g->error, sizeof g->error, "%s", err);
        }
        pthread_mutex_unlock(&rl->lock);
        if (rc != 0) { /* drop what this worker prepared at once */
            st = GEN_FAILED, mine = W_FAILED;
        } else {
            /* the time this worker's records waited: the pause of step 2 */
            ks_info(WHERE, "worker-%d: new instances prepared in %.3f ms", worker,
                    (double)(mono_us() - t0) / 1000.0);
            return;
        }
    }
    if (st == GEN_FAILED && (mine == W_READY || mine == W_FAILED)) {
        for (int32_t p = 0; p < n; p++)
            if (tasks[p])
                ks_task_discard_prepared(tasks[p]);
        pthread_mutex_lock(&rl->lock);
        g->worker[worker] = W_DISCARDED;
        pthread_mutex_unlock(&rl->lock);
        return;
    }
    if (st == GEN_COMMITTED && mine != W_SWAPPED) {
        for (int32_t p = 0; p < n; p++) {
            if (tasks[p] && swap_task(rl, g, tasks[p]) != 0) {
                ks_engine_stop(rl->eng, 1,
                               "hot deploy: a task could not start the accepted build "
                               "(see the log); restart to run it");
                return;
            }
        }
        pthread_mutex_lock(&rl->lock);
        g->worker[worker] = W_SWAPPED;
        pthread_mutex_unlock(&rl->lock);
        ks_info(WHERE, "worker-%d: swapped in %.3f ms", worker,
                (double)(mono_us() - t0) / 1000.0);
    }
}

void ks_reload_task_opened(ks_reload *rl, int worker, ks_task *task)
{
    if (!rl || worker < 0 || worker >= rl->workers)
        return;
    pthread_mutex_lock(&rl->lock);
    gen *g = rl->g;
    int committed = g && g->state == GEN_COMMITTED;
    pthread_mutex_unlock(&rl->lock);
    if (committed && swap_task(rl, g, task) != 0)
        ks_engine_stop(rl->eng, 1,
                       "hot deploy: a new task could not start the accepted build (see the "
                       "log); restart to run it");
}

/* ---- the thread ------------------------------------------------------------ */

/* A SIGHUP (or several, coalesced): reload every file, and answer it. */
static void on_hup(ks_reload *rl)
{
    ks_info(WHERE, "SIGHUP: reloading every plugin file%s",
            rl->g ? " (queued behind the reload in progress)" : "");
    rl->hup_seq++;
    json_object_clear(rl->hup_results);
    for (size_t i = 0; i < rl->file_count; i++) {
        rl->files[i].requested = 1;
        rl->files[i].hup_pending = 1;
        rl->files[i].hup_inflight = 0;
    }
    ks_reload_status_write(rl, NULL, NULL, NULL, NULL);
}

static void *reload_main(void *arg)
{
    ks_reload *rl = arg;
    while (!rl->stop) {
        ks_plugin_watch_poll(rl->watch, rl->g ? 10 : 100, KS_RELOAD_SETTLE_MS, rl->changed);
        for (size_t i = 0; i < rl->file_count; i++) {
            if (!rl->changed[i])
                continue;
            if (rl->g)
                ks_info(WHERE, "%s changed: reload queued behind the one in progress",
                        rl->files[i].path);
            rl->files[i].requested = 1;
        }
        sig_atomic_t hup = ks_signal_reload;
        if (hup != rl->seen_hup) {
            rl->seen_hup = hup;
            on_hup(rl);
        }
        gen_step(rl);
        for (size_t i = 0; !rl->g && i < rl->file_count; i++) {
            watched *f = &rl->files[i];
            if (!f->requested)
                continue;
            f->requested = 0;
            f->hup_inflight = f->hup_pending; /* this start answers the SIGHUP */
            f->hup_pending = 0;
            gen_start(rl, i);
        }
        if (!rl->g)
            ks_reload_keep_good_builds(rl);
    }
    return NULL;
}

static int watch_files(ks_reload *rl, char *err, size_t errlen)
{
    const char **paths = calloc(rl->file_count + 1, sizeof *paths);
    if (!paths) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < rl->file_count; i++)
        paths[i] = rl->files[i].path;
    int rc = ks_plugin_watch_start(paths, rl->file_count, &rl->watch, err, errlen);
    free(paths);
    return rc;
}

static int write_pid(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "%ld\n", (long)getpid()) < 0 || fclose(f) != 0) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int ks_reload_start(ks_engine *eng, const ks_host_api *api, const char *copy_dir,
                    ks_reload **out, char *err, size_t errlen)
{
    *out = NULL;
    ks_reload *rl = calloc(1, sizeof *rl);
    if (!rl) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    const ks_pipeline *p = eng->topo->pipeline;
    rl->eng = eng;
    rl->topo = eng->topo;
    rl->api = api;
    rl->workers = p->workers;
    rl->seen_hup = ks_signal_reload;
    pthread_mutex_init(&rl->lock, NULL);
    snprintf(rl->copy_dir, sizeof rl->copy_dir, "%s", copy_dir);
    ks_layout_pid_file(p->state_dir, p->application, rl->pid_path, sizeof rl->pid_path);
    char status_path[4200];
    ks_layout_status_file(p->state_dir, p->application, status_path, sizeof status_path);
    rl->file_count = rl->topo->plugin_count;
    rl->files = calloc(rl->file_count + 1, sizeof *rl->files);
    rl->changed = calloc(rl->file_count + 1, sizeof *rl->changed);
    rl->status = ks_status_new(status_path);
    rl->hup_results = json_object();
    ks_layout_good_builds_dir(p->state_dir, p->application, rl->good_dir, sizeof rl->good_dir);
    if (!rl->files || !rl->changed || !rl->status || !rl->hup_results) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < rl->file_count; i++)
        if (!(rl->files[i].path = strdup(rl->topo->plugins[i]->path))) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
    if (watch_files(rl, err, errlen) != 0 || write_pid(rl->pid_path, err, errlen) != 0)
        goto fail;
    ks_reload_roll_back_crashing_builds(rl);
    for (size_t i = 0; i < rl->file_count; i++)
        ks_rollback_kept_build(rl->good_dir, rl->topo->plugins[i]->desc->name,
                               rl->files[i].kept_build, sizeof rl->files[i].kept_build);
    ks_reload_status_processors(rl);
    ks_reload_status_write(rl, NULL, NULL, NULL, NULL);
    if (pthread_create(&rl->thread, NULL, reload_main, rl) != 0) {
        snprintf(err, errlen, "cannot start the reload thread: %s", strerror(errno));
        goto fail;
    }
    rl->running = 1;
    *out = rl;
    return 0;
fail:
    ks_reload_free(rl);
    return -1;
}

void ks_reload_note_commit(ks_reload *rl)
{
    if (rl)
        __atomic_add_fetch(&rl->commits, 1, __ATOMIC_RELEASE);
}

void ks_reload_note_crash(ks_reload *rl, const char *line)
{
    if (!rl)
        return;
    ks_status_set(rl->status, "crash", "previous_run", json_string(line));
    char err[512];
    if (ks_status_write(rl->status, err, sizeof err) != 0)
        ks_warn(WHERE, "%s", err);
}

void ks_reload_note_versions(ks_reload *rl, ks_task *task)
{
    if (!rl || !task->dbs)
        return;
    json_t *o = json_object();
    for (size_t i = 0; o && i < rl->topo->node_count; i++) {
        const ks_topo_node *n = &rl->topo->nodes[i];
        if (n->kind != KS_NODE_PROCESSOR || n->store_count == 0)
            continue;
        uint32_t v;
        json_object_set_new(o, n->name,
                            ks_store_version_get(task->dbs[n->stores[0]], &v) == 0
                                ? json_integer((json_int_t)v)
                                : json_null());
    }
    ks_store_read_end(task->env);
    ks_status_set(rl->status, "state_versions", task->where, o);
    char err[512];
    if (ks_status_write(rl->status, err, sizeof err) != 0)
        ks_warn(WHERE, "%s", err);
}

void ks_reload_forget_task(ks_reload *rl, const char *where)
{
    if (!rl)
        return;
    ks_status_set(rl->status, "state_versions", where, NULL);
    char err[512];
    if (ks_status_write(rl->status, err, sizeof err) != 0)
        ks_warn(WHERE, "%s", err);
}

void ks_reload_stop(ks_reload *rl)
{
    if (!rl || !rl->running)
        return;
    rl->stop = 1;
    pthread_join(rl->thread, NULL);
    rl->running = 0;
}

void ks_reload_free(ks_reload *rl)
{
    if (!rl)
        return;
    ks_reload_stop(rl);
    gen *g = rl->g;
    if (g) {
        /* the workers are gone: close whichever build the topology no
         * longer holds (the topology closes the other) */
        if (g->state == GEN_COMMITTED)
            ks_plugin_close(g->old_pl);
        else
            ks_plugin_close(g->new_pl);
        ks_reload_gen_free(rl, g);
    }
    ks_plugin_watch_free(rl->watch);
    free(rl->changed);
    if (rl->pid_path[0])
        unlink(rl->pid_path);
    ks_status_free(rl->status);
    json_decref(rl->hup_results);
    for (size_t i = 0; rl->files && i < rl->file_count; i++)
        free(rl->files[i].path);
    free(rl->files);
    pthread_mutex_destroy(&rl->lock);
    free(rl);
}
