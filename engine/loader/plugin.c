/*
 * plugin.c - loading plugin builds from private copies and checking them:
 * ks_plugin_open runs the steps of plugin_elf.c, plugin_copy.c,
 * plugin_trial.c and plugin_desc.c (plugin_internal.h) around dlopen;
 * lookups; finding a plugin's file.
 *
 * Owns: each ks_plugin, its dlopen handle and its private copy on disk.
 *
 * Invariants:
 *  - The bytes that are checked are the bytes that are dlopen'ed: the build
 *    is read once into memory (read(2), never mmap: a file truncated under
 *    an mmap raises SIGBUS), checked as ELF there, hashed, and written to a
 *    new file that only this process knows about.
 *  - Every copy has a name no loaded image has (glibc's dlopen returns the
 *    old image for a path, hard link or inode it already has loaded): it is
 *    moved into place with a rename that refuses to replace, and gets a
 *    "-N" suffix when the plain name is taken (the same build loaded twice).
 *  - Before dlopen the file is a complete ELF64 shared object for this host:
 *    headers, program header table, section header table, every loadable
 *    segment and every section with contents lie inside the file. A partly
 *    written .so can SIGBUS the host inside dlopen (glibc 2.36).
 *  - The plugin code run before the descriptor is checked is its ELF
 *    constructors (dlopen runs them) and its entry point; both run first in
 *    a trial child process (plugin_trial.c) when a trial helper is set, so
 *    a build that crashes there is refused instead of killing this process.
 *    Checks run in the order plugin.h states; the first failure is
 *    reported as one line naming the path and the field.
 *  - On every failure nothing stays loaded, copied or allocated.
 *
 * No process-wide state. Thread-safe as far as dlopen/dlerror are (dlerror
 * is per thread in glibc).
 */
#include "loader/plugin.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "loader/plugin_internal.h"

#ifndef KS_PLUGIN_DIR
#define KS_PLUGIN_DIR "/usr/local/lib/kstreams/plugins"
#endif

/* ------------------------------------------------------------------ */
/* The steps that run plugin code (here and in the trial child)        */
/* ------------------------------------------------------------------ */

