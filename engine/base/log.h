/*
 * log.h - the engine's log: one line per event, to stderr.
 *
 * A line is "LEVEL [where] message", e.g.
 *   2026-12-02T10:00:00.123Z INFO [worker-0 task-3 clean] restored 10 records
 * With KS_LOG_JSON set (or ks_log_set_json(1)) each line is a JSON object.
 * Thread-safe: each line is written with one write(2).
 */
#ifndef KS_LOG_H
#define KS_LOG_H

#include "kstreams/kstreams.h"

/* Lines above `level` are dropped. Default INFO; env KS_LOG_LEVEL
 * (error|warn|info|debug) overrides at first use. */
void ks_log_set_level(ks_log_level level);
ks_log_level ks_log_get_level(void);
void ks_log_set_json(int on);

/* Log a line. `where` names the subject (worker, task, node); may be NULL. */
void ks_log(ks_log_level level, const char *where, const char *fmt, ...)
    KS_PRINTF(3, 4);

/* Format a message into the caller's error buffer err[errlen] (the
 * `char *err, size_t errlen` pair of most engine functions); NULL or 0
 * writes nothing. Logs nothing. */
void ks_errf(char *err, size_t errlen, const char *fmt, ...) KS_PRINTF(3, 4);

/* Parse "error|warn|info|debug"; -1 when unknown. */
int ks_log_level_parse(const char *text);

#define ks_error(where, ...) ks_log(KS_LOG_ERROR, where, __VA_ARGS__)
#define ks_warn(where, ...) ks_log(KS_LOG_WARN, where, __VA_ARGS__)
#define ks_info(where, ...) ks_log(KS_LOG_INFO, where, __VA_ARGS__)
#define ks_debug(where, ...) ks_log(KS_LOG_DEBUG, where, __VA_ARGS__)

#endif /* KS_LOG_H */
