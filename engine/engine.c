/*
 * engine.c - run a topology: prepare topics, start the workers, wait for a
 * stop request, join them. The signal flag is the engine's one global.
 */
#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kafka.h"
#include "log.h"
#include "worker.h"

volatile sig_atomic_t ks_signal_stop = 0;

static void on_signal(int sig)
{
    (void)sig;
    ks_signal_stop = 1;
}

void ks_engine_install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

void ks_engine_stop(ks_engine *eng, int exit_code, const char *why)
{
    pthread_mutex_lock(&eng->lock);
    if (exit_code && !eng->exit_code) {
        eng->exit_code = exit_code;
        snprintf(eng->failure, sizeof eng->failure, "%s", why ? why : "failed");
    }
    eng->stop = 1;
    pthread_mutex_unlock(&eng->lock);
}

int ks_engine_stopping(const ks_engine *eng)
{
    return eng->stop || ks_signal_stop;
}

/* Default instance name: host name plus a hash of the absolute state dir, so
 * that a restarted process reuses its transactional ids (it then aborts its
 * predecessor's open transaction at once) while two processes with
 * different state directories never share one. */
static void default_instance(const ks_pipeline *p, char *buf, size_t len)
{
    char host[64] = "host", dir[4096];
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    const char *d = realpath(p->state_dir, dir) ? dir : p->state_dir;
    uint64_t h = 1469598103934665603ull;
    for (const char *c = d; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ull;
    snprintf(buf, len, "%s-%08llx", host, (unsigned long long)(h & 0xffffffffu));
}

int ks_engine_run(ks_topology *topo, const char *instance)
{
    ks_engine eng;
    memset(&eng, 0, sizeof eng);
    pthread_mutex_init(&eng.lock, NULL);
    eng.topo = topo;
    const ks_pipeline *p = topo->pipeline;
    if (instance)
        snprintf(eng.instance, sizeof eng.instance, "%s", instance);
    else
        default_instance(p, eng.instance, sizeof eng.instance);

    char err[2048];
    if (ks_kafka_prepare_topics(topo, err, sizeof err) != 0) {
        ks_error("engine", "%s", err);
        pthread_mutex_destroy(&eng.lock);
        return 1;
    }
    ks_info("engine", "%s: %d tasks, %d worker%s, %s, instance %s", p->application,
            (int)topo->partitions, p->workers, p->workers == 1 ? "" : "s",
            p->guarantee == KS_GUARANTEE_EXACTLY_ONCE ? "exactly-once" : "at-least-once",
            eng.instance);
    eng.workers = calloc((size_t)p->workers, sizeof *eng.workers);
    for (int i = 0; eng.workers && i < p->workers; i++) {
        if (ks_worker_start(&eng, i, &eng.workers[i], err, sizeof err) != 0) {
            ks_engine_stop(&eng, 1, err);
            ks_error("engine", "%s", err);
            break;
        }
        eng.worker_count++;
    }
    while (!ks_engine_stopping(&eng))
        usleep(50 * 1000);
    if (ks_signal_stop)
        ks_info("engine", "stop requested: finishing batches");
    eng.stop = 1;
    for (int i = 0; i < eng.worker_count; i++)
        ks_worker_join(eng.workers[i]);
    free(eng.workers);
    int rc = eng.exit_code;
    if (rc)
        ks_error("engine", "stopped after a failure: %s", eng.failure);
    else
        ks_info("engine", "stopped cleanly");
    pthread_mutex_destroy(&eng.lock);
    return rc;
}
