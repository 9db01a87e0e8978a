/*
 * engine.c - run a topology: prepare topics, start the workers, wait for a
 * stop request, join them. The signal flag is the engine's one global.
 */
#include "runtime/engine.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "kafka/kafka.h"
#include "kafka/topics.h"
#include "runtime/topic_plan.h"
#include "base/log.h"
#include "outbox/outbox_service.h"
#include "http/metrics.h"
#include "runtime/crash.h"
#include "runtime/global_thread.h"
#include "runtime/query_server.h"
#include "runtime/query_tasks.h"
#include "runtime/reload.h"
#include "runtime/standby.h"
#include "runtime/worker.h"
#include "state/layout.h"

volatile sig_atomic_t ks_signal_stop = 0;
volatile sig_atomic_t ks_signal_reload = 0;

static void on_hup(int sig)
{
    (void)sig;
    ks_signal_reload++;
}

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
    sa.sa_handler = on_hup;
    sigaction(SIGHUP, &sa, NULL);
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

void ks_engine_fail(ks_engine *eng, const char *where, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ks_error(where, "%s", msg);
    ks_engine_stop(eng, 1, msg);
}

/* How long a start waits for a broker that does not answer: a single-node
 * Kafka 4.1.1 took 35-58 s to restart on a loaded two-CPU machine. */
