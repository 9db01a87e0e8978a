/*
 * plugin_internal.h - the steps of ks_plugin_open (plugin.c), one file
 * each, in the order they run:
 *
 *   plugin_elf.c    read the build into memory once, check it is a
 *                   complete ELF64 shared object for this host
 *   plugin_copy.c   write those bytes to a private copy with a name no
 *                   loaded image has
 *   plugin_trial.c  trial-load that copy in a helper process (when one is
 *                   set): a crash or hang there refuses the build
 *   plugin.c        dlopen, the entry point (load_checked, also what the
 *                   trial child runs)
 *   plugin_desc.c   check the descriptor the entry point returned
 *
 * Each returns 0, or -1 with one line "PATH: what is wrong" in err and
 * nothing left allocated or on disk. Only loader/plugin*.c include this
 * header (plugin.h is the interface). The functions are defined with a
 * ks_loader_ prefix; the short names below are what plugin.c calls them.
 */
#ifndef KS_PLUGIN_INTERNAL_H
#define KS_PLUGIN_INTERNAL_H

#include <stddef.h>

#include "kstreams/kstreams.h"

#include "base/log.h"

/* snprintf into err (nothing when err is NULL or errlen 0): base/log.h. */
#define set_err(...) ks_errf(__VA_ARGS__)

/* Read the regular file `path` into a new buffer (*out, malloc'ed). */
int ks_loader_read_build(const char *path, unsigned char **out, size_t *outlen,
                         char *err, size_t errlen);
#define read_build(...) ks_loader_read_build(__VA_ARGS__)

/* Check that buf[0..len) is a complete ELF64 shared object for this host. */
int ks_loader_check_elf(const char *path, const unsigned char *buf, size_t len,
                        char *err, size_t errlen);
#define check_elf(...) ks_loader_check_elf(__VA_ARGS__)

/* Write buf to a new private copy in copy_dir (created if missing);
 * *out is its path, malloc'ed. */
int ks_loader_write_copy(const char *path, const char *copy_dir,
                         const unsigned char *buf, size_t len, char **out,
                         char *err, size_t errlen);
#define write_copy(...) ks_loader_write_copy(__VA_ARGS__)

/* Bounds on a descriptor's counts, checked before any table is read: a
 * count is all the loader knows of a table's length, so a wild one (an
 * uninitialised size_t, a struct of another ABI) would read past it. */
#define KS_PLUGIN_MAX_PROCESSORS 256
#define KS_PLUGIN_MAX_FUNCTIONS 1024
#define KS_PLUGIN_MAX_CONFIG 256

/* The checks of plugin.h, in its order, after the entry point returned d. */
int ks_loader_check_descriptor(const char *path, const ks_plugin_descriptor *d,
                               char *err, size_t errlen);
#define check_descriptor(...) ks_loader_check_descriptor(__VA_ARGS__)

/* Trial-load the private copy `copy` of `path` in a helper process
 * (plugin_trial.c); 0 when it loaded and passed the checks there, or when
 * no helper is set (ks_plugin_set_trial). */
int ks_loader_trial_load(const char *path, const char *copy, char *err,
                         size_t errlen);
#define trial_load(...) ks_loader_trial_load(__VA_ARGS__)

/* dlopen `copy` (RTLD_NOW|RTLD_LOCAL), find the entry point, call it with
 * `api`, check the descriptor (messages name `path`). `stage`, when not
 * NULL, is told each step before it runs ("dlopen", the entry symbol,
 * "the descriptor checks"). On success *handle_out is the dlopen handle
 * (the caller's to dlclose) and *out the descriptor inside the image; on
 * failure nothing stays loaded. */
int ks_loader_load_checked(const char *path, const char *copy,
                           const ks_host_api *api, void (*stage)(const char *),
                           void **handle_out, const ks_plugin_descriptor **out,
                           char *err, size_t errlen);
#define load_checked(...) ks_loader_load_checked(__VA_ARGS__)

#endif
