/*
 * engine_status.c - see engine_status.h. The document's fields are
 * written by runtime/reload.c ("processors", "reload") and others (any
 * section).
 */
#include "cli/engine_status.h"

#include <stdlib.h>
#include <string.h>

#include "cli/cli_args.h"
#include "state/layout.h"

ks_exit ks_cli_engine_files(const char *file, char *pid_path, char *status_path, size_t len,
                            FILE *err)
{
    ks_pipeline *p = NULL;
    if (ks_cli_load_pipeline(file, &p, err) != KS_EXIT_OK)
        return KS_EXIT_INVALID;
    ks_layout_pid_file(p->state_dir, p->application, pid_path, len);
    ks_layout_status_file(p->state_dir, p->application, status_path, len);
    ks_pipeline_free(p);
    return KS_EXIT_OK;
}

static const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "-";
}

static long long num(const json_t *o, const char *key)
{
    return (long long)json_integer_value(json_object_get(o, key));
}

static void print_processors(const json_t *procs, FILE *f)
{
    const char *name;
    const json_t *v;
    fprintf(f, "processors:\n");
    json_object_foreach((json_t *)procs, name, v) {
        fprintf(f, "  %s: %s\n", name, str(v, "type"));
        fprintf(f, "    plugin %s %s, build %s, state version %lld\n", str(v, "plugin"),
                str(v, "version"), str(v, "build_id"), num(v, "state_version"));
        fprintf(f, "    file %s, loaded at %s\n", str(v, "path"), str(v, "loaded_at"));
        fprintf(f, "    last reload error: %s\n", str(v, "last_reload_error"));
    }
}

static void print_reload(const json_t *rl, FILE *f)
{
    fprintf(f, "reload: %lld attempts, %lld swapped, %lld refused%s\n", num(rl, "attempts"),
            num(rl, "swapped"), num(rl, "refused"),
            json_is_true(json_object_get(rl, "in_progress")) ? " (one in progress)" : "");
    const json_t *last = json_object_get(rl, "last");
    if (last)
        fprintf(f, "  last: %s %s at %s%s%s\n", str(last, "result"), str(last, "file"),
                str(last, "at"), json_object_get(last, "error") ? ": " : "",
                json_object_get(last, "error") ? str(last, "error") : "");
}

void ks_cli_print_status(const json_t *doc, FILE *f)
{
    const json_t *procs = json_object_get(doc, "processors");
    if (procs)
        print_processors(procs, f);
    const json_t *rl = json_object_get(doc, "reload");
    if (rl)
        print_reload(rl, f);
    const char *name;
    const json_t *v;
    json_object_foreach((json_t *)doc, name, v) {
        if (!strcmp(name, "processors") || !strcmp(name, "reload"))
            continue;
        char *text = json_dumps(v, JSON_INDENT(2) | JSON_SORT_KEYS);
        fprintf(f, "%s: %s\n", name, text ? text : "?");
        free(text);
    }
}