#define BROKER_WAIT_MS 180000

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

    if (ks_signal_stop) {
        ks_info("engine", "stop requested before the start: nothing started");
        pthread_mutex_destroy(&eng.lock);
        return 0;
    }
    char err[2048];
    /* the outbox needs no Kafka: it starts first and accepts events while
     * the topics below wait for the broker */
    ks_outbox_service *outbox = NULL;
    /* metrics first: the outbox's backlog matters most while Kafka is down */
    eng.metrics = ks_metrics_new();
    if (p->metrics_listen && ks_metrics_serve(eng.metrics, p->metrics_listen, p->metrics_token,
                                              &p->metrics_limits, err, sizeof err) != 0)
        ks_warn("engine", "%s: metrics are off", err);
    if (p->outbox && ks_outbox_service_start(p, eng.metrics, &outbox, err, sizeof err) != 0) {
        ks_error("engine", "%s", err);
        ks_metrics_free(eng.metrics);
        pthread_mutex_destroy(&eng.lock);
        return 1;
    }
    /* a broker that does not answer yet (restarting, no controller yet) is
     * waited for, as a Kafka Streams application retries its topic set-up;
     * with an outbox, whatever the error: it accepts events meanwhile */
    int64_t broker_deadline = ks_mono_ms() + BROKER_WAIT_MS;
    int prepared;
    while ((prepared = ks_topic_plan_prepare(topo, err, sizeof err)) != 0) {
        int64_t left = broker_deadline - ks_mono_ms();
        int waiting = outbox || (prepared == KS_TOPIC_UNAVAILABLE && left > 0);
        /* a stop while the engine waits for Kafka is a clean stop: what the
         * outbox accepted stays in its store for the next start */
        int clean_stop = waiting && ks_engine_stopping(&eng) && eng.exit_code == 0;
        if (!waiting || ks_engine_stopping(&eng)) {
            if (clean_stop)
                ks_info("engine", "stopped while waiting for Kafka (%s)%s", err,
                        outbox ? "; the outbox keeps what it accepted" : "");
            else if (prepared == KS_TOPIC_UNAVAILABLE)
                ks_error("engine", "%s (gave up after waiting %d s for the broker)", err,
                         BROKER_WAIT_MS / 1000);
            else
                ks_error("engine", "%s", err);
            ks_outbox_service_stop(outbox);
            ks_metrics_free(eng.metrics);
            pthread_mutex_destroy(&eng.lock);
            return clean_stop ? 0 : 1;
        }
        if (outbox)
            ks_warn("engine", "%s; the outbox keeps accepting events, retrying in 2 s", err);
        else
            ks_warn("engine", "%s: the broker is not answering yet; trying again in 2 s (for "
                              "%lld s more)",
                    err, (long long)(left / 1000));
        for (int i = 0; i < 40 && !ks_engine_stopping(&eng); i++)
            usleep(50 * 1000);
    }
    ks_info("engine", "%s: %d tasks, %d worker%s, %s, instance %s", p->application,
            (int)topo->partitions, p->workers, p->workers == 1 ? "" : "s",
            p->guarantee == KS_GUARANTEE_EXACTLY_ONCE ? "exactly-once" : "at-least-once",
            eng.instance);
    /* hot deploy: started before the workers, which call into it; it rolls
     * back a build that crashed too often */
    char copy_dir[4096];
    ks_layout_plugins_dir(p->state_dir, p->application, copy_dir, sizeof copy_dir);
    if (ks_reload_start(&eng, ks_host_api_table(), copy_dir, &eng.reload, err,
                        sizeof err) != 0)
        ks_warn("engine", "hot deploy is off: %s", err);
    for (size_t i = 0; i < topo->plugin_count; i++) {
        const ks_plugin_descriptor *d = topo->plugins[i]->desc;
        ks_metrics_plugin_info(eng.metrics, d->name, d->version, d->build_id);
    }
    /* a fatal signal in processor code is reported (log and crash file);
     * the one a previous run left is reported now */
    char crash_path[4200], history[4200], last[2048];
    ks_layout_crash_file(p->state_dir, p->application, crash_path, sizeof crash_path);
    ks_layout_crash_history_file(p->state_dir, p->application, history, sizeof history);
    if (ks_crash_take_previous(crash_path, last, sizeof last)) {
        ks_warn("engine", "the previous run died: %s (its report: %s.last)", last, crash_path);
        ks_reload_note_crash(eng.reload, last);
    }
    if (ks_crash_install(crash_path, history, err, sizeof err) != 0)
        ks_warn("engine", "crash reports are off: %s", err);
    /* global tables are complete before any task processes (restored to
     * their end), then followed by a thread of their own */
    ks_global_thread *globals = NULL;
    err[0] = '\0';
    if (ks_global_thread_start(&eng, &globals, &eng.global, err, sizeof err) != 0) {
        if (ks_engine_stopping(&eng)) { /* a stop during the restore: clean */
            ks_info("engine", "stopped while restoring the global tables");
        } else {
            ks_engine_stop(&eng, 1, err);
            ks_error("engine", "%s", err);
        }
    }
    /* standbys before the workers: a worker's first task may be one */
    if (!ks_engine_stopping(&eng) && ks_standby_start(&eng, &eng.standby, err, sizeof err) != 0)
        ks_warn("engine", "standby replicas are off: %s", err);
    /* queries: the registry before the workers, which report their tasks */
    ks_query_server *queries = NULL;
    if (p->query_listen && !ks_engine_stopping(&eng)) {
        eng.qtasks = ks_query_tasks_new(topo->partitions);
        if (!eng.qtasks || ks_query_server_start(&eng, &queries, err, sizeof err) != 0)
            ks_warn("engine", "%s: remote queries are off",
                    eng.qtasks ? err : "out of memory");
    }
    eng.workers = ks_engine_stopping(&eng) ? NULL : calloc((size_t)p->workers,
                                                           sizeof *eng.workers);
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
    ks_reload_stop(eng.reload);
    for (int i = 0; i < eng.worker_count; i++)
        ks_worker_join(eng.workers[i]);
    free(eng.workers);
    ks_query_server_stop(queries); /* after the workers: none reports a task any more */
    ks_query_tasks_free(eng.qtasks);
    ks_standby_stop(eng.standby); /* after the workers: they may wait for it */
    ks_global_thread_stop(globals); /* after the workers: they read its store */
    ks_reload_free(eng.reload); /* after the workers: closes retired builds */
    ks_outbox_service_stop(outbox);
    ks_metrics_free(eng.metrics); /* after the outbox: its dispatcher writes there */
    int rc = eng.exit_code;
    if (rc)
        ks_error("engine", "stopped after a failure: %s", eng.failure);
    else
        ks_info("engine", "stopped cleanly");
    pthread_mutex_destroy(&eng.lock);
    return rc;
}
