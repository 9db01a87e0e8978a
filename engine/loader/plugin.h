/*
 * plugin.h - loading plugin builds and checking their descriptors.
 *
 * A build is loaded from a private copy (dlopen of a path that is already
 * loaded returns the old image, glibc 2.36), with RTLD_NOW|RTLD_LOCAL.
 * Checks run in a fixed order: file is a complete ELF shared object (before
 * any plugin code runs), the trial load in a helper process when one is set
 * (ks_plugin_set_trial), then in this process entry symbol present, magic,
 * struct size, ABI major equal, ABI minor not newer than the host, then
 * identity (name syntax, processor and function tables well formed). The
 * plugin's ELF constructors and entry point run before the descriptor
 * checks (dlopen runs constructors): in the helper first, then here. Each
 * refusal is one line naming the path and the field that differs.
 */
#ifndef KS_PLUGIN_H
#define KS_PLUGIN_H

#include <stddef.h>
#include <time.h>

#include "kstreams/kstreams.h"

typedef struct ks_plugin {
    char *path;        /* the path it was loaded from (as given)        */
    char *copy_path;   /* the private copy actually dlopen'ed           */
    void *handle;      /* dlopen handle                                 */
    const ks_plugin_descriptor *desc; /* inside the image               */
    time_t loaded_at;
    unsigned refs;     /* for hot deploy: instances still using it      */
} ks_plugin;

/*
 * Load the build at `path`. `copy_dir` is a directory for private copies
 * (created if missing). `api` is handed to the entry point and must outlive
 * the plugin. On success returns 0 and *out owns the loaded plugin. On
 * failure returns -1, nothing stays loaded or copied, and `err` holds one
 * line: "PATH: what is wrong (expected X, found Y)".
 */
int ks_plugin_open(const char *path, const char *copy_dir,
                   const ks_host_api *api, ks_plugin **out, char *err,
                   size_t errlen);

/* The hidden command of a trial helper: `EXE __plugin-trial PATH COPY`. */
#define KS_PLUGIN_TRIAL_COMMAND "__plugin-trial"
/* How long a trial load may take before the helper is killed, by default. */
#define KS_PLUGIN_TRIAL_TIMEOUT_MS 10000

/*
 * Make ks_plugin_open trial-load every build before it dlopens it: the
 * private copy is loaded, its entry point called and its descriptor
 * checked in a new process running `exe` (posix_spawn; the program must
 * hand `exe KS_PLUGIN_TRIAL_COMMAND PATH COPY` to ks_plugin_trial_main
 * first thing in main). A helper killed by a signal, exiting without a
 * verdict or running past `timeout_ms` refuses the build. `exe` is
 * borrowed and must outlive every load ("/proc/self/exe": the running
 * binary); NULL turns the trial off (the default). Process-wide: call
 * before any thread loads a plugin.
 */
void ks_plugin_set_trial(const char *exe, int timeout_ms);

/*
 * The helper's side: argv is `PROG KS_PLUGIN_TRIAL_COMMAND PATH COPY`.
 * Loads COPY as ks_plugin_open would (entry point called with `api`,
 * borrowed), writes the steps and the verdict to file descriptor 3 and
 * ends the process with _exit: 0 when a verdict was written, 64 on a
 * wrong argv. Does not return.
 */
_Noreturn void ks_plugin_trial_main(int argc, char **argv,
                                    const ks_host_api *api);

/* Set SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT to their default
 * action (the trial helper does it before loading, so that a crash ends it
 * by that signal even when a sanitizer installed handlers). */
void ks_loader_default_crash_signals(void);

/* Remove the private copies in `copy_dir` (borrowed) that processes left
 * when they died without closing their plugins (kill -9): those whose pid
 * (part of the name) no longer runs. Returns how many were removed; a
 * missing directory is 0. Copies of live processes stay. */
int ks_plugin_copies_prune(const char *copy_dir);

/* dlclose the image, remove the private copy, free. NULL is fine. The
 * caller guarantees that no thread can still be inside the image. */
void ks_plugin_close(ks_plugin *pl);

/* Lookups in a loaded plugin's descriptor; NULL when absent. */
const ks_processor_type *ks_plugin_processor(const ks_plugin *pl,
                                             const char *name);
const ks_function *ks_plugin_function(const ks_plugin *pl, const char *name);

/*
 * Find the file for a plugin named `name` ("count", "page_views"): the
 * first of `dirs` holding NAME.so, then $KSTREAMS_PLUGIN_PATH (':'
 * separated), then the installed plugin directory. A `name` containing a
 * '/' or ending in ".so" is a path and returned as is. On success writes
 * the path into `out` and returns 0; -1 when not found.
 */
int ks_plugin_find(const char *name, char *const *dirs, size_t ndirs,
                   char *out, size_t outlen);

#endif /* KS_PLUGIN_H */
