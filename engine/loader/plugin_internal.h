/*
 * plugin_internal.h - the steps of ks_plugin_open (plugin.c), one file
 * each, in the order they run:
 *
 *   plugin_elf.c    read the build into memory once, check it is a
 *                   complete ELF64 shared object for this host
 *   plugin_copy.c   write those bytes to a private copy with a name no
 *                   loaded image has
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

#endif
