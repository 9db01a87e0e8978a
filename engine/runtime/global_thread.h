/*
 * global_thread.h - the thread that keeps a process's global tables
 * (`global_tables:`, global_table.h) up to date, as Kafka Streams'
 * GlobalStreamThread: it restores every partition of every global table's
 * topic to its end (read_committed: the last stable offset) before the
 * workers start, then follows the topics for as long as the engine runs.
 * It reads with an assign-only consumer (no group membership, nothing
 * committed to Kafka): where it is lives in the store, with the values.
 */
#ifndef KS_GLOBAL_THREAD_H
#define KS_GLOBAL_THREAD_H

#include <stddef.h>

#include "runtime/engine.h"
#include "runtime/global_table.h"

typedef struct ks_global_thread ks_global_thread;

/*
 * Open the global store of eng's pipeline, restore it (blocking; logs
 * progress per table) and start following. 0 with *out and *store (owned
 * by *out; valid until ks_global_thread_stop), or -1 with err when the
 * store, the consumer or the restore failed (nothing left running). A
 * stop requested during the restore returns -1 with err "stopped".
 * With no global tables: 0 and both NULL.
 */
int ks_global_thread_start(ks_engine *eng, ks_global_thread **out, ks_global **store,
                           char *err, size_t errlen);

/* Stop following, join the thread, close the consumer and the store.
 * After the workers (they read the store). NULL is fine. */
void ks_global_thread_stop(ks_global_thread *t);

#endif /* KS_GLOBAL_THREAD_H */
