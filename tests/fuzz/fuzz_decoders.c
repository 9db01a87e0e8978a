/*
 * fuzz_decoders.c - the engine's on-disk records other than outbox rows
 * and window keys (fuzz_outbox_row, fuzz_window_key), read back from any
 * bytes, as a damaged or hostile state directory would hold them. The
 * input's first byte picks the record:
 *
 *   0  the crash history of hot deploy's rollback (engine/runtime/
 *      rollback.c; "SECONDS<TAB>PLUGIN<TAB>BUILD" lines): counting never
 *      crashes, and pruning keeps exactly the lines counted as recent
 *   1  a good build's id file (rollback.c): the id read back is one line
 *      that fits its buffer
 *   2  a store's changelog checkpoint and 3 its state version in the
 *      "__meta" database (engine/state/store_meta.c), written raw into a
 *      real LMDB batch: refused unless 8 (4) bytes, and an accepted value
 *      writes back to the same bytes
 *   4  a windowed store's meta entry (lib/window: ks_win_meta_load) through
 *      a host whose store holds the bytes in a heap block of their exact
 *      size: refused unless 16 bytes, and an accepted one saves back to
 *      the same bytes
 *   5  an outbox status name (outbox_status.c, as status files and
 *      `outbox-status` show it): parses only to a name that prints back
 *
 * Nothing crashes, leaks, or reads past the bytes (ASan, UBSan).
 */
#include <ftw.h>
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kstreams/kstreams.h"
#include "outbox/outbox_status.h"
#include "runtime/rollback.h"
#include "state/store_internal.h"
#include "window/window_core.h"

static char dir[64];
static char history[128], builds[128];
static ks_store_env *env;
static ks_store_db *db;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void remove_dir(void)
{
    ks_store_env_close(env);
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    char err[512], path[192];
    snprintf(dir, sizeof dir, "/tmp/ks-fuzz-decoders-XXXXXX");
    if (!mkdtemp(dir))
        abort();
    atexit(remove_dir);
    snprintf(history, sizeof history, "%s/crash-history", dir);
    snprintf(builds, sizeof builds, "%s/good-builds", dir);
    snprintf(path, sizeof path, "%s/store", dir);
    if (ks_store_env_open(path, 8u << 20, 4, &env, err, sizeof err) != 0 ||
        ks_store_db_open(env, "s", &db) != 0) {
        fprintf(stderr, "fuzz_decoders: %s\n", err);
        abort();
    }
    return 0;
}

static void write_file(const char *path, const uint8_t *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0)
        abort();
}

static int64_t i64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return (int64_t)v;
}

