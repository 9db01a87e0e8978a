/*
 * worker.h - a worker: one thread, one consumer-group member, one producer
 * (transactional under exactly-once), and the tasks of the partitions the
 * group assigned to it.
 */
#ifndef KS_WORKER_H
#define KS_WORKER_H

#include "runtime/engine.h"

/* Create worker `id` of `eng` and start its thread. 0 or -1 with err. */
int ks_worker_start(ks_engine *eng, int id, ks_worker **out, char *err,
                    size_t errlen);

/* Wait for the worker's thread to end (after ks_engine_stop) and free it. */
void ks_worker_join(ks_worker *w);

#endif /* KS_WORKER_H */
