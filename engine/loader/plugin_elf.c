/*
 * plugin_elf.c - the bytes of a build, before anything is loaded: read
 * once into memory (read(2), never mmap: a file truncated under an mmap
 * raises SIGBUS), then checked to be a complete ELF64 shared object for
 * this host (headers, program and section header tables, every loadable
 * segment and every section with contents inside the file: a partly
 * written .so can SIGBUS the host inside dlopen, glibc 2.36).
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "loader/plugin_internal.h"

/* A build larger than this is refused rather than read into memory. */
#define PLUGIN_MAX_BYTES ((size_t)1 << 30)

/* ------------------------------------------------------------------ */
/* Reading and checking the file                                       */
/* ------------------------------------------------------------------ */

/* Read the regular file `path` into a new buffer. */
int ks_loader_read_build(const char *path, unsigned char **out, size_t *outlen,
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
int ks_loader_check_elf(const char *path, const unsigned char *buf, size_t len,
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
