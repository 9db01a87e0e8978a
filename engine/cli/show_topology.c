/*
 * show_topology.c - see show_topology.h.
 */
#include "cli/show_topology.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "runtime/task.h"
#include "runtime/topology.h"

/* A private directory for the plugin copies of a command that does not
 * run the pipeline (a running engine keeps its own under state_dir). */
static int temp_copy_dir(char *buf, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, len, "%s/kstreams-plugins-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    return mkdtemp(buf) ? 0 : -1;
}

/* Load and resolve FILE, copying plugin builds into copy_dir; NULL with
 * the error on errf. */
static ks_topology *load_topology(const char *file, const char *copy_dir, FILE *errf)
{
    char err[2048];
    ks_pipeline *p = NULL;
    if (ks_pipeline_load(file, &p, err, sizeof err) != 0) {
        fprintf(errf, "%s\n", err);
        return NULL;
    }
    ks_topology *t = NULL;
    if (ks_topology_build(p, ks_host_api_table(), copy_dir, &t, err, sizeof err) != 0) {
        fprintf(errf, "%s\n", err);
        return NULL;
    }
    return t;
}

ks_topology *ks_cli_load_topology(const char *file, char *dir, size_t dirlen, FILE *errf)
{
    if (temp_copy_dir(dir, dirlen) != 0) {
        fprintf(errf, "mkdtemp: %s\n", strerror(errno));
        return NULL;
    }
    ks_topology *t = load_topology(file, dir, errf);
    if (!t)
        rmdir(dir);
    return t;
}

ks_exit ks_cli_show_topology(const char *file, ks_topology_view view, int say_ok, FILE *out,
                             FILE *err)
{
    char dir[4096];
    if (temp_copy_dir(dir, sizeof dir) != 0) {
        fprintf(err, "mkdtemp: %s\n", strerror(errno));
        return KS_EXIT_FAILURE;
    }
    ks_topology *t = load_topology(file, dir, err);
    ks_exit rc = KS_EXIT_INVALID;
    if (t) {
        if (view == KS_VIEW_DOT)
            ks_topology_print_dot(t, out);
        else
            ks_topology_print(t, out);
        if (say_ok)
            fprintf(out, "%s: ok\n", file);
        rc = KS_EXIT_OK;
    }
    ks_topology_free(t);
    rmdir(dir);
    return rc;
}
