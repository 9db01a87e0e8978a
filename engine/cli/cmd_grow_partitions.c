/*
 * cmd_grow_partitions.c - `kstreams grow-partitions FILE --partitions N`:
 * the command line of the offline growth of a stopped application's
 * source topics (runtime/grow_partitions.h does the work).
 */
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/show_topology.h"
#include "runtime/grow_partitions.h"
#include "runtime/topology.h"

const char ks_cmd_grow_partitions_help[] =
    "Give the source topics of pipeline FILE N partitions without losing its\n"
    "state, while every process of the application is stopped: grows the\n"
    "sources, the repartition topics and the stores' changelogs to N, and\n"
    "moves each key of a store to the changelog partition it belongs to under\n"
    "the new count (value there, tombstone where it was; one transaction), so\n"
    "the tasks restore their moved keys at the next start. Refuses while the\n"
    "application's consumer group has members, while a source partition has\n"
    "unprocessed records (\"drain first\"), or when a store cannot be moved\n"
    "(windowed, a table's, a join's, without changelog; an outbox). Safe to\n"
    "run again after a failure. Stop the sources' producers first and restart\n"
    "them after (docs/operations.md).\n"
    "  --partitions N     the new partition count (more than now; required)\n"
    "  --partitioner P    how the sources' producers place keys: murmur2\n"
    "                     (default: Java's and the engine's), consistent or\n"
    "                     crc32 (librdkafka's default), fnv1a; stores behind a\n"
    "                     repartition topic always use murmur2\n"
    "  --dry-run          check and print what would move; change nothing\n"
    "exit codes: 0 done, 1 refused or failed (the message says why), 2 invalid\n"
    "pipeline or a store that cannot be moved, 64 usage\n";

enum { OPT_PARTITIONS = 256, OPT_PARTITIONER, OPT_DRY_RUN };

static const struct option OPTIONS[] = {
    {"partitions", required_argument, NULL, OPT_PARTITIONS},
    {"partitioner", required_argument, NULL, OPT_PARTITIONER},
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
    {0},
};

typedef struct grow_args {
    long partitions; /* 0: not given */
    const char *partitioner;
    int dry_run;
} grow_args;

static int on_option(void *ctx, int opt, const char *value, FILE *err)
{
    grow_args *a = ctx;
    char *end;
    switch (opt) {
    case OPT_PARTITIONS:
        a->partitions = strtol(value, &end, 10);
        if (*end || end == value || a->partitions < 1 || a->partitions > 1000000)
            return ks_cli_usage_error("grow-partitions", err,
                                      "--partitions needs a number >= 1, not '%s'", value);
        break;
    case OPT_PARTITIONER:
        a->partitioner = value;
        break;
    case OPT_DRY_RUN:
        a->dry_run = 1;
        break;
    }
    return KS_CLI_GO;
}

ks_exit ks_cmd_grow_partitions(int argc, char **argv, FILE *out, FILE *err)
{
    static const ks_cli_spec spec = {"grow-partitions", OPTIONS, on_option, {"pipeline FILE"},
                                     0};
    grow_args a = {0, "murmur2", 0};
    const char *operands[KS_CLI_MAX_OPERANDS];
    int rc = ks_cli_parse(&spec, argc, argv, &a, operands, out, err);
    if (rc != KS_CLI_GO)
        return (ks_exit)rc;
    if (a.partitions == 0)
        return ks_cli_usage_error("grow-partitions", err, "%s", "--partitions N is required");
    char dir[4096], msg[16384];
    ks_topology *t = ks_cli_load_topology(operands[0], dir, sizeof dir, err);
    if (!t)
        return KS_EXIT_INVALID;
    ks_grow_plan plan;
    ks_exit ex = KS_EXIT_INVALID;
    if (ks_grow_plan_make(t, a.partitioner, &plan, msg, sizeof msg) != 0) {
        fprintf(err, "%s: %s\n", operands[0], msg);
    } else {
        int g = ks_grow_partitions(t, &plan, (int32_t)a.partitions, a.dry_run, out, msg,
                                   sizeof msg);
        if (g != 0)
            fprintf(err, "%s: %s%s\n", operands[0], g == KS_GROW_REFUSED ? "refused: " : "",
                    msg);
        ex = g == 0 ? KS_EXIT_OK : KS_EXIT_FAILURE;
        ks_grow_plan_free(&plan);
    }
    ks_topology_free(t);
    rmdir(dir);
    return ex;
}
