/*
 * test_plugin.c - the plugin loader (engine/loader/plugin.c) against the test
 * plugins of tests/plugins/: one good build and one build per refusal.
 *
 * Every refusal is checked by its exact message and by the copy directory
 * being empty afterwards (nothing stays loaded or copied). The suite works
 * in a fresh directory under the build tree (not /tmp, which may be
 * mounted noexec) and removes it at the end.
 */
#include <CUnit/CUnit.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loader/plugin.h"
#include "loader/plugin_internal.h"
#include "elf_corrupt.h"
#include "unit/suites.h"
#include "unit/test_util.h"

/* libtool puts the real modules in .libs/. */
#define PLUGIN_DIR KS_TEST_BUILDDIR "/tests/plugins"
#define PLUGIN(name) PLUGIN_DIR "/.libs/" name ".so"

/* The suite's scratch directory; the loader's copies go in copy_dir. */
static struct {
    char dir[4096];
    char copy_dir[4096 + 64];
} fx;

/* ---- a fake host: forward() and buf_set() capture into test structs -- */

typedef struct capture {
    int forwarded;
    char value[256];
    size_t value_len;
    int tombstone;
} capture;

typedef struct fake_buf {
    unsigned char data[64];
    size_t len;
} fake_buf;

static int fake_forward(ks_ctx *ctx, const ks_record *rec)
{
    capture *c = (capture *)(void *)ctx;
    c->forwarded++;
    c->tombstone = rec->value == NULL;
    if (rec->value_len > sizeof c->value)
        return KS_ERR_TOO_LARGE;
    if (rec->value_len)
        memcpy(c->value, rec->value, rec->value_len);
    c->value_len = rec->value_len;
    return 0;
}

static int fake_buf_set(ks_buf *buf, const void *data, size_t len)
{
    fake_buf *b = (fake_buf *)(void *)buf;
    if (len > sizeof b->data)
        return KS_ERR_TOO_LARGE;
    memcpy(b->data, data, len);
    b->len = len;
    return 0;
}

static const ks_host_api fake_api = {
    .struct_size = sizeof(ks_host_api),
    .abi_major = KS_ABI_MAJOR,
    .abi_minor = KS_ABI_MINOR,
    .forward = fake_forward,
    .buf_set = fake_buf_set,
};

/* ---- helpers --------------------------------------------------------- */

