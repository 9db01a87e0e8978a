/*
 * engine.h - one running pipeline: the topology, its workers, and the stop
 * request that ends them. No global state besides the signal flag, so a
 * test can run two engines in one process.
 */
#ifndef KS_ENGINE_H
#define KS_ENGINE_H

#include <pthread.h>
#include <signal.h>

#include "runtime/topology.h"

typedef struct ks_worker ks_worker;

typedef struct ks_engine {
    ks_topology *topo;        /* borrowed */
    char instance[128];       /* names this process's transactional ids */
    volatile sig_atomic_t stop;
    int exit_code;            /* 0 unless a worker failed */
    char failure[1024];       /* first failure, for the exit message */
    pthread_mutex_t lock;
    ks_worker **workers;
    int worker_count;
    struct ks_reload *reload; /* hot deploy (reload.h); NULL when off */
    struct ks_metrics *metrics; /* metrics.h; always present */
    struct ks_global *global;   /* global tables' store (global_table.h) or NULL */
    struct ks_standby *standby; /* standby replicas (standby.h) or NULL */
    struct ks_query_tasks *qtasks; /* what the query server reads (query_tasks.h);
                                      NULL when `query:` is off */
} ks_engine;

/* Set by SIGINT/SIGTERM handlers (see ks_engine_install_signals). */
extern volatile sig_atomic_t ks_signal_stop;

/* Bumped by SIGHUP: the reload thread (reload.c) reloads every plugin. */
extern volatile sig_atomic_t ks_signal_reload;

/* SIGINT and SIGTERM request a clean stop; SIGHUP asks for a hot deploy
 * (reload.h); SIGPIPE is ignored. */
void ks_engine_install_signals(void);

/*
 * Run `topo` until a stop is requested (signal or ks_engine_stop) or a
 * worker fails. `instance` names this process among others of the same
 * application (NULL: derived from the host name and the state directory).
 * Creates missing topics as the pipeline allows. Returns the exit code:
 * 0 after a clean stop, 1 after a failure (logged, and in eng->failure).
 */
int ks_engine_run(ks_topology *topo, const char *instance);

/* Ask every worker to finish its batch and stop. `why` NULL for a normal
 * stop, else the failure (only the first is kept). Any thread. */
void ks_engine_stop(ks_engine *eng, int exit_code, const char *why);

/* An error no replay can mend, found by `where` (a worker's name): log it
 * as an error and stop the engine with exit code 1 and that message (the
 * first failure is the one kept). Any thread. */
void ks_engine_fail(ks_engine *eng, const char *where, const char *fmt, ...)
    KS_PRINTF(3, 4);

/* Non-zero once a stop was requested. */
int ks_engine_stopping(const ks_engine *eng);

#endif /* KS_ENGINE_H */
