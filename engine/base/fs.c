/*
 * fs.c - file-system helpers (fs.h).
 */
#include "base/fs.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

int ks_mkdir_p(const char *path, mode_t mode)
{
    char buf[PATH_MAX];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) {
        errno = n ? ENAMETOOLONG : ENOENT;
        return -1;
    }
    memcpy(buf, path, n + 1);
    while (n > 1 && buf[n - 1] == '/')
        buf[--n] = '\0';
    for (char *c = buf + 1;; c++) {
        int last = *c == '\0';
        if (*c != '/' && !last)
            continue;
        *c = '\0';
        if (mkdir(buf, mode) != 0 && errno != EEXIST)
            return -1;
        if (last)
            break;
        *c = '/';
    }
    struct stat st; /* EEXIST also covers a file where the directory goes */
    if (stat(buf, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}
