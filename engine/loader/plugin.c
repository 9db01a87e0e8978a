/*
 * plugin.c - loading plugin builds from private copies and checking them.
 *
 * Owns: each ks_plugin, its dlopen handle and its private copy on disk.
 *
 * Invariants:
 *  - The bytes that are checked are the bytes that are dlopen'ed: the build
 *    is read once into memory (read(2), never mmap: a file truncated under
 *    an mmap raises SIGBUS), checked as ELF there, hashed, and written to a
 *    new file that only this process knows about.
 *  - Every copy has a name no loaded image has (glibc's dlopen returns the
 *    old image for a path, hard link or inode it already has loaded): it is
 *    moved into place with a rename that refuses to replace, and gets a
 *    "-N" suffix when the plain name is taken (the same build loaded twice).
 *  - Before dlopen the file is a complete ELF64 shared object for this host:
 *    headers, program header table, section header table, every loadable
 *    segment and every section with contents lie inside the file. A partly
 *    written .so can SIGBUS the host inside dlopen (glibc 2.36).
 *  - The only plugin code run before the descriptor is checked is its entry
 *    point. Checks run in the order plugin.h states; the first failure is
 *    reported as one line naming the path and the field.
 *  - On every failure nothing stays loaded, copied or allocated.
 *
 * No process-wide state. Thread-safe as far as dlopen/dlerror are (dlerror
 * is per thread in glibc).
 */
#include "loader/plugin.h"
#include "base/fs.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef KS_PLUGIN_DIR
#define KS_PLUGIN_DIR "/usr/local/lib/kstreams/plugins"
#endif

/* A build larger than this is refused rather than read into memory. */
#define PLUGIN_MAX_BYTES ((size_t)1 << 30)

/* Longest plugin, processor type or function name accepted. Names appear
 * in YAML, metric names and log lines. */
#define PLUGIN_NAME_MAX 64

/* Sizes of the ABI 1.0 structs: what every 1.x plugin has at least. Written
 * as "end of the last 1.0 member" so they stay right when members are
 * appended in later minors. */
#define DESCRIPTOR_V1_SIZE                                                   \
    (offsetof(ks_plugin_descriptor, function_count) + sizeof(size_t))
#define PROCESSOR_V1_SIZE                                                    \
    (offsetof(ks_processor_type, migrate) +                                  \
     sizeof(((ks_processor_type *)0)->migrate))

/* ------------------------------------------------------------------ */
/* Small helpers                                                       */
/* ------------------------------------------------------------------ */

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    KS_PRINTF(3, 4);

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

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

/* [a-z0-9_]{1,PLUGIN_NAME_MAX}. Reads at most PLUGIN_NAME_MAX + 1 bytes. */
static int name_valid(const char *s)
{
    size_t i = 0;
    for (; i <= PLUGIN_NAME_MAX && s[i]; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
            return 0;
    }
    return i > 0 && i <= PLUGIN_NAME_MAX;
}

/* Copy a plugin-supplied string for an error line: at most 64 characters,
 * non-printable bytes as '?', so a broken name cannot break the one-line
 * rule or run on forever. */