static int rm_entry(const char *path, const struct stat *st, int flag,
                    struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static int suite_init(void)
{
    snprintf(fx.dir, sizeof fx.dir, "%s", KS_TEST_BUILDDIR "/tests/plugin-test-XXXXXX");
    if (!mkdtemp(fx.dir))
        return -1;
    /* Two levels that do not exist yet: the loader creates them. */
    snprintf(fx.copy_dir, sizeof fx.copy_dir, "%s/copies/private", fx.dir);
    return 0;
}

static int suite_cleanup(void)
{
    if (fx.dir[0])
        nftw(fx.dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* Entries in the copy directory (0 when it does not exist). */
static int count_copies(void)
{
    DIR *d = opendir(fx.copy_dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 65536;
            unsigned char *grown = realloc(buf, cap);
            if (!grown) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = grown;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    fclose(f);
    *len = n;
    return buf;
}

static int spill(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t put = len ? fwrite(data, 1, len, f) : 0;
    return fclose(f) == 0 && put == len ? 0 : -1;
}

static uint64_t fnv1a64(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3u;
    }
    return h;
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Compare strings; print both on mismatch so a failure says why. */
static int same_text(const char *got, const char *want)
{
    if (got && want && strcmp(got, want) == 0)
        return 1;
    fprintf(stderr, "\n  got:  %s\n  want: %s\n", got ? got : "(null)",
            want ? want : "(null)");
    return 0;
}
#define ASSERT_TEXT(got, want) CU_ASSERT(same_text((got), (want)))

/* Open `path`, expect a refusal with exactly `want`, nothing left over. */
static void expect_refusal(const char *path, const char *want)
{
    char err[1024] = "";
    ks_plugin *pl = (ks_plugin *)&pl; /* must be reset to NULL */
    CU_ASSERT_EQUAL(ks_plugin_open(path, fx.copy_dir, &fake_api, &pl, err,
                                   sizeof err),
                    -1);
    CU_ASSERT_PTR_NULL(pl);
    ASSERT_TEXT(err, want);
    CU_ASSERT_EQUAL(count_copies(), 0);
}

static ks_plugin *open_ok(const char *path)
{
    char err[1024] = "";
    ks_plugin *pl = NULL;
    int rc = ks_plugin_open(path, fx.copy_dir, &fake_api, &pl, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "\n  %s\n", err);
    CU_ASSERT_EQUAL(rc, 0);
    return pl;
}

/* ---- loading the good build ------------------------------------------ */

static void test_open_good(void)
{
    const char *path = PLUGIN("good");
    ks_plugin *pl = open_ok(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pl);

    const ks_plugin_descriptor *d = pl->desc;
    CU_ASSERT_STRING_EQUAL(d->name, "good");
    CU_ASSERT_STRING_EQUAL(d->version, "1.0.0");
    CU_ASSERT_PTR_NOT_NULL(d->build_id);
    CU_ASSERT_EQUAL(d->abi_major, KS_ABI_MAJOR);
    CU_ASSERT_EQUAL(d->processor_count, 2);
    CU_ASSERT_EQUAL(d->function_count, 1);
    CU_ASSERT_STRING_EQUAL(pl->path, path);
    CU_ASSERT(pl->loaded_at > 0);
    CU_ASSERT_EQUAL(pl->refs, 0);

    /* The private copy: <copy_dir>/good-<fnv1a64>-<pid>.so */
    size_t len = 0;
    unsigned char *bytes = slurp(path, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bytes);
    char want[8192];
    snprintf(want, sizeof want, "%s/good-%016llx-%ld.so", fx.copy_dir,
             (unsigned long long)fnv1a64(bytes, len), (long)getpid());
    free(bytes);
    CU_ASSERT_STRING_NOT_EQUAL(pl->copy_path, pl->path);
    ASSERT_TEXT(pl->copy_path, want);
    CU_ASSERT(file_exists(pl->copy_path));
    CU_ASSERT_EQUAL(count_copies(), 1);

    /* Lookups. */
    const ks_processor_type *upper = ks_plugin_processor(pl, "upper");
    const ks_processor_type *pass = ks_plugin_processor(pl, "pass");
    CU_ASSERT_PTR_NOT_NULL_FATAL(upper);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pass);
    CU_ASSERT_STRING_EQUAL(upper->name, "upper");
    CU_ASSERT_STRING_EQUAL(pass->name, "pass");
    CU_ASSERT_PTR_NULL(ks_plugin_processor(pl, "sum"));
    CU_ASSERT_PTR_NULL(ks_plugin_processor(pl, "UPPER"));
    CU_ASSERT_PTR_NULL(ks_plugin_processor(pl, NULL));
    const ks_function *sum = ks_plugin_function(pl, "sum");
    CU_ASSERT_PTR_NOT_NULL_FATAL(sum);
    CU_ASSERT_EQUAL(sum->kind, KS_FN_REDUCER);
    CU_ASSERT_PTR_NULL(ks_plugin_function(pl, "upper"));
    CU_ASSERT_PTR_NULL(ks_plugin_processor(NULL, "upper"));
    CU_ASSERT_PTR_NULL(ks_plugin_function(NULL, "sum"));

    /* Run the code of the image through the fake host. */
    capture cap = {0};
    ks_ctx *ctx = (ks_ctx *)(void *)&cap;
    void *state = NULL;
    CU_ASSERT_EQUAL_FATAL(upper->init(ctx, &state), KS_OK);
    ks_record rec = {.key = "k", .key_len = 1, .value = "Hello, world",
                     .value_len = 12, .partition = -1, .offset = -1};
    CU_ASSERT_EQUAL(upper->process(ctx, state, &rec), KS_OK);
    CU_ASSERT_EQUAL(cap.forwarded, 1);
    CU_ASSERT_EQUAL(cap.value_len, 12);
    CU_ASSERT_NSTRING_EQUAL(cap.value, "HELLO, WORLD", 12);
    ks_record tomb = {.key = "k", .key_len = 1, .partition = -1,
                      .offset = -1};
    CU_ASSERT_EQUAL(upper->process(ctx, state, &tomb), KS_OK);
    CU_ASSERT_EQUAL(cap.forwarded, 2);
    CU_ASSERT(cap.tombstone);
    upper->close(ctx, state);

    memset(&cap, 0, sizeof cap);
    CU_ASSERT_EQUAL_FATAL(pass->init(ctx, &state), KS_OK);
    CU_ASSERT_EQUAL(pass->process(ctx, state, &rec), KS_OK);
    CU_ASSERT_EQUAL(cap.forwarded, 1);
    CU_ASSERT_NSTRING_EQUAL(cap.value, "Hello, world", 12);
    CU_ASSERT_PTR_NULL(pass->close);

    ks_reducer_fn reduce = (ks_reducer_fn)sum->fn;
    unsigned char a[8], b[8];
    ks_int64_encode(5, a);
    ks_int64_encode(-12, b);
    fake_buf out = {{0}, 0};
    ks_bytes key = {"k", 1}, acc = {a, 8}, val = {b, 8}, bad = {b, 3};
    CU_ASSERT_EQUAL(reduce(&fake_api, key, acc, val, (ks_buf *)(void *)&out),
                    KS_OK);
    CU_ASSERT_EQUAL_FATAL(out.len, 8);
    CU_ASSERT_EQUAL(ks_int64_decode(out.data), -7);
    CU_ASSERT_EQUAL(reduce(&fake_api, key, acc, bad, (ks_buf *)(void *)&out),
                    KS_SKIP);

    /* Closing removes the copy. */
    char *copy = strdup(pl->copy_path);
    ks_plugin_close(pl);
    CU_ASSERT(!file_exists(copy));
    CU_ASSERT_EQUAL(count_copies(), 0);
    free(copy);
    ks_plugin_close(NULL); /* allowed */
}

/* The same file twice: two private copies, two images. */
static void test_open_twice(void)
{
    ks_plugin *one = open_ok(PLUGIN("good"));
    ks_plugin *two = open_ok(PLUGIN("good"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(one);
    CU_ASSERT_PTR_NOT_NULL_FATAL(two);
    CU_ASSERT_PTR_NOT_EQUAL(one->handle, two->handle);
    CU_ASSERT_PTR_NOT_EQUAL(one->desc, two->desc);
    CU_ASSERT_STRING_NOT_EQUAL(one->copy_path, two->copy_path);
    /* The second takes the next free name: same hash and pid, then "-1". */
    size_t n1 = strlen(one->copy_path) - 3, n2 = strlen(two->copy_path);
    CU_ASSERT(n2 == n1 + 5 &&
              strncmp(one->copy_path, two->copy_path, n1) == 0 &&
              strcmp(two->copy_path + n1, "-1.so") == 0);
    CU_ASSERT_EQUAL(count_copies(), 2);
    const ks_function *f1 = ks_plugin_function(one, "sum");
    const ks_function *f2 = ks_plugin_function(two, "sum");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f2);
    CU_ASSERT_PTR_NOT_EQUAL(f1->fn, f2->fn);

    /* Closing one leaves the other working. */
    char *copy1 = strdup(one->copy_path);
    ks_plugin_close(one);
    CU_ASSERT(!file_exists(copy1));
    CU_ASSERT(file_exists(two->copy_path));
    free(copy1);
    unsigned char a[8], b[8];
    ks_int64_encode(40, a);
    ks_int64_encode(2, b);
    fake_buf out = {{0}, 0};
    ks_bytes key = {"k", 1}, acc = {a, 8}, val = {b, 8};
    CU_ASSERT_EQUAL(((ks_reducer_fn)f2->fn)(&fake_api, key, acc, val,
                                            (ks_buf *)(void *)&out),
                    KS_OK);
    CU_ASSERT_EQUAL(ks_int64_decode(out.data), 42);
    ks_plugin_close(two);
    CU_ASSERT_EQUAL(count_copies(), 0);
}

/* A processor whose init fails still loads: the runtime refuses it. */
static void test_open_initfail(void)
{
    ks_plugin *pl = open_ok(PLUGIN("initfail"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pl);
    const ks_processor_type *boom = ks_plugin_processor(pl, "boom");
    CU_ASSERT_PTR_NOT_NULL_FATAL(boom);
    capture cap = {0};
    void *state = &cap;
    CU_ASSERT_EQUAL(boom->init((ks_ctx *)(void *)&cap, &state), KS_FATAL);
    ks_plugin_close(pl);
    CU_ASSERT_EQUAL(count_copies(), 0);
}

/* ---- refusals of the descriptor -------------------------------------- */

static void test_refuse_descriptor(void)
{
    char want[2048];

    snprintf(want, sizeof want, "%s: no entry symbol 'ks_plugin_entry' (is it "
             "exported? build with KS_EXPORT)", PLUGIN("noentry"));
    expect_refusal(PLUGIN("noentry"), want);

    snprintf(want, sizeof want, "%s: bad magic 0x12345678 (expected "
             "0x4b53504c): not a kstreams plugin", PLUGIN("badmagic"));
    expect_refusal(PLUGIN("badmagic"), want);

    snprintf(want, sizeof want, "%s: ABI major 2, engine supports %d: rebuild "
             "the plugin against this engine's kstreams.h", PLUGIN("major2"),
             KS_ABI_MAJOR);
    expect_refusal(PLUGIN("major2"), want);

    snprintf(want, sizeof want, "%s: ABI %d.%d is newer than the engine's "
             "%d.%d: upgrade the engine", PLUGIN("minor_newer"), KS_ABI_MAJOR,
             KS_ABI_MINOR + 1, KS_ABI_MAJOR, KS_ABI_MINOR);
    expect_refusal(PLUGIN("minor_newer"), want);

    snprintf(want, sizeof want, "%s: plugin name \"Bad-Name\" is not valid "
             "(expected [a-z0-9_]+, at most 64 characters)", PLUGIN("noname"));
    expect_refusal(PLUGIN("noname"), want);

    snprintf(want, sizeof want, "%s: processors[1]: name \"twice\" is already "
             "used by processors[0]", PLUGIN("dupproc"));
    expect_refusal(PLUGIN("dupproc"), want);

    /* kind 6 (KS_FN_JOINER) came with 1.4 */
    snprintf(want, sizeof want, "%s: function \"concat\": kind 6 is not a "
             "ks_function_kind of ABI 1.3 (1..5)", PLUGIN("joiner_old"));
    expect_refusal(PLUGIN("joiner_old"), want);
}

/* dlopen itself fails: the message carries dlerror(). */
/* Counts are bounded before any table is read (found by fuzz_descriptor:
 * a function_count past its table was read past it). */
static ks_verdict noop_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    (void)ctx, (void)state, (void)rec;
    return KS_OK;
}

static void test_refuse_counts(void)
{
    static const ks_processor_type pt = {.struct_size = sizeof pt, .name = "p",
                                         .process = noop_process, .config_count = 100000};
    static const ks_processor_type *const pts[] = {&pt};
    ks_plugin_descriptor d = {KS_DESCRIPTOR_HEADER, .name = "x", .version = "1",
                              .build_id = "b", .processors = pts, .processor_count = 1};
    char err[256] = "";
    CU_ASSERT_EQUAL(ks_loader_check_descriptor("x.so", &d, err, sizeof err), -1);
    CU_ASSERT_STRING_EQUAL(err, "x.so: processor \"p\": config_count 100000 is over the "
                                "limit of 256");
    d.processor_count = (size_t)-1;
    CU_ASSERT_EQUAL(ks_loader_check_descriptor("x.so", &d, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "processor_count 18446744073709551615 is over the "
                                       "limit of 256"));
    static const ks_function fns[] = {{"f", KS_FN_INITIALIZER, (void (*)(void))noop_process}};
    d.processor_count = 0;
    d.functions = fns;
    d.function_count = 1025;
    CU_ASSERT_EQUAL(ks_loader_check_descriptor("x.so", &d, err, sizeof err), -1);
    CU_ASSERT_STRING_EQUAL(err, "x.so: function_count 1025 is over the limit of 1024");
}

static void test_refuse_dlopen(void)
{
    char err[1024] = "";
    ks_plugin *pl = NULL;
    CU_ASSERT_EQUAL(ks_plugin_open(PLUGIN("undefsym"), fx.copy_dir, &fake_api,
                                   &pl, err, sizeof err),
                    -1);
    CU_ASSERT_PTR_NULL(pl);
    const char *prefix = PLUGIN("undefsym") ": dlopen failed: ";
    const char *suffix = "undefined symbol: ks_not_in_any_library";
    size_t n = strlen(err), ns = strlen(suffix);
    if (strncmp(err, prefix, strlen(prefix)) != 0 || n < ns ||
        strcmp(err + n - ns, suffix) != 0)
        fprintf(stderr, "\n  got: %s\n", err);
    CU_ASSERT_NSTRING_EQUAL(err, prefix, strlen(prefix));
    CU_ASSERT(n >= ns && strcmp(err + n - ns, suffix) == 0);
    CU_ASSERT_EQUAL(count_copies(), 0);
}

/* ---- refusals of the file -------------------------------------------- */

static void test_refuse_file(void)
{
    char path[8192], want[16384];

    snprintf(path, sizeof path, "%s/missing.so", fx.dir);
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory",
             path);
    expect_refusal(path, want);

    snprintf(want, sizeof want, "%s: not a regular file", fx.dir);
    expect_refusal(fx.dir, want);

    snprintf(path, sizeof path, "%s/text.so", fx.dir);
    CU_ASSERT_EQUAL_FATAL(spill(path, "not a plugin\n", 13), 0);
    snprintf(want, sizeof want, "%s: not an ELF file (expected the magic "
             "7f 45 4c 46 at offset 0)", path);
    expect_refusal(path, want);

    snprintf(path, sizeof path, "%s/empty.so", fx.dir);
    CU_ASSERT_EQUAL_FATAL(spill(path, "", 0), 0);
    snprintf(want, sizeof want, "%s: not a complete ELF shared object "
             "(truncated? file is 0 bytes, the ELF header ends at 64)", path);
    expect_refusal(path, want);

    size_t len = 0;
    unsigned char *good = slurp(PLUGIN("good"), &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(good);
    CU_ASSERT_FATAL(len > sizeof(Elf64_Ehdr));
    Elf64_Ehdr eh;
    memcpy(&eh, good, sizeof eh);

    /* Half a build, as a compiler still writing it leaves it: the section
     * header table (written last) lies past the end. Never dlopen'ed. */
    snprintf(path, sizeof path, "%s/half.so", fx.dir);
    CU_ASSERT_EQUAL_FATAL(spill(path, good, len / 2), 0);
    unsigned long long sh_end =
        (unsigned long long)eh.e_shoff +
        (unsigned long long)eh.e_shnum * eh.e_shentsize;
    CU_ASSERT_FATAL(sh_end > len / 2);
    snprintf(want, sizeof want, "%s: not a complete ELF shared object "
             "(truncated? file is %zu bytes, section headers end at %llu)",
             path, len / 2, sh_end);
    expect_refusal(path, want);

    /* Only the first 40 bytes of the ELF header. */
    snprintf(path, sizeof path, "%s/header.so", fx.dir);
    CU_ASSERT_EQUAL_FATAL(spill(path, good, 40), 0);
    snprintf(want, sizeof want, "%s: not a complete ELF shared object "
             "(truncated? file is 40 bytes, the ELF header ends at 64)", path);
    expect_refusal(path, want);

    /* A 32-bit class byte. */
    snprintf(path, sizeof path, "%s/class32.so", fx.dir);
    good[EI_CLASS] = ELFCLASS32;
    CU_ASSERT_EQUAL_FATAL(spill(path, good, len), 0);
    good[EI_CLASS] = ELFCLASS64;
    snprintf(want, sizeof want, "%s: not a 64-bit ELF file (EI_CLASS 1, "
             "expected ELFCLASS64 2)", path);
    expect_refusal(path, want);

    /* An executable, not a shared object. */
    snprintf(path, sizeof path, "%s/exec.so", fx.dir);
    Elf64_Half type = ET_EXEC;
    memcpy(good + offsetof(Elf64_Ehdr, e_type), &type, sizeof type);
    CU_ASSERT_EQUAL_FATAL(spill(path, good, len), 0);
    snprintf(want, sizeof want, "%s: not a shared object (ELF type 2, "
             "expected ET_DYN 3)", path);
    expect_refusal(path, want);
    free(good);
}

/* ---- finding plugins ------------------------------------------------- */

static void test_find(void)
{
    char out[8192], shadow[8192];
    char *dirs[3];

    /* Paths are returned as they are. */
    CU_ASSERT_EQUAL(ks_plugin_find("./x/count", NULL, 0, out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, "./x/count");
    CU_ASSERT_EQUAL(ks_plugin_find("count.so", NULL, 0, out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, "count.so");
    CU_ASSERT_EQUAL(ks_plugin_find("", NULL, 0, out, sizeof out), -1);

    const char *saved = getenv("KSTREAMS_PLUGIN_PATH");
    char *saved_copy = saved ? strdup(saved) : NULL;
    unsetenv("KSTREAMS_PLUGIN_PATH");

    /* A libtool build directory: found in .libs/. */
    dirs[0] = "/nonexistent-kstreams-dir";
    dirs[1] = PLUGIN_DIR;
    CU_ASSERT_EQUAL(ks_plugin_find("good", dirs, 2, out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, PLUGIN("good"));
    dirs[1] = PLUGIN_DIR "/";
    CU_ASSERT_EQUAL(ks_plugin_find("good", dirs, 2, out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, PLUGIN("good"));

    /* The first dir holding NAME.so wins; directories do not count. */
    snprintf(shadow, sizeof shadow, "%s/good.so", fx.dir);
    CU_ASSERT_EQUAL_FATAL(spill(shadow, "", 0), 0);
    char dirplug[8192];
    snprintf(dirplug, sizeof dirplug, "%s/dirplug.so", fx.dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(dirplug, 0700), 0);
    dirs[0] = fx.dir;
    dirs[1] = PLUGIN_DIR;
    CU_ASSERT_EQUAL(ks_plugin_find("good", dirs, 2, out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, shadow);
    CU_ASSERT_EQUAL(ks_plugin_find("dirplug", dirs, 1, out, sizeof out), -1);

    /* Not found; and an answer that does not fit is not an answer. */
    CU_ASSERT_EQUAL(ks_plugin_find("no_such_plugin_xyz", dirs, 2, out,
                                   sizeof out), -1);
    CU_ASSERT_EQUAL(ks_plugin_find("good", dirs, 2, out, 8), -1);

    /* $KSTREAMS_PLUGIN_PATH after dirs, empty entries skipped. */
    setenv("KSTREAMS_PLUGIN_PATH", "/nonexistent-kstreams-dir::" PLUGIN_DIR,
           1);
    CU_ASSERT_EQUAL(ks_plugin_find("good", NULL, 0, out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, PLUGIN("good"));
    CU_ASSERT_EQUAL(ks_plugin_find("good", dirs, 1, out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, shadow);
    CU_ASSERT_EQUAL(ks_plugin_find("no_such_plugin_xyz", NULL, 0, out,
                                   sizeof out), -1);

    if (saved_copy)
        setenv("KSTREAMS_PLUGIN_PATH", saved_copy, 1);
    else
        unsetenv("KSTREAMS_PLUGIN_PATH");
    free(saved_copy);
    unlink(shadow);
    rmdir(dirplug);
}

/* A private copy left by a process that died (kill -9) is removed at the
 * next start; copies of live processes and other files stay. */
static void test_prune_copies(void)
{
    char dir[] = "/tmp/ks-test-copies-XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0); /* its pid now names no process */
    char names[6][128];
    snprintf(names[0], sizeof names[0], "count-0123456789abcdef-%ld.so", (long)child);
    snprintf(names[1], sizeof names[1], "my-plugin-0123456789abcdef-%ld-2.so", (long)child);
    snprintf(names[2], sizeof names[2], ".count-0123456789abcdef-%ld.Ab12Cd", (long)child);
    snprintf(names[3], sizeof names[3], "count-0123456789abcdef-%ld.so", (long)getpid());
    snprintf(names[4], sizeof names[4], "count-0123456789abcdef-1.so"); /* init lives */
    snprintf(names[5], sizeof names[5], "notes.txt");
    char path[1024];
    for (int i = 0; i < 6; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "w");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fclose(f);
    }
    CU_ASSERT_EQUAL(ks_plugin_copies_prune(dir), 3);
    for (int i = 0; i < 6; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        CU_ASSERT_EQUAL(access(path, F_OK) == 0, i >= 3);
        unlink(path);
    }
    rmdir(dir);
    CU_ASSERT_EQUAL(ks_plugin_copies_prune("/nonexistent/ks-copies"), 0);
}

/* ---- the pre-flight: a trial load in a helper process ---------------- */

/* Expect the refusal "PLUGIN(name): `what`". */
static void expect_trial_refusal(const char *name, const char *what)
{
    char path[4096], want[8192];
    snprintf(path, sizeof path, PLUGIN_DIR "/.libs/%s.so", name);
    snprintf(want, sizeof want, "%s: %s", path, what);
    expect_refusal(path, want);
}

/* A build with valid ELF headers and a garbage dynamic section: without
 * the pre-flight ks_plugin_open kills its process with SIGSEGV in dlopen
 * (checked in a forked child: what `kstreams check` and hot reload did
 * before, exit 139); with it, a one-line refusal. */
static void test_trial_corrupt_dynamic(void)
{
    char path[8192], child_copies[8192], want[16384];
    snprintf(path, sizeof path, "%s/corrupt.so", fx.dir);
    snprintf(child_copies, sizeof child_copies, "%s/child-copies", fx.dir);
    CU_ASSERT_EQUAL_FATAL(ks_test_write_corrupt(PLUGIN("good"), path), 0);

    pid_t child = fork();
    CU_ASSERT_FATAL(child >= 0);
    if (child == 0) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        ks_loader_default_crash_signals(); /* under ASan too: die by the signal */
        ks_plugin_set_trial(NULL, 0);
        ks_plugin *pl = NULL;
        char err[1024];
        int rc = ks_plugin_open(path, child_copies, &fake_api, &pl, err, sizeof err);
        _exit(rc == 0 ? 0 : 3);
    }
    int st = 0;
    CU_ASSERT_EQUAL(waitpid(child, &st, 0), child);
    CU_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);

    snprintf(want, sizeof want, "%s: trial load crashed (SIGSEGV in dlopen); refused", path);
    expect_refusal(path, want);
}

/* Constructors and the entry point run first in the helper: a crash, an
 * exit (quoting the last line printed) or a hang there refuses the build,
 * naming the step. */
static void test_trial_constructors(void)
{
    expect_trial_refusal("ctor_abort", "trial load crashed (SIGABRT in dlopen); refused");
    expect_trial_refusal("ctor_segv", "trial load crashed (SIGSEGV in dlopen); refused");
    expect_trial_refusal("ctor_exit", "trial load exited with status 3 in dlopen: "
                                      "ctor_exit: giving up; refused");
    expect_trial_refusal("entry_segv",
                         "trial load crashed (SIGSEGV in ks_plugin_entry); refused");
    ks_plugin_set_trial("/proc/self/exe", 1000);
    expect_trial_refusal("ctor_hang", "trial load did not finish within 1000 ms "
                                      "(hung in dlopen); killed and refused");
    ks_plugin_set_trial("/nonexistent/kstreams", 0);
    expect_trial_refusal("good", "cannot start the trial load (/nonexistent/kstreams): "
                                 "No such file or directory; refused");
    ks_plugin_set_trial("/proc/self/exe", KS_PLUGIN_TRIAL_TIMEOUT_MS);
}

void ks_test_register_plugin(void)
{
    CU_pSuite s = CU_add_suite("plugin", suite_init, suite_cleanup);
    if (!s)
        return;
    CU_add_test(s, "open good build", test_open_good);
    CU_add_test(s, "same build twice: two images", test_open_twice);
    CU_add_test(s, "init failing type loads", test_open_initfail);
    CU_add_test(s, "refuse bad descriptors", test_refuse_descriptor);
    CU_add_test(s, "refuse counts past the bounds", test_refuse_counts);
    CU_add_test(s, "refuse when dlopen fails", test_refuse_dlopen);
    CU_add_test(s, "refuse incomplete or foreign files", test_refuse_file);
    CU_add_test(s, "find plugins", test_find);
    CU_add_test(s, "copies left by dead processes are pruned", test_prune_copies);
    CU_add_test(s, "pre-flight refuses a garbage dynamic section",
                test_trial_corrupt_dynamic);
    CU_add_test(s, "pre-flight refuses crashing or hanging constructors",
                test_trial_constructors);
}