/* 0: NOW(8) WITHIN(8) then the file. */
static void crash_history(const uint8_t *data, size_t len)
{
    if (len < 16)
        return;
    int64_t now = i64(data), within = i64(data + 8);
    write_file(history, data + 16, len - 16);
    int before = ks_rollback_count_crashes(history, "p", "b", now, within);
    char err[512];
    if (ks_rollback_prune_history(history, now, within, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_decoders: prune: %s\n", err);
        abort();
    }
    int after = ks_rollback_count_crashes(history, "p", "b", now, within);
    if (before != after) {
        fprintf(stderr, "fuzz_decoders: %d recent crashes before pruning, %d after\n", before,
                after);
        abort();
    }
}

/* 1: the id file of plugin "p" in the good-builds directory. */
static void good_build(const uint8_t *data, size_t len)
{
    char id[192], so[192], buf[64], path[256];
    snprintf(id, sizeof id, "%s/p.id", builds);
    snprintf(so, sizeof so, "%s/p.so", builds);
    mkdir(builds, 0700);
    write_file(id, data, len);
    write_file(so, (const uint8_t *)"", 0);
    memset(buf, 'x', sizeof buf);
    if (ks_rollback_kept_build(builds, "p", buf, sizeof buf) &&
        (memchr(buf, '\0', sizeof buf) == NULL || strchr(buf, '\n') || buf[0] == '\0')) {
        fprintf(stderr, "fuzz_decoders: a kept build id that is not one line\n");
        abort();
    }
    if (ks_rollback_find(builds, "p", "not-this", path, sizeof path, buf, sizeof buf) &&
        (strcmp(path, so) != 0 || strchr(buf, '\n'))) {
        fprintf(stderr, "fuzz_decoders: found build \"%s\" at %s\n", buf, path);
        abort();
    }
}

/* 2, 3: a meta value written raw, read through the store's own code. */
static void store_meta(int version, const uint8_t *data, size_t len)
{
    if (ks_store_begin(env) != 0)
        abort();
    MDB_val k = version ? (MDB_val){db->ver_key_len, db->ver_key}
                        : (MDB_val){db->ckpt_key_len, db->ckpt_key};
    MDB_val v = {len, (void *)data};
    if (mdb_put(env->wtxn, env->meta, &k, &v, 0) != 0)
        abort();
    int64_t off = 0;
    uint32_t ver = 0;
    int rc = version ? ks_store_version_get(db, &ver) : ks_store_checkpoint_get(db, &off);
    if (rc == 0 && len != (version ? 4u : 8u)) {
        fprintf(stderr, "fuzz_decoders: a meta value of %zu bytes accepted\n", len);
        abort();
    }
    if (rc == 0) {
        rc = version ? ks_store_version_set(db, ver) : ks_store_checkpoint_set(db, off);
        MDB_val back;
        if (rc != 0 || mdb_get(env->wtxn, env->meta, &k, &back) != 0 || back.mv_size != len ||
            memcmp(back.mv_data, data, len) != 0) {
            fprintf(stderr, "fuzz_decoders: a meta value does not write back the same\n");
            abort();
        }
    }
    ks_store_abort(env);
}

/* 4: a host whose one store holds one entry, copied to a block of its size. */
static unsigned char *held;
static size_t held_len;
static unsigned char saved[64];
static size_t saved_len;

static int fake_get(ks_store *st, ks_bytes key, ks_bytes *value)
{
    (void)st, (void)key;
    if (!held)
        return KS_ERR_NOT_FOUND;
    *value = (ks_bytes){held, held_len};
    return 0;
}

static int fake_put(ks_store *st, ks_bytes key, ks_bytes value)
{
    (void)st, (void)key;
    if (value.len > sizeof saved)
        abort();
    memcpy(saved, value.data, value.len);
    saved_len = value.len;
    return 0;
}

static void window_meta(const uint8_t *data, size_t len)
{
    ks_host_api api;
    memset(&api, 0, sizeof api);
    api.store_get = fake_get;
    api.store_put = fake_put;
    held = malloc(len ? len : 1);
    if (!held)
        abort();
    memcpy(held, data, len);
    held_len = len;
    int64_t st, seq;
    if (ks_win_meta_load(&api, NULL, &st, &seq) == 0) {
        if (len != 16 || ks_win_meta_save(&api, NULL, st, seq) != 0 || saved_len != len ||
            memcmp(saved, data, len) != 0) {
            fprintf(stderr, "fuzz_decoders: a window meta entry of %zu bytes loads and "
                            "saves as other bytes\n", len);
            abort();
        }
    }
    free(held);
    held = NULL;
}

static void status_name(const uint8_t *data, size_t len)
{
    char name[64];
    if (len >= sizeof name)
        return;
    memcpy(name, data, len);
    name[len] = '\0';
    ks_outbox_status s;
    if (ks_outbox_status_parse(name, &s) == 0 && strcmp(ks_outbox_status_name(s), name) != 0) {
        fprintf(stderr, "fuzz_decoders: status \"%s\" prints as \"%s\"\n", name,
                ks_outbox_status_name(s));
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    if (len < 1)
        return 0;
    switch (data[0] % 6) {
    case 0: crash_history(data + 1, len - 1); break;
    case 1: good_build(data + 1, len - 1); break;
    case 2: store_meta(0, data + 1, len - 1); break;
    case 3: store_meta(1, data + 1, len - 1); break;
    case 4: window_meta(data + 1, len - 1); break;
    default: status_name(data + 1, len - 1); break;
    }
    return 0;
}
