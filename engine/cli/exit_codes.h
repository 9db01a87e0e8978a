/*
 * exit_codes.h - the exit codes of the kstreams command, the one list
 * (docs/cli.md "Exit codes" says the same to users). Every command returns
 * one of these; nothing in cli/ spells the numbers.
 */
#ifndef KS_CLI_EXIT_CODES_H
#define KS_CLI_EXIT_CODES_H

typedef enum ks_exit {
    KS_EXIT_OK = 0,        /* success */
    KS_EXIT_FAILURE = 1,   /* runtime failure (logged); reload refused or no result */
    KS_EXIT_INVALID = 2,   /* invalid pipeline or plugin; no engine runs the pipeline */
    KS_EXIT_NOT_FOUND = 3, /* query: store, partition, key; outbox-status: event */
    KS_EXIT_USAGE = 64,    /* unknown command or option, bad value (sysexits EX_USAGE) */
} ks_exit;

#endif /* KS_CLI_EXIT_CODES_H */
