/*
 * rollback.h - what automatic rollback needs to remember across restarts:
 * the crash history (which plugin build crashed when) and the good builds
 * (a copy of the last build of each plugin that committed a batch, and of
 * the one before it).
 *
 * The crash history is a text file (<state_dir>/<app>/crash-history), one
 * line per crash inside plugin code: "SECONDS<TAB>PLUGIN<TAB>BUILD", the
 * wall-clock time in seconds of the epoch. crash.c appends the lines from
 * its signal handler; this file reads and prunes them.
 *
 * The good builds live in a directory (<state_dir>/<app>/good-builds/):
 * PLUGIN.so with PLUGIN.id (its build id, one line), and PLUGIN.prev.so
 * with PLUGIN.prev.id, the good build before it. Two are kept because a
 * build that crashes on a later record may have committed batches before:
 * it is then the last good build, and the one before it is the way back.
 *
 * Every path and string argument is borrowed. No function keeps a
 * pointer after it returns.
 */
#ifndef KS_ROLLBACK_H
#define KS_ROLLBACK_H

#include <stddef.h>
#include <stdint.h>

/*
 * Crashes of build `build` of plugin `plugin` in the history file at
 * `history` no older than `within_ms` before `now_s` (seconds of the
 * epoch). 0 when the file does not exist or cannot be read.
 */
int ks_rollback_count_crashes(const char *history, const char *plugin, const char *build,
                              int64_t now_s, int64_t within_ms);

/*
 * Rewrite the history file without the lines older than `within_ms`
 * before `now_s` (it would otherwise grow with every crash forever).
 * Written through a temporary file and a rename. 0, or -1 with err.
 */
int ks_rollback_prune_history(const char *history, int64_t now_s, int64_t within_ms,
                              char *err, size_t errlen);

/*
 * The build id of the last good build of `plugin` kept in `dir`, in buf
 * (len bytes): 1 when one is kept, 0 when not.
 */
int ks_rollback_kept_build(const char *dir, const char *plugin, char *buf, size_t len);

/*
 * Keep the file `so_path` (the private copy build `build` of plugin
 * `plugin` was loaded from) as that plugin's last good build in `dir`
 * (created when missing). The good build kept before becomes the previous
 * one when its build id differs. 0, or -1 with err naming the file.
 */
int ks_rollback_keep(const char *dir, const char *plugin, const char *build,
                     const char *so_path, char *err, size_t errlen);

/*
 * The newest good build of `plugin` kept in `dir` whose build id is not
 * `not_build`: its file in path (plen bytes) and its build id in build
 * (blen bytes). 1 when there is one, 0 when not.
 */
int ks_rollback_find(const char *dir, const char *plugin, const char *not_build, char *path,
                     size_t plen, char *build, size_t blen);

#endif /* KS_ROLLBACK_H */
