/*
 * engine_status.h - what `kstreams status` and `kstreams reload` share:
 * the files of the engine that runs a pipeline, and its status document
 * (runtime/status.h, status.json) printed for people.
 */
#ifndef KS_CLI_ENGINE_STATUS_H
#define KS_CLI_ENGINE_STATUS_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "cli/exit_codes.h"

/* The pid file and the status file of the engine that runs pipeline
 * `file` (each buffer `len` bytes). KS_EXIT_OK, or KS_EXIT_INVALID with
 * the pipeline's error printed to err. */
ks_exit ks_cli_engine_files(const char *file, char *pid_path, char *status_path, size_t len,
                            FILE *err);

/* Print `doc` (borrowed) to f: the processors with their builds, then the
 * reload counters and the last reload, then any other section as JSON.
 * Missing fields print as "-". */
void ks_cli_print_status(const json_t *doc, FILE *f);

#endif /* KS_CLI_ENGINE_STATUS_H */
