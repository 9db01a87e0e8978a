/*
 * plugin_watch.c - see plugin_watch.h. Owns the inotify descriptor and,
 * per file, its directory watch and what was last seen of it.
 */
#include "runtime/plugin_watch.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"

typedef struct watched_file {
    char *path;
    char base[256]; /* the name in its directory, as inotify reports it */
    int wd;
    int dirty; /* an event named it since it last settled */
    int64_t last_event_ms;
    off_t size;
    int64_t mtime_ns;
} watched_file;

struct ks_plugin_watch {
    int ifd;
    watched_file *files;
    size_t count;
};

static void file_stat(const char *path, off_t *size, int64_t *mtime_ns)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        *size = -1;
        *mtime_ns = -1;
        return;
    }
    *size = sb.st_size;
    *mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
}

static int add_watch(ks_plugin_watch *w, watched_file *f, char *err, size_t errlen)
{
    char dir[4096];
    const char *slash = strrchr(f->path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - f->path) : 1,
             slash ? f->path : ".");
    if (slash && slash == f->path)
        snprintf(dir, sizeof dir, "/");
    snprintf(f->base, sizeof f->base, "%s", slash ? slash + 1 : f->path);
    /* one watch per directory: inotify returns the same wd for it */
    f->wd = inotify_add_watch(w->ifd, dir,
                              IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_MODIFY | IN_ATTRIB);
    if (f->wd < 0) {
        snprintf(err, errlen, "%s: cannot watch: %s", dir, strerror(errno));
        return -1;
    }
    file_stat(f->path, &f->size, &f->mtime_ns);
    return 0;
}

int ks_plugin_watch_start(const char *const *paths, size_t n, ks_plugin_watch **out,
                          char *err, size_t errlen)
{
    *out = NULL;
    ks_plugin_watch *w = calloc(1, sizeof *w);
    if (!w || !(w->files = calloc(n + 1, sizeof *w->files))) {
        free(w);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    w->count = n;
    w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->ifd < 0) {
        snprintf(err, errlen, "inotify: %s", strerror(errno));
        ks_plugin_watch_free(w);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (!(w->files[i].path = strdup(paths[i]))) {
            snprintf(err, errlen, "out of memory");
            ks_plugin_watch_free(w);
            return -1;
        }
        if (add_watch(w, &w->files[i], err, errlen) != 0) {
            ks_plugin_watch_free(w);
            return -1;
        }
    }
    *out = w;
    return 0;
}

/* Read inotify events; mark the files they name as dirty. */
static void read_events(ks_plugin_watch *w)
{
    char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t len = read(w->ifd, buf, sizeof buf);
        if (len <= 0)
            return;
        for (char *p = buf; p < buf + len;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            for (size_t i = 0; ev->len && i < w->count; i++) {
                watched_file *f = &w->files[i];
                if (f->wd == ev->wd && strcmp(f->base, ev->name) == 0) {
                    f->dirty = 1;
                    f->last_event_ms = ks_mono_ms();
                }
            }
            p += sizeof *ev + ev->len;
        }
    }
}

/* A dirty file that stayed quiet and unchanged for the settle time has
 * changed; one still being written waits. */
static int settled_change(watched_file *f, int64_t now, int64_t settle_ms)
{
    if (!f->dirty || now - f->last_event_ms < settle_ms)
        return 0;
    off_t size;
    int64_t mtime;
    file_stat(f->path, &size, &mtime);
    if (size < 0)
        return 0; /* gone (being replaced): wait for its next event */
    f->dirty = 0;
    if (size == f->size && mtime == f->mtime_ns)
        return 0; /* e.g. a chmod, or written back unchanged */
    f->size = size;
    f->mtime_ns = mtime;
    return 1;
}

size_t ks_plugin_watch_poll(ks_plugin_watch *w, int timeout_ms, int64_t settle_ms,
                            int *changed)
{
    struct pollfd pfd = {.fd = w->ifd, .events = POLLIN};
    if (poll(&pfd, 1, timeout_ms) > 0)
        read_events(w);
    int64_t now = ks_mono_ms();
    size_t n = 0;
    for (size_t i = 0; i < w->count; i++)
        n += (size_t)(changed[i] = settled_change(&w->files[i], now, settle_ms));
    return n;
}

void ks_plugin_watch_free(ks_plugin_watch *w)
{
    if (!w)
        return;
    if (w->ifd >= 0)
        close(w->ifd);
    for (size_t i = 0; w->files && i < w->count; i++)
        free(w->files[i].path);
    free(w->files);
    free(w);
}
