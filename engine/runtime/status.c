/*
 * status.c - see status.h. Owns the JSON document and its file. The file
 * is replaced by rename, so readers see either the old or the new document.
 */
#include "runtime/status.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ks_status {
    pthread_mutex_t lock;
    char *path;
    json_t *doc;
};

ks_status *ks_status_new(const char *path)
{
    ks_status *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->path = strdup(path);
    st->doc = json_object();
    if (!st->path || !st->doc) {
        free(st->path);
        json_decref(st->doc);
        free(st);
        return NULL;
    }
    pthread_mutex_init(&st->lock, NULL);
    return st;
}

void ks_status_free(ks_status *st)
{
    if (!st)
        return;
    unlink(st->path);
    json_decref(st->doc);
    free(st->path);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

void ks_status_set(ks_status *st, const char *section, const char *key, json_t *value)
{
    pthread_mutex_lock(&st->lock);
    json_t *sec = json_object_get(st->doc, section);
    if (!sec) {
        sec = json_object();
        json_object_set_new(st->doc, section, sec);
    }
    if (value)
        json_object_set_new(sec, key, value);
    else
        json_object_del(sec, key);
    pthread_mutex_unlock(&st->lock);
}

int ks_status_write(ks_status *st, char *err, size_t errlen)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", st->path);
    pthread_mutex_lock(&st->lock);
    int rc = json_dump_file(st->doc, tmp, JSON_INDENT(2) | JSON_SORT_KEYS);
    pthread_mutex_unlock(&st->lock);
    if (rc != 0 || rename(tmp, st->path) != 0) {
        snprintf(err, errlen, "%s: cannot write: %s", st->path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int ks_status_read(const char *path, json_t **out, char *err, size_t errlen)
{
    json_error_t jerr;
    *out = json_load_file(path, 0, &jerr);
    if (!*out) {
        snprintf(err, errlen, "%s: %s", path,
                 access(path, F_OK) != 0 ? "no status file (is the engine running?)"
                                         : jerr.text);
        return -1;
    }
    return 0;
}

static const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "-";
}

void ks_status_print(const json_t *doc, FILE *f)
{
    const json_t *procs = json_object_get(doc, "processors");
    const char *name;
    const json_t *v;
    if (procs) {
        fprintf(f, "processors:\n");
        json_object_foreach((json_t *)procs, name, v) {
            fprintf(f, "  %s: %s\n", name, str(v, "type"));
            fprintf(f, "    plugin %s %s, build %s, state version %lld\n", str(v, "plugin"),
                    str(v, "version"), str(v, "build_id"),
                    (long long)json_integer_value(json_object_get(v, "state_version")));
            fprintf(f, "    file %s, loaded at %s\n", str(v, "path"), str(v, "loaded_at"));
            fprintf(f, "    last reload error: %s\n", str(v, "last_reload_error"));
        }
    }
    const json_t *rl = json_object_get(doc, "reload");
    if (rl) {
        fprintf(f, "reload: %lld attempts, %lld swapped, %lld refused%s\n",
                (long long)json_integer_value(json_object_get(rl, "attempts")),
                (long long)json_integer_value(json_object_get(rl, "swapped")),
                (long long)json_integer_value(json_object_get(rl, "refused")),
                json_is_true(json_object_get(rl, "in_progress")) ? " (one in progress)" : "");
        const json_t *last = json_object_get(rl, "last");
        if (last)
            fprintf(f, "  last: %s %s at %s%s%s\n", str(last, "result"), str(last, "file"),
                    str(last, "at"), json_object_get(last, "error") ? ": " : "",
                    json_object_get(last, "error") ? str(last, "error") : "");
    }
    json_object_foreach((json_t *)doc, name, v) {
        if (!strcmp(name, "processors") || !strcmp(name, "reload"))
            continue;
        char *text = json_dumps(v, JSON_INDENT(2) | JSON_SORT_KEYS);
        fprintf(f, "%s: %s\n", name, text ? text : "?");
        free(text);
    }
}
