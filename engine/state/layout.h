/*
 * layout.h - the one owner of the state directory's layout. Every path
 * under `state_dir` is built here:
 *
 *   <state_dir>/<application>/             the application's directory
 *       task-<P>/                          a task's LMDB environment
 *       plugins/                           private copies of plugin builds
 *       outbox/                            the LMDB outbox
 *       status.json                        `kstreams status`
 *       kstreams.pid                       the running engine's pid
 *       crash.txt                          the last crash report
 *       crash-history                      one line per plugin crash (rollback)
 *       good-builds/                       copies of builds that committed a batch
 *
 * Each function writes a NUL-terminated path into the caller's buffer
 * `out` of `len` bytes; `state_dir` and `application` are borrowed. Returns
 * 0, or -1 when the path does not fit (out then holds a truncated path).
 */
#ifndef KS_STATE_LAYOUT_H
#define KS_STATE_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

int ks_layout_app_dir(const char *state_dir, const char *application, char *out, size_t len);
int ks_layout_task_dir(const char *state_dir, const char *application, int32_t task, char *out,
                       size_t len);
int ks_layout_plugins_dir(const char *state_dir, const char *application, char *out, size_t len);
int ks_layout_outbox_dir(const char *state_dir, const char *application, char *out, size_t len);
int ks_layout_status_file(const char *state_dir, const char *application, char *out, size_t len);
int ks_layout_pid_file(const char *state_dir, const char *application, char *out, size_t len);
int ks_layout_crash_file(const char *state_dir, const char *application, char *out, size_t len);
int ks_layout_crash_history_file(const char *state_dir, const char *application, char *out,
                                 size_t len);
int ks_layout_good_builds_dir(const char *state_dir, const char *application, char *out,
                              size_t len);

#endif /* KS_STATE_LAYOUT_H */
