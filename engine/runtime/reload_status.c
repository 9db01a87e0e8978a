/*
 * reload_status.c - what hot deploy writes into status.json: the build
 * each node runs, the reload counters, the last outcome and what the last
 * SIGHUP did to each file (reload_internal.h).
 */
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "runtime/reload_internal.h"

json_t *ks_reload_iso_time(time_t t)
{
    char buf[64];
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_string(buf);
}

static watched *file_of(ks_reload *rl, const ks_plugin *pl)
{
    for (size_t i = 0; i < rl->file_count; i++)
        if (rl->topo->plugins[i] == pl)
            return &rl->files[i];
    return NULL;
}

/* "processors": per node, the build it runs and its plugin's last error. */
void ks_reload_status_processors(ks_reload *rl)
{
    for (size_t i = 0; i < rl->topo->node_count; i++) {
        const ks_topo_node *n = &rl->topo->nodes[i];
        if (n->kind != KS_NODE_PROCESSOR)
            continue;
        const ks_plugin *pl = n->plugin;
        const watched *w = file_of(rl, pl);
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:I}", "type", n->cfg->type,
                              "plugin", pl->desc->name, "version", pl->desc->version,
                              "build_id", pl->desc->build_id, "path", pl->path, "copy",
                              pl->copy_path, "loaded_at", ks_reload_iso_time(pl->loaded_at),
                              "state_version", (json_int_t)n->ptype->state_version);
        if (o)
            json_object_set_new(o, "last_reload_error",
                                w && w->last_error[0] ? json_string(w->last_error)
                                                      : json_null());
        ks_status_set(rl->status, "processors", n->name, o);
    }
}

/* Is any file's SIGHUP request still to be answered? */
static int hup_open(const ks_reload *rl)
{
    for (size_t i = 0; i < rl->file_count; i++)
        if (rl->files[i].hup_pending || rl->files[i].hup_inflight)
            return 1;
    return 0;
}

/* "reload": {"hup": {"seq", "done", "results": {FILE: {result, build_id,
 * error}}}}: what the last SIGHUP did to each file, which `kstreams
 * reload` reports (reload_client.c). */
static void status_hup(ks_reload *rl)
{
    if (!rl->hup_seq)
        return;
    json_t *h = json_pack("{s:I, s:b, s:O}", "seq", (json_int_t)rl->hup_seq, "done",
                          !hup_open(rl), "results", rl->hup_results);
    ks_status_set(rl->status, "reload", "hup", h);
}

/* An outcome for file f while a SIGHUP waits for it. A swap or refusal
 * that finished after the signal is not hidden by a later "unchanged"
 * (the file watcher's queued reload of the same build, or the SIGHUP's
 * own reload of a build a watched-file reload just swapped in). */
void ks_reload_hup_note(ks_reload *rl, watched *f, const char *result, const char *build,
                     const char *error)
{
    if (!f->hup_pending && !f->hup_inflight)
        return;
    f->hup_inflight = 0;
    const json_t *had = json_object_get(rl->hup_results, f->path);
    const char *was = json_string_value(json_object_get(had, "result"));
    if (was && strcmp(result, "unchanged") == 0)
        return;
    json_t *o = json_pack("{s:s}", "result", result);
    if (o && build)
        json_object_set_new(o, "build_id", json_string(build));
    if (o && error)
        json_object_set_new(o, "error", json_string(error));
    json_object_set_new(rl->hup_results, f->path, o);
}

void ks_reload_status_write(ks_reload *rl, const char *file, const char *result,
                          const char *build, const char *error)
{
    ks_status_set(rl->status, "reload", "attempts", json_integer(rl->attempts));
    ks_status_set(rl->status, "reload", "swapped", json_integer(rl->swapped));
    ks_status_set(rl->status, "reload", "refused", json_integer(rl->refused));
    ks_status_set(rl->status, "reload", "in_progress", json_boolean(rl->g != NULL));
    status_hup(rl);
    if (file) {
        json_t *last = json_pack("{s:s, s:s, s:o}", "file", file, "result", result, "at",
                                 ks_reload_iso_time(time(NULL)));
        if (build)
            json_object_set_new(last, "build_id", json_string(build));
        if (error)
            json_object_set_new(last, "error", json_string(error));
        ks_status_set(rl->status, "reload", "last", last);
    }
    char err[512];
    if (ks_status_write(rl->status, err, sizeof err) != 0)
        ks_warn(WHERE, "%s", err);
}

