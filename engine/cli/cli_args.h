/*
 * cli_args.h - what every command does with its arguments: options parsed
 * with getopt_long against the command's own option table (an option it
 * does not take is a usage error), operands counted, usage errors printed
 * the same way, the pipeline FILE loaded.
 */
#ifndef KS_CLI_ARGS_H
#define KS_CLI_ARGS_H

#include <getopt.h>
#include <stdio.h>

#include "cli/exit_codes.h"
#include "config/config.h"

/* ks_cli_parse's "the arguments are fine, go on" (not an exit code). */
#define KS_CLI_GO (-1)

/* Most operands a command takes. */
#define KS_CLI_MAX_OPERANDS 4

/*
 * A command's arguments. `options` lists the long options it takes
 * (getopt_long's table, ending with a zero entry; NULL: none), each with a
 * `val` above 255; --help and -h are taken by every command and need not
 * be listed. on_option gets each option as it comes, with its value (NULL
 * for an option without one), and returns KS_CLI_GO or an exit code
 * (usually ks_cli_usage_error's). `required` names the operands that must
 * be given, in order, for "missing X" ("pipeline FILE"); `optional` more
 * may follow.
 */
typedef struct ks_cli_spec {
    const char *command;
    const struct option *options;
    int (*on_option)(void *ctx, int opt, const char *value, FILE *err);
    const char *required[KS_CLI_MAX_OPERANDS];
    int optional;
} ks_cli_spec;

/*
 * Parse argv (argv[0] the command's name; not modified) as `spec` says.
 * Options and operands may come in any order; "--" ends the options.
 * Operands go to operands[] in order (KS_CLI_MAX_OPERANDS entries, NULL
 * where not given). Returns KS_CLI_GO, KS_EXIT_OK after printing the
 * command's help to `out` (--help), KS_EXIT_USAGE after a usage error
 * printed to `err`, or what on_option returned.
 */
int ks_cli_parse(const ks_cli_spec *spec, int argc, char **argv, void *ctx,
                 const char **operands, FILE *out, FILE *err);

/*
 * Print "kstreams COMMAND: " and the message (fmt with one string
 * argument, which may be unused), then the command's help, to err.
 * Returns KS_EXIT_USAGE.
 */
ks_exit ks_cli_usage_error(const char *command, FILE *err, const char *fmt, const char *arg);

/*
 * Load the pipeline FILE into *p (the caller frees it with
 * ks_pipeline_free). KS_EXIT_OK, or KS_EXIT_INVALID with the error
 * ("FILE:LINE:COL: ...") printed to err and *p NULL.
 */
ks_exit ks_cli_load_pipeline(const char *file, ks_pipeline **p, FILE *err);

#endif /* KS_CLI_ARGS_H */
