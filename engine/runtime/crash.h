/*
 * crash.h - crash reports for processor code. A fatal signal (SIGSEGV,
 * SIGBUS, SIGILL, SIGFPE, SIGABRT) is reported before the process dies:
 * one line on stderr naming what the thread was running (plugin, build,
 * file, node, task, the call and its record's topic/partition/offset, or
 * "outside plugin code"), then a backtrace; the same in a crash file that
 * the next start reports. The signal is then delivered with its default
 * action (the process dies of it, as without the handler).
 *
 * What runs is told by a per-thread scope that the task sets around every
 * plugin call (ks_crash_enter / ks_crash_leave): a few stores per call.
 * The handler only formats into a stack buffer and calls write/open/close
 * and backtrace (loaded at install, so that it does not allocate later).
 */
#ifndef KS_CRASH_H
#define KS_CRASH_H

#include <stddef.h>
#include <stdint.h>

/* What a thread runs; every pointer is borrowed and must stay valid until
 * the matching ks_crash_leave. */
typedef struct ks_crash_scope {
    const char *call;   /* "init", "process", "punctuate", "migrate", "close" */
    const char *node;
    const char *plugin; /* plugin name */
    const char *build;  /* build id */
    const char *path;   /* the file the build was loaded from */
    int32_t task;
    const char *topic;  /* the record's, NULL when there is none */
    int32_t partition;
    int64_t offset;
    const struct ks_crash_scope *outer; /* the scope this one interrupts */
} ks_crash_scope;

/* Make `s` the calling thread's scope (s->outer is set to the previous). */
void ks_crash_enter(ks_crash_scope *s);
/* Back to s->outer. */
void ks_crash_leave(const ks_crash_scope *s);

/* Install the handlers; reports also go to the file `crash_path` (copied;
 * truncated at each crash), and a crash inside plugin code appends one
 * line "SECONDS<TAB>PLUGIN<TAB>BUILD" to the file `history` (copied; NULL:
 * none), which rollback.h reads at the next start. 0, or -1 with err.
 * Once per process. */
int ks_crash_install(const char *crash_path, const char *history, char *err, size_t errlen);

/* The first line of the crash file a previous run left at `crash_path`,
 * in buf, and the file renamed to "<crash_path>.last" (the next crash of
 * this run writes a new one): 1 when there was one, 0 when not. */
int ks_crash_take_previous(const char *crash_path, char *buf, size_t len);

#endif /* KS_CRASH_H */
