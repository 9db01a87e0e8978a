/*
 * pq_dl.c - see pq_dl.h.
 *
 * RTLD_LOCAL: libpq's symbols stay out of the global namespace, where a
 * plugin could bind to them by accident. The handle is never closed:
 * connections may live until the process ends.
 */
#define KS_PQ_DL_SELF
#include "pg/pq_dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kstreams/kstreams.h>

#include "base/log.h"

#define LIBPQ_SONAME "libpq.so.5"
#define PACKAGE_HINT "install the Debian package libpq5"

ks_pq_table ks_pq_fn;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_rc;
static char load_err[512];

/* dlsym each function into t; NULL, or the name of the first missing. */
static const char *resolve(void *h, ks_pq_table *t)
{
    void *sym;
#define KS_PQ_RESOLVE(f)                                                                      \
    if (!(sym = dlsym(h, #f)))                                                                \
        return #f;                                                                            \
    memcpy(&t->f, &sym, sizeof sym); /* POSIX: a data pointer holds a function's address */
    KS_PQ_FUNCTIONS(KS_PQ_RESOLVE)
#undef KS_PQ_RESOLVE
    return NULL;
}

static void load_once(void)
{
    const char *path = getenv("KS_LIBPQ");
    if (!path || !*path)
        path = LIBPQ_SONAME;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        ks_errf(load_err, sizeof load_err, "PostgreSQL backend: cannot load %s: %s; %s", path,
                why ? why : "unknown error", PACKAGE_HINT);
        load_rc = KS_ERR_UNSUPPORTED;
        return;
    }
    ks_pq_table t;
    const char *missing = resolve(h, &t);
    if (missing) {
        ks_errf(load_err, sizeof load_err,
                "PostgreSQL backend: %s has no function %s (too old?); %s", path, missing,
                PACKAGE_HINT);
        dlclose(h);
        load_rc = KS_ERR_UNSUPPORTED;
        return;
    }
    ks_pq_fn = t;
}

int ks_pq_load(char *err, size_t errlen)
{
    pthread_once(&once, load_once);
    if (load_rc && err && errlen)
        snprintf(err, errlen, "%s", load_err);
    return load_rc;
}
