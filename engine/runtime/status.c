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
