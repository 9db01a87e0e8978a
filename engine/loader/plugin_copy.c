/*
 * plugin_copy.c - the private copy a build is dlopen'ed from: named by
 * content hash and pid, written through a temporary name and moved into
 * place with a rename that never replaces (glibc's dlopen returns the old
 * image for a path, hard link or inode it already has loaded), with a
 * "-N" suffix when the plain name is taken. A copy is removed when its
 * plugin is closed; ks_plugin_copies_prune removes those of processes that
 * died without closing (kill -9).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "loader/plugin_internal.h"

/* A malloc'ed formatted string, or NULL when out of memory. */
static char *str_fmt(const char *fmt, ...) KS_PRINTF(1, 2);

static char *str_fmt(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* FNV-1a, 64 bits: names the copy by content. Not a security measure. */
static uint64_t fnv1a64(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3u;
    }
    return h;
}

/* Rename `from` to `to` unless `to` exists (then EEXIST). */
static int rename_noreplace(const char *from, const char *to)
{
#ifdef RENAME_NOREPLACE
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -1;
#endif
    /* link(2) never replaces: the portable no-replace rename. */
    if (link(from, to) != 0)
        return -1;
    unlink(from);
    return 0;
}

/* ------------------------------------------------------------------ */
/* The private copy                                                    */
/* ------------------------------------------------------------------ */

/* "count" for "/x/count.so", "count" for "/x/count". Malloc'ed. */
static char *build_base(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    if (n > 3 && strcmp(b + n - 3, ".so") == 0)
        n -= 3;
    if (n == 0) {
        b = "plugin";
        n = strlen(b);
    }
    if (n > 64)
        n = 64;
    char *s = malloc(n + 1);
    if (!s)
        return NULL;
    for (size_t i = 0; i < n; i++) /* keep copy names tame */
        s[i] = (b[i] == '/' || (unsigned char)b[i] < 0x20) ? '_' : b[i];
    s[n] = '\0';
    return s;
}

/*
 * Write buf to a new file in copy_dir named
 *   <copy_dir>/<base>-<fnv1a64 hex>-<pid>.so      (or ...-<pid>-<n>.so)
 * through a temporary name and a no-replace rename. *out is malloc'ed.
 */
int ks_loader_write_copy(const char *path, const char *copy_dir,
                         const unsigned char *buf, size_t len, char **out,
                         char *err, size_t errlen)
{
    char *base = NULL, *tmp = NULL, *final = NULL;
    int fd = -1;

    if (ks_mkdir_p(copy_dir, 0700) != 0) {
        set_err(err, errlen, "%s: cannot create the copy directory %s: %s",
                path, copy_dir, strerror(errno));
        return -1;
    }
    uint64_t hash = fnv1a64(buf, len);
    long pid = (long)getpid();
    base = build_base(path);
    tmp = base ? str_fmt("%s/.%s-%016llx-%ld.XXXXXX", copy_dir, base,
                         (unsigned long long)hash, pid)
               : NULL;
    if (!tmp)
        goto nomem;
    fd = mkstemp(tmp);
    if (fd < 0) {
        set_err(err, errlen, "%s: cannot create a private copy in %s: %s",
                path, copy_dir, strerror(errno));
        goto fail;
    }
    for (size_t done = 0; done < len;) {
        ssize_t n = write(fd, buf + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            set_err(err, errlen, "%s: cannot write the private copy %s: %s",
                    path, tmp, n < 0 ? strerror(errno) : "short write");
            goto fail_unlink;
        }
        done += (size_t)n;
    }
    if (close(fd) != 0) {
        fd = -1;
        set_err(err, errlen, "%s: cannot write the private copy %s: %s",
                path, tmp, strerror(errno));
        goto fail_unlink;
    }
    fd = -1;

    /* The same build loaded twice in this process (or a stale copy left by
     * a dead process with our pid) already has the plain name: take the
     * next free "-n". Never replace: replacing a loaded copy's name would
     * make dlopen hand back the old image. */
    for (unsigned n = 0;; n++) {
        free(final);
        final = n == 0 ? str_fmt("%s/%s-%016llx-%ld.so", copy_dir, base,
                                 (unsigned long long)hash, pid)
                       : str_fmt("%s/%s-%016llx-%ld-%u.so", copy_dir, base,
                                 (unsigned long long)hash, pid, n);
        if (!final)
            goto nomem_unlink;
        if (rename_noreplace(tmp, final) == 0)
            break;
        if (errno != EEXIST || n >= 1000) {
            set_err(err, errlen, "%s: cannot move the private copy to %s: %s",
                    path, final, strerror(errno));
            goto fail_unlink;
        }
    }
    free(tmp);
    free(base);
    *out = final;
    return 0;

nomem_unlink:
    set_err(err, errlen, "%s: out of memory copying the build", path);
fail_unlink:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    free(tmp);
    free(base);
    free(final);
    return -1;
nomem:
    set_err(err, errlen, "%s: out of memory copying the build", path);
fail:
    free(tmp);
    free(base);
    return -1;
}

/* The pid in a copy's name "BASE-<16 hex>-PID.so", "BASE-<16 hex>-PID-N.so"
 * or ".BASE-<16 hex>-PID.XXXXXX" (being written), or 0 when the name is
 * none of these. */
static long copy_pid(const char *name)
{
    long pid = 0;
    for (const char *p = strchr(name, '-'); p; p = strchr(p + 1, '-')) {
        size_t hex = 0;
        while (isxdigit((unsigned char)p[1 + hex]))
            hex++;
        if (hex != 16 || p[17] != '-' || !isdigit((unsigned char)p[18]))
            continue;
        char *end;
        long v = strtol(p + 18, &end, 10);
        if (*end == '.' || *end == '-')
            pid = v; /* the last such part: BASE itself may hold one */
    }
    return pid;
}

int ks_plugin_copies_prune(const char *copy_dir)
{
    DIR *d = opendir(copy_dir);
    if (!d)
        return 0;
    int removed = 0;
    long self = (long)getpid();
    struct dirent *e;
    while ((e = readdir(d))) {
        long pid = copy_pid(e->d_name);
        if (pid <= 0 || pid == self || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* not a copy, ours, or a process that lives */
        char *path = str_fmt("%s/%s", copy_dir, e->d_name);
        if (path && unlink(path) == 0)
            removed++;
        free(path);
    }
    closedir(d);
    return removed;
}