static const char *printable(const char *s, char buf[72])
{
    size_t i = 0;
    for (; i < 64 && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[i] = (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
    }
    if (s[i]) {
        memcpy(buf + i, "...", 3);
        i += 3;
    }
    buf[i] = '\0';
    return buf;
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
/* Reading and checking the file                                       */
/* ------------------------------------------------------------------ */

/* Read the regular file `path` into a new buffer. */
static int read_build(const char *path, unsigned char **out, size_t *outlen,
                      char *err, size_t errlen)
{
    /* O_NONBLOCK: opening a FIFO must not hang; no effect on regular files. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        set_err(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        set_err(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    if ((uint64_t)st.st_size > PLUGIN_MAX_BYTES) {
        set_err(err, errlen, "%s: file is %lld bytes, more than the %zu a "
                "plugin may have", path, (long long)st.st_size,
                PLUGIN_MAX_BYTES);
        close(fd);
        return -1;
    }
    /* The size from fstat is a hint: the file may still be growing. */
    size_t cap = (size_t)st.st_size + 1, len = 0;
    unsigned char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            set_err(err, errlen, "%s: out of memory reading the file", path);
            close(fd);
            return -1;
        }
        if (len == cap) {
            if (cap > PLUGIN_MAX_BYTES) {
                set_err(err, errlen, "%s: file is more than the %zu bytes a "
                        "plugin may have", path, PLUGIN_MAX_BYTES);
                free(buf);
                close(fd);
                return -1;
            }
            unsigned char *grown = realloc(buf, cap * 2);
            if (!grown)
                free(buf);
            buf = grown;
            cap *= 2;
            continue;
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            set_err(err, errlen, "%s: cannot read: %s", path, strerror(errno));
            free(buf);
            close(fd);
            return -1;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    *out = buf;
    *outlen = len;
    return 0;
}

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_ELFDATA ELFDATA2LSB
#else
#define HOST_ELFDATA ELFDATA2MSB
#endif

#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#elif defined(__riscv) && __riscv_xlen == 64
#define HOST_MACHINE EM_RISCV
#elif defined(__powerpc64__)
#define HOST_MACHINE EM_PPC64
#elif defined(__s390x__)
#define HOST_MACHINE EM_S390
#endif

/* `off + count * size` into *end; 0 (and *end = UINT64_MAX) on overflow. */
static int table_end(uint64_t off, uint64_t count, uint64_t size,
                     uint64_t *end)
{
    *end = UINT64_MAX;
    if (size != 0 && count > UINT64_MAX / size)
        return 0;
    if (off > UINT64_MAX - count * size)
        return 0;
    *end = off + count * size;
    return 1;
}

#define TRUNCATED "%s: not a complete ELF shared object (truncated? file is %zu bytes, "

/*
 * Check that buf[0..len) is a complete ELF64 shared object for this host.
 * All reads go through memcpy: the buffer's offsets come from the file and
 * need not be aligned.
 */
static int check_elf(const char *path, const unsigned char *buf, size_t len,
                     char *err, size_t errlen)
{
    size_t m = len < SELFMAG ? len : SELFMAG;
    if (memcmp(buf, ELFMAG, m) != 0) {
        set_err(err, errlen, "%s: not an ELF file (expected the magic "
                "7f 45 4c 46 at offset 0)", path);
        return -1;
    }
    if (len < sizeof(Elf64_Ehdr)) {
        set_err(err, errlen, TRUNCATED "the ELF header ends at %zu)", path,
                len, sizeof(Elf64_Ehdr));
        return -1;
    }
    Elf64_Ehdr eh;
    memcpy(&eh, buf, sizeof eh);
    if (eh.e_ident[EI_CLASS] != ELFCLASS64) {
        set_err(err, errlen, "%s: not a 64-bit ELF file (EI_CLASS %u, "
                "expected ELFCLASS64 %u)", path,
                (unsigned)eh.e_ident[EI_CLASS], (unsigned)ELFCLASS64);
        return -1;
    }
    if (eh.e_ident[EI_DATA] != HOST_ELFDATA) {
        set_err(err, errlen, "%s: ELF byte order %u does not match this "
                "host's %u", path, (unsigned)eh.e_ident[EI_DATA],
                (unsigned)HOST_ELFDATA);
        return -1;
    }
    if (eh.e_type != ET_DYN) {
        set_err(err, errlen, "%s: not a shared object (ELF type %u, expected "
                "ET_DYN %u)", path, (unsigned)eh.e_type, (unsigned)ET_DYN);
        return -1;
    }
#ifdef HOST_MACHINE
    if (eh.e_machine != HOST_MACHINE) {
        set_err(err, errlen, "%s: built for ELF machine %u, this host is %u: "
                "build the plugin for this architecture", path,
                (unsigned)eh.e_machine, (unsigned)HOST_MACHINE);
        return -1;
    }
#endif

    /* Program headers: the loader maps PT_LOAD segments straight from the
     * file; a segment past the end of the file is the SIGBUS case. */
    if (eh.e_phnum == 0 || eh.e_phentsize != sizeof(Elf64_Phdr)) {
        set_err(err, errlen, "%s: not a loadable ELF shared object (%u "
                "program headers of %u bytes, expected at least one of %zu)",
                path, (unsigned)eh.e_phnum, (unsigned)eh.e_phentsize,
                sizeof(Elf64_Phdr));
        return -1;
    }
    uint64_t end;
    if (!table_end(eh.e_phoff, eh.e_phnum, eh.e_phentsize, &end) ||
        end > len) {
        set_err(err, errlen, TRUNCATED "program headers end at %llu)", path,
                len, (unsigned long long)end);
        return -1;
    }

    /* Section headers are written last by linkers: the first thing a
     * half-written file lacks. e_shoff 0 means none (a stripped-down
     * file), which the loader does not need. */
    uint64_t shnum = eh.e_shnum;
    if (eh.e_shoff != 0) {
        if (eh.e_shentsize != sizeof(Elf64_Shdr)) {
            set_err(err, errlen, "%s: bad ELF section header size %u "
                    "(expected %zu)", path, (unsigned)eh.e_shentsize,
                    sizeof(Elf64_Shdr));
            return -1;
        }
        if (shnum == 0) { /* extended numbering: count in section 0 */
            if (!table_end(eh.e_shoff, 1, sizeof(Elf64_Shdr), &end) ||
                end > len) {
                set_err(err, errlen, TRUNCATED "section headers end at "
                        "%llu)", path, len, (unsigned long long)end);
                return -1;
            }
            Elf64_Shdr sh0;
            memcpy(&sh0, buf + eh.e_shoff, sizeof sh0);
            shnum = sh0.sh_size;
        }
        if (!table_end(eh.e_shoff, shnum, sizeof(Elf64_Shdr), &end) ||
            end > len) {
            set_err(err, errlen, TRUNCATED "section headers end at %llu)",
                    path, len, (unsigned long long)end);
            return -1;
        }
    } else {
        shnum = 0;
    }

    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, buf + eh.e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
        if (ph.p_type != PT_LOAD && ph.p_type != PT_DYNAMIC)
            continue;
        if (!table_end(ph.p_offset, 1, ph.p_filesz, &end) || end > len) {
            set_err(err, errlen, TRUNCATED "segment %u ends at %llu)", path,
                    len, i, (unsigned long long)end);
            return -1;
        }
    }
    for (uint64_t i = 0; i < shnum; i++) {
        Elf64_Shdr sh;
        memcpy(&sh, buf + eh.e_shoff + i * sizeof sh, sizeof sh);
        if (sh.sh_type == SHT_NOBITS || sh.sh_type == SHT_NULL)
            continue;
        if (!table_end(sh.sh_offset, 1, sh.sh_size, &end) || end > len) {
            set_err(err, errlen, TRUNCATED "section %llu ends at %llu)", path,
                    len, (unsigned long long)i, (unsigned long long)end);
            return -1;
        }
    }
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
static int write_copy(const char *path, const char *copy_dir,
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

/* ------------------------------------------------------------------ */
/* Descriptor checks                                                   */
/* ------------------------------------------------------------------ */

static int check_processors(const char *path, const ks_plugin_descriptor *d,
                            char *err, size_t errlen)
{
    char b1[72], b2[72];
    if (d->processor_count > 0 && !d->processors) {
        set_err(err, errlen, "%s: processors is NULL but processor_count is "
                "%zu", path, d->processor_count);
        return -1;
    }
    for (size_t i = 0; i < d->processor_count; i++) {
        const ks_processor_type *p = d->processors[i];
        if (!p) {
            set_err(err, errlen, "%s: processors[%zu] is NULL", path, i);
            return -1;
        }
        if (p->struct_size < PROCESSOR_V1_SIZE) {
            set_err(err, errlen, "%s: processors[%zu]: struct_size %zu is "
                    "smaller than the ABI %d.0 ks_processor_type (%zu bytes)",
                    path, i, p->struct_size, KS_ABI_MAJOR, PROCESSOR_V1_SIZE);
            return -1;
        }
        if (!p->name) {
            set_err(err, errlen, "%s: processors[%zu]: name is NULL "
                    "(expected [a-z0-9_]+)", path, i);
            return -1;
        }
        if (!name_valid(p->name)) {
            set_err(err, errlen, "%s: processors[%zu]: name \"%s\" is not "
                    "valid (expected [a-z0-9_]+, at most %d characters)",
                    path, i, printable(p->name, b1), PLUGIN_NAME_MAX);
            return -1;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(d->processors[j]->name, p->name) == 0) {
                set_err(err, errlen, "%s: processors[%zu]: name \"%s\" is "
                        "already used by processors[%zu]", path, i,
                        printable(p->name, b1), j);
                return -1;
            }
        }
        if (!p->process) {
            set_err(err, errlen, "%s: processor \"%s\": process is NULL "
                    "(it is required)", path, printable(p->name, b1));
            return -1;
        }
        if (p->config_count > 0 && !p->config) {
            set_err(err, errlen, "%s: processor \"%s\": config is NULL but "
                    "config_count is %zu", path, printable(p->name, b1),
                    p->config_count);
            return -1;
        }
        for (size_t k = 0; k < p->config_count; k++) {
            const ks_config_field *f = &p->config[k];
            if (!f->name || !f->name[0]) {
                set_err(err, errlen, "%s: processor \"%s\": config[%zu] has "
                        "no name", path, printable(p->name, b1), k);
                return -1;
            }
            if (f->type < KS_CONFIG_STRING || f->type > KS_CONFIG_DURATION) {
                set_err(err, errlen, "%s: processor \"%s\": config key "
                        "\"%s\": type %d is not a ks_config_type (1..5)",
                        path, printable(p->name, b1), printable(f->name, b2),
                        (int)f->type);
                return -1;
            }
            for (size_t j = 0; j < k; j++) {
                if (strcmp(p->config[j].name, f->name) == 0) {
                    set_err(err, errlen, "%s: processor \"%s\": config key "
                            "\"%s\" is declared twice", path,
                            printable(p->name, b1), printable(f->name, b2));
                    return -1;
                }
            }
        }
    }
    return 0;
}

static int check_functions(const char *path, const ks_plugin_descriptor *d,
                           char *err, size_t errlen)
{
    char b1[72];
    if (d->function_count > 0 && !d->functions) {
        set_err(err, errlen, "%s: functions is NULL but function_count is "
                "%zu", path, d->function_count);
        return -1;
    }
    for (size_t i = 0; i < d->function_count; i++) {
        const ks_function *f = &d->functions[i];
        if (!f->name) {
            set_err(err, errlen, "%s: functions[%zu]: name is NULL (expected "
                    "[a-z0-9_]+)", path, i);
            return -1;
        }
        if (!name_valid(f->name)) {
            set_err(err, errlen, "%s: functions[%zu]: name \"%s\" is not "
                    "valid (expected [a-z0-9_]+, at most %d characters)",
                    path, i, printable(f->name, b1), PLUGIN_NAME_MAX);
            return -1;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(d->functions[j].name, f->name) == 0) {
                set_err(err, errlen, "%s: functions[%zu]: name \"%s\" is "
                        "already used by functions[%zu]", path, i,
                        printable(f->name, b1), j);
                return -1;
            }
        }
        /* joiners came with 1.4: an older build cannot mean kind 6 */
        int last = d->abi_minor >= 4 ? KS_FN_JOINER : KS_FN_HANDLER;
        if (f->kind < KS_FN_INITIALIZER || (int)f->kind > last) {
            set_err(err, errlen, "%s: function \"%s\": kind %d is not a "
                    "ks_function_kind of ABI 1.%u (1..%d)", path, printable(f->name, b1),
                    (int)f->kind, (unsigned)d->abi_minor, last);
            return -1;
        }
        if (!f->fn) {
            set_err(err, errlen, "%s: function \"%s\": fn is NULL", path,
                    printable(f->name, b1));
            return -1;
        }
    }
    return 0;
}

/* The checks of plugin.h, in its order, after the entry point returned d. */
static int check_descriptor(const char *path, const ks_plugin_descriptor *d,
                            char *err, size_t errlen)
{
    char b1[72];
    if (!d) {
        set_err(err, errlen, "%s: %s returned NULL (expected a descriptor)",
                path, KS_PLUGIN_ENTRY_SYMBOL);
        return -1;
    }
    if (d->magic != KS_PLUGIN_MAGIC) {
        set_err(err, errlen, "%s: bad magic 0x%08x (expected 0x%08x): not a "
                "kstreams plugin", path, (unsigned)d->magic,
                (unsigned)KS_PLUGIN_MAGIC);
        return -1;
    }
    if (d->struct_size < DESCRIPTOR_V1_SIZE) {
        set_err(err, errlen, "%s: descriptor struct_size %u is smaller than "
                "the ABI %d.0 descriptor (%zu bytes)", path,
                (unsigned)d->struct_size, KS_ABI_MAJOR, DESCRIPTOR_V1_SIZE);
        return -1;
    }
    if (d->abi_major != KS_ABI_MAJOR) {
        set_err(err, errlen, "%s: ABI major %u, engine supports %d: rebuild "
                "the plugin against this engine's kstreams.h", path,
                (unsigned)d->abi_major, KS_ABI_MAJOR);
        return -1;
    }
    if (d->abi_minor > KS_ABI_MINOR) {
        set_err(err, errlen, "%s: ABI %u.%u is newer than the engine's %d.%d: "
                "upgrade the engine", path, (unsigned)d->abi_major,
                (unsigned)d->abi_minor, KS_ABI_MAJOR, KS_ABI_MINOR);
        return -1;
    }
    if (!d->name) {
        set_err(err, errlen, "%s: plugin name is NULL (expected [a-z0-9_]+)",
                path);
        return -1;
    }
    if (!name_valid(d->name)) {
        set_err(err, errlen, "%s: plugin name \"%s\" is not valid (expected "
                "[a-z0-9_]+, at most %d characters)", path,
                printable(d->name, b1), PLUGIN_NAME_MAX);
        return -1;
    }
    if (!d->version) {
        set_err(err, errlen, "%s: plugin \"%s\": version is NULL (expected a "
                "string such as \"1.2.0\")", path, d->name);
        return -1;
    }
    if (!d->build_id) {
        set_err(err, errlen, "%s: plugin \"%s\": build_id is NULL (expected "
                "a string, e.g. KS_BUILD_ID)", path, d->name);
        return -1;
    }
    if (check_processors(path, d, err, errlen) != 0 ||
        check_functions(path, d, err, errlen) != 0)
        return -1;
    if (d->processor_count == 0 && d->function_count == 0) {
        set_err(err, errlen, "%s: plugin \"%s\" offers no processor types and "
                "no functions", path, d->name);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Public functions                                                    */
/* ------------------------------------------------------------------ */

int ks_plugin_open(const char *path, const char *copy_dir,
                   const ks_host_api *api, ks_plugin **out, char *err,
                   size_t errlen)
{
    unsigned char *buf = NULL;
    size_t len = 0;
    char *copy = NULL;
    void *handle = NULL;
    ks_plugin *pl = NULL;

    if (out)
        *out = NULL;
    if (!path || !copy_dir || !api || !out) {
        set_err(err, errlen, "%s: ks_plugin_open: invalid argument",
                path ? path : "(null)");
        return -1;
    }
    if (read_build(path, &buf, &len, err, errlen) != 0)
        return -1;
    if (check_elf(path, buf, len, err, errlen) != 0)
        goto fail;
    if (write_copy(path, copy_dir, buf, len, &copy, err, errlen) != 0)
        goto fail;
    free(buf);
    buf = NULL;

    dlerror(); /* clear a stale error */
    handle = dlopen(copy, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror();
        set_err(err, errlen, "%s: dlopen failed: %s", path,
                why ? why : "unknown error");
        goto fail;
    }
    dlerror();
    void *sym = dlsym(handle, KS_PLUGIN_ENTRY_SYMBOL);
    if (!sym) {
        set_err(err, errlen, "%s: no entry symbol '%s' (is it exported? "
                "build with KS_EXPORT)", path, KS_PLUGIN_ENTRY_SYMBOL);
        goto fail;
    }
    /* POSIX guarantees a data pointer from dlsym converts to a function
     * pointer; ISO C has no cast for it, memcpy is exact. */
    ks_plugin_entry_fn entry;
    _Static_assert(sizeof entry == sizeof sym, "function pointer size");
    memcpy(&entry, &sym, sizeof entry);
    const ks_plugin_descriptor *d = entry(api);
    if (check_descriptor(path, d, err, errlen) != 0)
        goto fail;

    pl = calloc(1, sizeof *pl);
    if (!pl || !(pl->path = strdup(path))) {
        set_err(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    pl->copy_path = copy;
    pl->handle = handle;
    pl->desc = d;
    pl->loaded_at = time(NULL);
    pl->refs = 0;
    *out = pl;
    return 0;

fail:
    if (pl) {
        free(pl->path);
        free(pl);
    }
    if (handle)
        dlclose(handle);
    if (copy) {
        unlink(copy);
        free(copy);
    }
    free(buf);
    return -1;
}

void ks_plugin_close(ks_plugin *pl)
{
    if (!pl)
        return;
    if (pl->handle)
        dlclose(pl->handle);
    if (pl->copy_path)
        unlink(pl->copy_path);
    free(pl->copy_path);
    free(pl->path);
    free(pl);
}

const ks_processor_type *ks_plugin_processor(const ks_plugin *pl,
                                             const char *name)
{
    if (!pl || !pl->desc || !name)
        return NULL;
    for (size_t i = 0; i < pl->desc->processor_count; i++)
        if (strcmp(pl->desc->processors[i]->name, name) == 0)
            return pl->desc->processors[i];
    return NULL;
}

const ks_function *ks_plugin_function(const ks_plugin *pl, const char *name)
{
    if (!pl || !pl->desc || !name)
        return NULL;
    for (size_t i = 0; i < pl->desc->function_count; i++)
        if (strcmp(pl->desc->functions[i].name, name) == 0)
            return &pl->desc->functions[i];
    return NULL;
}

/* Write DIR/SUB/NAME.so into out when it is a regular file. */
static int try_candidate(const char *dir, const char *sub, const char *name,
                         char *out, size_t outlen)
{
    int n = snprintf(out, outlen, "%s%s%s%s.so", dir,
                     dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/", sub,
                     name);
    if (n < 0 || (size_t)n >= outlen)
        return -1; /* does not fit: not a usable candidate */
    struct stat st;
    if (stat(out, &st) != 0 || !S_ISREG(st.st_mode))
        return -1;
    return 0;
}

/* NAME.so in dir, then dir/.libs/NAME.so: a libtool build tree keeps the
 * real module in .libs/ (the .la next to it is a text file), so pointing
 * plugin_path or KSTREAMS_PLUGIN_PATH at a build directory works. */
static int try_dir(const char *dir, const char *name, char *out,
                   size_t outlen)
{
    if (!dir[0])
        return -1;
    if (try_candidate(dir, "", name, out, outlen) == 0)
        return 0;
    return try_candidate(dir, ".libs/", name, out, outlen);
}

int ks_plugin_find(const char *name, char *const *dirs, size_t ndirs,
                   char *out, size_t outlen)
{
    if (!name || !name[0] || !out || outlen == 0)
        return -1;
    size_t n = strlen(name);
    if (strchr(name, '/') || (n > 3 && strcmp(name + n - 3, ".so") == 0)) {
        if (n >= outlen)
            return -1;
        memcpy(out, name, n + 1);
        return 0;
    }
    for (size_t i = 0; i < ndirs; i++)
        if (dirs && dirs[i] && try_dir(dirs[i], name, out, outlen) == 0)
            return 0;

    const char *env = getenv("KSTREAMS_PLUGIN_PATH");
    if (env && env[0]) {
        char *copy = strdup(env);
        if (!copy)
            return -1;
        int found = 0;
        char *save = NULL;
        for (char *d = strtok_r(copy, ":", &save); d && !found;
             d = strtok_r(NULL, ":", &save))
            found = try_dir(d, name, out, outlen) == 0;
        free(copy);
        if (found)
            return 0;
    }
    /* The installed directory holds installed modules only: no .libs. */
    if (try_candidate(KS_PLUGIN_DIR, "", name, out, outlen) == 0)
        return 0;
    out[0] = '\0';
    return -1;
}
