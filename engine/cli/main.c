/*
 * main.c - the kstreams command line.
 *
 * Exit codes: 0 success; 1 runtime failure (logged); 2 invalid pipeline or
 * plugin (the error names file:line:column or the plugin path); 3 not found
 * (query: store, state directory, key); 64 usage. See docs/cli.md.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "runtime/engine.h"
#include "base/log.h"
#include "runtime/task.h"
#include "runtime/topology.h"
#include "cli/cli_help.h"
#include "cli/cli_query.h"
#include "outbox/outbox_pg.h"
#include "outbox/outbox_service.h"
#include "runtime/reload.h"
#include "base/fs.h"
#include "state/layout.h"

#define EXIT_INVALID 2
#define EXIT_USAGE 64

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kstreams COMMAND [OPTIONS]\n"
            "\n"
            "commands:\n"
            "  run FILE [--instance NAME]  run the pipeline until SIGINT/SIGTERM\n"
            "  check FILE                  validate the pipeline, load its plugins,\n"
            "                              print the topology\n"
            "  describe FILE [--dot]       print the topology (as Graphviz DOT)\n"
            "  reload FILE                 hot deploy: make the engine running FILE\n"
            "                              load its plugin files again (SIGHUP) and\n"
            "                              print the outcome (docs/hot-deploy.md)\n"
            "  status FILE [--json]        builds each processor runs, last reload\n"
            "  query FILE STORE [--key K | --from A --to B] [--partition P]\n"
            "        [--format text|json] [--int64]\n"
            "                              read a store of a running or stopped\n"
            "                              instance (read-only)\n"
            "  outbox-status FILE [ID]     an outbox event's status (JSON), or the\n"
            "                              number of events per status\n"
            "  outbox-schema               print the PostgreSQL outbox schema (SQL)\n"
            "  COMMAND --help              help of one command\n"
            "  version                     print the version and plugin ABI\n"
            "\n"
            "environment: KS_LOG_LEVEL=error|warn|info|debug, KS_LOG_JSON=1,\n"
            "  KSTREAMS_PLUGIN_PATH=dir:dir (extra plugin directories)\n"
            "exit codes: 0 ok, 1 runtime failure, 2 invalid pipeline or plugin,\n"
            "  3 not found (query: store, key; outbox-status: event), 64 usage (docs/cli.md)\n");
}

/* Load and resolve FILE, copying plugin builds into copy_dir. */
static ks_topology *load_topology(const char *file, const char *copy_dir)
{
    char err[2048];
    ks_pipeline *p = NULL;
    if (ks_pipeline_load(file, &p, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return NULL;
    }
    ks_topology *t = NULL;
    if (ks_topology_build(p, ks_host_api_table(), copy_dir, &t, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return NULL;
    }
    return t;
}

/* A private directory for plugin copies of a command that does not run. */
static int temp_copy_dir(char *buf, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, len, "%s/kstreams-plugins-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    return mkdtemp(buf) ? 0 : -1;
}

static int cmd_check(const char *file, int dot, int describe)
{
    char dir[4096];
    if (temp_copy_dir(dir, sizeof dir) != 0) {
        perror("mkdtemp");
        return 1;
    }
    ks_topology *t = load_topology(file, dir);
    int rc = EXIT_INVALID;
    if (t) {
        if (dot)
            ks_topology_print_dot(t, stdout);
        else
            ks_topology_print(t, stdout);
        if (!describe)
            printf("%s: ok\n", file);
        rc = 0;
    }
    ks_topology_free(t);
    rmdir(dir);
    return rc;
}

static int cmd_run(const char *file, const char *instance)
{
    /* first: a SIGTERM while plugins load is a stop request, not a kill */
    ks_engine_install_signals();
    char err[2048];
    ks_pipeline *p = NULL;
    if (ks_pipeline_load(file, &p, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return EXIT_INVALID;
    }
    char copy_dir[4096];
    ks_layout_plugins_dir(p->state_dir, p->application, copy_dir, sizeof copy_dir);
    if (ks_mkdir_p(copy_dir, 0755) != 0) {
        fprintf(stderr, "%s: cannot create: %s\n", copy_dir, strerror(errno));
        ks_pipeline_free(p);
        return 1;
    }
    ks_topology *t = NULL;
    if (ks_topology_build(p, ks_host_api_table(), copy_dir, &t, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return EXIT_INVALID;
    }
    int rc = ks_engine_run(t, instance);
    ks_topology_free(t);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (argc > 2 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h")) &&
        ks_cli_command_help(cmd, stdout) == 0)
        return 0;
    if (!strcmp(cmd, "query"))
        return ks_cli_query(argc - 1, argv + 1, stdout, stderr);
    if (!strcmp(cmd, "outbox-schema"))
        return ks_outbox_schema_cli(argc - 1, argv + 1, stdout, stderr);
    if (!strcmp(cmd, "outbox-status"))
        return ks_outbox_status_cli(argc - 1, argv + 1, stdout, stderr);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("kstreams %s (plugin ABI %d.%d)\n", PACKAGE_VERSION, KS_ABI_MAJOR,
               KS_ABI_MINOR);
        return 0;
    }
    const char *file = NULL, *instance = NULL;
    int dot = 0, json = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--instance") && i + 1 < argc)
            instance = argv[++i];
        else if (!strcmp(argv[i], "--dot"))
            dot = 1;
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (argv[i][0] != '-' && !file)
            file = argv[i];
        else {
            fprintf(stderr, "kstreams %s: unexpected argument '%s'\n", cmd, argv[i]);
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (!file) {
        fprintf(stderr, "kstreams %s: missing pipeline FILE\n", cmd);
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!strcmp(cmd, "check"))
        return cmd_check(file, 0, 0);
    if (!strcmp(cmd, "describe"))
        return cmd_check(file, dot, 1);
    if (!strcmp(cmd, "run"))
        return cmd_run(file, instance);
    if (!strcmp(cmd, "reload"))
        return ks_reload_cli(file, 60000, stdout, stderr);
    if (!strcmp(cmd, "status"))
        return ks_status_cli(file, json, stdout, stderr);
    fprintf(stderr, "kstreams: unknown command '%s'\n", cmd);
    usage(stderr);
    return EXIT_USAGE;
}
