/*
 * status.h - the status file of a running engine:
 * <state_dir>/<application>/status.json, rewritten whenever something it
 * shows changes, read by `kstreams status FILE`.
 *
 * The document is one JSON object of sections ("processors", "reload",
 * and whatever other modules add); each section is an object of keys. A
 * module owns its section: it sets keys and asks for a write. Writes are
 * atomic (temp file + rename), so a reader never sees half a document.
 *
 * Thread-safe: every function may be called from any thread.
 */
#ifndef KS_STATUS_H
#define KS_STATUS_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

typedef struct ks_status ks_status;

/* A status document to be written at `path` (copied). NULL when out of
 * memory. Nothing is written until ks_status_write. */
ks_status *ks_status_new(const char *path);

/* Remove the file and free. NULL is fine. */
void ks_status_free(ks_status *st);

/* Set section.key to `value`, taking the caller's reference (also on
 * failure). A NULL value removes the key. */
void ks_status_set(ks_status *st, const char *section, const char *key, json_t *value);

/* Write the document now. 0, or -1 with err "PATH: reason". */
int ks_status_write(ks_status *st, char *err, size_t errlen);

/* Read a status file written by a running engine; *out is a new reference
 * owned by the caller. 0, or -1 with err "PATH: reason". */
int ks_status_read(const char *path, json_t **out, char *err, size_t errlen);

#endif /* KS_STATUS_H */
