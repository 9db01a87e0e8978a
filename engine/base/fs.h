/*
 * fs.h - file-system helpers every part uses.
 */
#ifndef KS_BASE_FS_H
#define KS_BASE_FS_H

#include <sys/types.h>

/* mkdir -p: creates `path` and its missing parents with `mode` (existing
 * directories are left as they are; trailing slashes are fine). `path` is
 * borrowed. Returns 0, or -1 with errno set (ENAMETOOLONG over PATH_MAX,
 * ENOTDIR when `path` exists and is not a directory). */
int ks_mkdir_p(const char *path, mode_t mode);

#endif /* KS_BASE_FS_H */
