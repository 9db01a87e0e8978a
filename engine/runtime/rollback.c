/*
 * rollback.c - see rollback.h. Owns the format of the crash history and
 * of the good-builds directory.
 */
#include "runtime/rollback.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"

#define LINE_MAX_LEN 1024

/* Split "SECONDS\tPLUGIN\tBUILD\n" in place: 0, or -1 for a bad line. */
static int parse_line(char *line, int64_t *secs, char **plugin, char **build)
{
    line[strcspn(line, "\n")] = '\0';
    char *t1 = strchr(line, '\t');
    char *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
    if (!t2)
        return -1;
    *t1 = *t2 = '\0';
    char *end;
    long long s = strtoll(line, &end, 10);
    if (end == line || *end)
        return -1;
    *secs = s;
    *plugin = t1 + 1;
    *build = t2 + 1;
    return 0;
}

/* A crash at `secs` is no older than within_ms (>= 0) at now_s; one
 * stamped at or after now_s (a clock set back) counts too. `secs` comes
 * from a file a damaged disk may have filled with anything: no arithmetic
 * on it may overflow. */
static int recent(int64_t secs, int64_t now_s, int64_t within_ms)
{
    if (within_ms < 0)
        return 0;
    if (secs >= now_s)
        return 1;
    uint64_t age_s = (uint64_t)now_s - (uint64_t)secs; /* > 0, exact modulo 2^64 */
    return age_s <= (uint64_t)within_ms / 1000;
}

int ks_rollback_count_crashes(const char *history, const char *plugin, const char *build,
                              int64_t now_s, int64_t within_ms)
{
    FILE *f = fopen(history, "r");
    if (!f)
        return 0;
    char line[LINE_MAX_LEN];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        int64_t secs;
        char *p, *b;
        if (parse_line(line, &secs, &p, &b) == 0 && recent(secs, now_s, within_ms) &&
            strcmp(p, plugin) == 0 && strcmp(b, build) == 0)
            n++;
    }
    fclose(f);
    return n;
}

int ks_rollback_prune_history(const char *history, int64_t now_s, int64_t within_ms,
                              char *err, size_t errlen)
{
    FILE *in = fopen(history, "r");
    if (!in)
        return 0; /* no crash yet */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", history);
    FILE *out = fopen(tmp, "w");
    if (!out) {
        snprintf(err, errlen, "%s: cannot write: %s", tmp, strerror(errno));
        fclose(in);
        return -1;
    }
    char line[LINE_MAX_LEN];
    while (fgets(line, sizeof line, in)) {
        int64_t secs;
        char *p, *b;
        /* written back as parsed, not as read: a line cut by a NUL (the
         * zeroed tail a power loss can leave after an append) would
         * otherwise lose its newline and swallow the next line */
        if (parse_line(line, &secs, &p, &b) == 0 && recent(secs, now_s, within_ms))
            fprintf(out, "%lld\t%s\t%s\n", (long long)secs, p, b);
    }
    fclose(in);
    if (fclose(out) != 0 || rename(tmp, history) != 0) {
        snprintf(err, errlen, "%s: cannot rewrite: %s", history, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* <dir>/<plugin><suffix> */
static void kept_path(const char *dir, const char *plugin, const char *suffix, char *out,
                      size_t len)
{
    snprintf(out, len, "%s/%s%s", dir, plugin, suffix);
}

/* The first line of a small text file, in buf: 1, or 0 without one. */
static int read_id(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    if (ok)
        buf[strcspn(buf, "\n")] = '\0';
    return ok && buf[0];
}

int ks_rollback_kept_build(const char *dir, const char *plugin, char *buf, size_t len)
{
    char path[4200];
    kept_path(dir, plugin, ".id", path, sizeof path);
    return read_id(path, buf, len);
}

/* Copy `from` to `to` through "<to>.tmp" and a rename. */
static int copy_file(const char *from, const char *to, char *err, size_t errlen)
{
    char tmp[4300], buf[65536];
    snprintf(tmp, sizeof tmp, "%s.tmp", to);
    int in = open(from, O_RDONLY | O_CLOEXEC);
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int ok = in >= 0 && out >= 0;
    ssize_t n = 0;
    while (ok && (n = read(in, buf, sizeof buf)) > 0)
        ok = write(out, buf, (size_t)n) == n;
    ok = ok && n == 0;
    if (in >= 0)
        close(in);
    if (out >= 0 && (fsync(out) != 0 || close(out) != 0))
        ok = 0;
    if (!ok || rename(tmp, to) != 0) {
        snprintf(err, errlen, "cannot copy %s to %s: %s", from, to, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

static int write_id(const char *path, const char *build, char *err, size_t errlen)
{
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%s\n", build) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int ks_rollback_keep(const char *dir, const char *plugin, const char *build,
                     const char *so_path, char *err, size_t errlen)
{
    if (ks_mkdir_p(dir, 0700) != 0) {
        snprintf(err, errlen, "%s: cannot create: %s", dir, strerror(errno));
        return -1;
    }
    char so[4200], id[4200], prev_so[4200], prev_id[4200], kept[512];
    kept_path(dir, plugin, ".so", so, sizeof so);
    kept_path(dir, plugin, ".id", id, sizeof id);
    kept_path(dir, plugin, ".prev.so", prev_so, sizeof prev_so);
    kept_path(dir, plugin, ".prev.id", prev_id, sizeof prev_id);
    if (read_id(id, kept, sizeof kept) && strcmp(kept, build) != 0) {
        /* the id moves last: a crash in between leaves a .prev.so whose
         * .prev.id still names the build before it, which find() skips */
        if ((rename(so, prev_so) != 0 && errno != ENOENT) || rename(id, prev_id) != 0) {
            snprintf(err, errlen, "%s: cannot keep it as the previous good build: %s", so,
                     strerror(errno));
            return -1;
        }
    }
    /* the id goes first: a crash before the copy leaves an id without a
     * file, which find() skips, never a file under another build's id */
    unlink(so);
    if (write_id(id, build, err, errlen) != 0)
        return -1;
    return copy_file(so_path, so, err, errlen);
}

int ks_rollback_find(const char *dir, const char *plugin, const char *not_build, char *path,
                     size_t plen, char *build, size_t blen)
{
    static const char *const so_suffix[] = {".so", ".prev.so"};
    static const char *const id_suffix[] = {".id", ".prev.id"};
    for (int i = 0; i < 2; i++) {
        char id[4200];
        kept_path(dir, plugin, id_suffix[i], id, sizeof id);
        kept_path(dir, plugin, so_suffix[i], path, plen);
        if (read_id(id, build, blen) && strcmp(build, not_build) != 0 &&
            access(path, R_OK) == 0)
            return 1;
    }
    path[0] = build[0] = '\0';
    return 0;
}
