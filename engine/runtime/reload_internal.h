/*
 * reload_internal.h - what the files of hot deploy share (reload.c: the
 * thread and the generations; reload_status.c: the status document;
 * reload_rollback.c: good builds kept and the rollback at start). Nothing
 * outside runtime/reload*.c includes it. Threads as reload.c says: all of
 * it runs on the reload thread (or in ks_reload_start before it exists).
 */
#ifndef KS_RELOAD_INTERNAL_H
#define KS_RELOAD_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "runtime/plugin_watch.h"
#include "runtime/reload.h"
#include "runtime/status.h"

#define WHERE "reload"

enum gen_state { GEN_PREPARING, GEN_COMMITTED, GEN_FAILED };

/* per worker progress in a generation */
enum { W_IDLE = 0, W_BUSY, W_READY, W_FAILED, W_DISCARDED, W_SWAPPED };

typedef struct gen {
    enum gen_state state;
    size_t slot;           /* index in topo->plugins */
    ks_plugin *old_pl, *new_pl;
    ks_node_build *builds; /* per node; ptype NULL: node not affected */
    ks_topo_fn **new_fns;  /* per node; owned until commit */
    ks_topo_fn **old_fns;  /* per node; owned after commit */
    int *worker;           /* W_* per worker */
    int64_t started_ms;
    char error[1024];
} gen;

typedef struct watched {
    char *path;    /* as in the topology; owned (builds come and go) */
    int requested;
    char last_error[1024]; /* of the last refused build; "" after a swap */
    /* `kstreams reload`: a SIGHUP's request of this file not started yet,
     * or started and not finished */
    int hup_pending, hup_inflight;
    /* automatic rollback: the build kept as the last good one, and the
     * commit count when the running build became the running one */
    char kept_build[256];
    long commits_at_load;
} watched;

struct ks_reload {
    ks_engine *eng;
    ks_topology *topo;
    const ks_host_api *api;
    char copy_dir[4096];
    char pid_path[4096];
    int workers;
    ks_status *status;
    ks_plugin_watch *watch;
    int *changed;   /* per file: ks_plugin_watch_poll's answer */
    watched *files; /* one per topo->plugins entry */
    size_t file_count;
    sig_atomic_t seen_hup;
    pthread_t thread;
    int running;
    volatile int stop;
    pthread_mutex_t lock;
    gen *g;
    long attempts, swapped, refused;
    long hup_seq;      /* SIGHUPs seen (coalesced ones count once) */
    json_t *hup_results; /* file -> outcome of the current SIGHUP's reloads */
    long commits;      /* batches with records committed; atomic */
    char good_dir[4096];
};

/* Generations (reload.c). */
/* Free g (NULL is fine) and whatever of it was not handed over. */
void ks_reload_gen_free(ks_reload *rl, gen *g);
/* A new generation for rl's workers, or NULL when out of memory. */
gen *ks_reload_gen_new(ks_reload *rl);
/* Check g->new_pl against the topology (and, unless `rollback`, against
 * the state versions in use). 0, or -1 with err. */
int ks_reload_validate_build(ks_reload *rl, gen *g, int rollback, char *err, size_t errlen);
/* Point every node of g at g->new_pl's processor types and functions. */
void ks_reload_bind_build(ks_reload *rl, gen *g);

/* The status document (reload_status.c). */
/* A JSON string of t as ISO 8601 UTC (new reference). */
json_t *ks_reload_iso_time(time_t t);
/* "processors": per node, the build it runs and its plugin's last error. */
void ks_reload_status_processors(ks_reload *rl);
/* Record an outcome for file f while a SIGHUP waits for it. */
void ks_reload_hup_note(ks_reload *rl, watched *f, const char *result, const char *build,
                        const char *error);
/* The "reload" counters (and, when file is not NULL, the last outcome),
 * then write status.json (a failure is logged). */
void ks_reload_status_write(ks_reload *rl, const char *file, const char *result,
                            const char *build, const char *error);

/* Automatic rollback (reload_rollback.c). */
/* Keep each running build that committed a batch since it was loaded. */
void ks_reload_keep_good_builds(ks_reload *rl);
/* At start: roll back every build that crashed too often (rollback:). */
void ks_reload_roll_back_crashing_builds(ks_reload *rl);

#endif /* KS_RELOAD_INTERNAL_H */