int ks_loader_load_checked(const char *path, const char *copy,
                           const ks_host_api *api, void (*stage)(const char *),
                           void **handle_out, const ks_plugin_descriptor **out,
                           char *err, size_t errlen)
{
    *handle_out = NULL;
    *out = NULL;
    if (stage)
        stage("dlopen");
    dlerror(); /* clear a stale error */
    void *handle = dlopen(copy, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror();
        set_err(err, errlen, "%s: dlopen failed: %s", path,
                why ? why : "unknown error");
        return -1;
    }
    dlerror();
    void *sym = dlsym(handle, KS_PLUGIN_ENTRY_SYMBOL);
    if (!sym) {
        set_err(err, errlen, "%s: no entry symbol '%s' (is it exported? "
                "build with KS_EXPORT)", path, KS_PLUGIN_ENTRY_SYMBOL);
        dlclose(handle);
        return -1;
    }
    /* POSIX guarantees a data pointer from dlsym converts to a function
     * pointer; ISO C has no cast for it, memcpy is exact. */
    ks_plugin_entry_fn entry;
    _Static_assert(sizeof entry == sizeof sym, "function pointer size");
    memcpy(&entry, &sym, sizeof entry);
    if (stage)
        stage(KS_PLUGIN_ENTRY_SYMBOL);
    const ks_plugin_descriptor *d = entry(api);
    if (stage)
        stage("the descriptor checks");
    if (check_descriptor(path, d, err, errlen) != 0) {
        dlclose(handle);
        return -1;
    }
    *handle_out = handle;
    *out = d;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Public functions                                                    */
/* ------------------------------------------------------------------ */

int ks_plugin_open(const char *path, const char *copy_dir,
                   const ks_host_api *api, ks_plugin **out, char *err,
                   size_t errlen)
{
    unsigned char *buf = NULL;
    size_t len = 0;
    char *copy = NULL;
    void *handle = NULL;
    const ks_plugin_descriptor *d = NULL;
    ks_plugin *pl = NULL;

    if (out)
        *out = NULL;
    if (!path || !copy_dir || !api || !out) {
        set_err(err, errlen, "%s: ks_plugin_open: invalid argument",
                path ? path : "(null)");
        return -1;
    }
    if (read_build(path, &buf, &len, err, errlen) != 0)
        return -1;
    if (check_elf(path, buf, len, err, errlen) != 0)
        goto fail;
    if (write_copy(path, copy_dir, buf, len, &copy, err, errlen) != 0)
        goto fail;
    free(buf);
    buf = NULL;

    /* The trial child first: a build that crashes or hangs the dynamic
     * loader, its constructors or its entry point kills only the child. */
    if (trial_load(path, copy, err, errlen) != 0)
        goto fail;
    if (load_checked(path, copy, api, NULL, &handle, &d, err, errlen) != 0)
        goto fail;

    pl = calloc(1, sizeof *pl);
    if (!pl || !(pl->path = strdup(path))) {
        set_err(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    pl->copy_path = copy;
    pl->handle = handle;
    pl->desc = d;
    pl->loaded_at = time(NULL);
    pl->refs = 0;
    *out = pl;
    return 0;

fail:
    if (pl) {
        free(pl->path);
        free(pl);
    }
    if (handle)
        dlclose(handle);
    if (copy) {
        unlink(copy);
        free(copy);
    }
    free(buf);
    return -1;
}

void ks_plugin_close(ks_plugin *pl)
{
    if (!pl)
        return;
    if (pl->handle)
        dlclose(pl->handle);
    if (pl->copy_path)
        unlink(pl->copy_path);
    free(pl->copy_path);
    free(pl->path);
    free(pl);
}

const ks_processor_type *ks_plugin_processor(const ks_plugin *pl,
                                             const char *name)
{
    if (!pl || !pl->desc || !name)
        return NULL;
    for (size_t i = 0; i < pl->desc->processor_count; i++)
        if (strcmp(pl->desc->processors[i]->name, name) == 0)
            return pl->desc->processors[i];
    return NULL;
}

const ks_function *ks_plugin_function(const ks_plugin *pl, const char *name)
{
    if (!pl || !pl->desc || !name)
        return NULL;
    for (size_t i = 0; i < pl->desc->function_count; i++)
        if (strcmp(pl->desc->functions[i].name, name) == 0)
            return &pl->desc->functions[i];
    return NULL;
}

/* Write DIR/SUB/NAME.so into out when it is a regular file. */
static int try_candidate(const char *dir, const char *sub, const char *name,
                         char *out, size_t outlen)
{
    int n = snprintf(out, outlen, "%s%s%s%s.so", dir,
                     dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/", sub,
                     name);
    if (n < 0 || (size_t)n >= outlen)
        return -1; /* does not fit: not a usable candidate */
    struct stat st;
    if (stat(out, &st) != 0 || !S_ISREG(st.st_mode))
        return -1;
    return 0;
}

/* NAME.so in dir, then dir/.libs/NAME.so: a libtool build tree keeps the
 * real module in .libs/ (the .la next to it is a text file), so pointing
 * plugin_path or KSTREAMS_PLUGIN_PATH at a build directory works. */
static int try_dir(const char *dir, const char *name, char *out,
                   size_t outlen)
{
    if (!dir[0])
        return -1;
    if (try_candidate(dir, "", name, out, outlen) == 0)
        return 0;
    return try_candidate(dir, ".libs/", name, out, outlen);
}

int ks_plugin_find(const char *name, char *const *dirs, size_t ndirs,
                   char *out, size_t outlen)
{
    if (!name || !name[0] || !out || outlen == 0)
        return -1;
    size_t n = strlen(name);
    if (strchr(name, '/') || (n > 3 && strcmp(name + n - 3, ".so") == 0)) {
        if (n >= outlen)
            return -1;
        memcpy(out, name, n + 1);
        return 0;
    }
    for (size_t i = 0; i < ndirs; i++)
        if (dirs && dirs[i] && try_dir(dirs[i], name, out, outlen) == 0)
            return 0;

    const char *env = getenv("KSTREAMS_PLUGIN_PATH");
    if (env && env[0]) {
        char *copy = strdup(env);
        if (!copy)
            return -1;
        int found = 0;
        char *save = NULL;
        for (char *d = strtok_r(copy, ":", &save); d && !found;
             d = strtok_r(NULL, ":", &save))
            found = try_dir(d, name, out, outlen) == 0;
        free(copy);
        if (found)
            return 0;
    }
    /* The installed directory holds installed modules only: no .libs. */
    if (try_candidate(KS_PLUGIN_DIR, "", name, out, outlen) == 0)
        return 0;
    out[0] = '\0';
    return -1;
}
