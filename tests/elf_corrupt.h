/*
 * elf_corrupt.h - a hostile build for the loader's tests: a real plugin
 * build whose ELF header, program headers and section headers stay valid
 * (plugin_elf.c's checks pass) but whose dynamic section points its
 * symbol, string and hash tables at 0x4141414141414141.
 *
 * Observed on glibc 2.36 (Debian 12, x86_64): dlopen of such a file
 * kills the calling process with SIGSEGV inside ld.so, before dlopen
 * returns; `kstreams check` on a pipeline naming it died with exit 139
 * before the plugin pre-flight existed.
 */
#ifndef KS_TEST_ELF_CORRUPT_H
#define KS_TEST_ELF_CORRUPT_H

#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Overwrite the table pointers of buf's PT_DYNAMIC entries in place.
 * Returns how many entries were overwritten (0: nothing to corrupt). */
static inline int ks_test_corrupt_dynamic(unsigned char *buf, size_t len)
{
    Elf64_Ehdr eh;
    if (len < sizeof eh)
        return 0;
    memcpy(&eh, buf, sizeof eh);
    int hit = 0;
    for (size_t i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        size_t at = eh.e_phoff + i * eh.e_phentsize;
        if (at + sizeof ph > len)
            return 0;
        memcpy(&ph, buf + at, sizeof ph);
        if (ph.p_type != PT_DYNAMIC || ph.p_offset + ph.p_filesz > len)
            continue;
        for (size_t off = ph.p_offset; off + sizeof(Elf64_Dyn) <= ph.p_offset + ph.p_filesz;
             off += sizeof(Elf64_Dyn)) {
            Elf64_Dyn d;
            memcpy(&d, buf + off, sizeof d);
            if (d.d_tag == DT_NULL)
                break;
            if (d.d_tag == DT_STRTAB || d.d_tag == DT_SYMTAB || d.d_tag == DT_HASH ||
                d.d_tag == DT_GNU_HASH) {
                d.d_un.d_ptr = 0x4141414141414141ull;
                memcpy(buf + off, &d, sizeof d);
                hit++;
            }
        }
    }
    return hit;
}

/* Write a corrupted copy of the file `src` to `dst`. 0 on success. */
static inline int ks_test_write_corrupt(const char *src, const char *dst)
{
    FILE *in = fopen(src, "rb");
    if (!in)
        return -1;
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            unsigned char *grown = realloc(buf, cap = cap ? cap * 2 : 65536);
            if (!grown)
                break;
            buf = grown;
        }
        size_t got = fread(buf + len, 1, cap - len, in);
        len += got;
        if (got == 0)
            break;
    }
    fclose(in);
    int rc = -1;
    if (buf && ks_test_corrupt_dynamic(buf, len) > 0) {
        FILE *out = fopen(dst, "wb");
        if (out) {
            size_t put = fwrite(buf, 1, len, out);
            rc = fclose(out) == 0 && put == len ? 0 : -1;
        }
    }
    free(buf);
    return rc;
}

#endif
