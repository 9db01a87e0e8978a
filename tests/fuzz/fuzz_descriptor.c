/*
 * fuzz_descriptor.c - the loader's checks of a plugin descriptor
 * (engine/loader/plugin_desc.c, run on what a plugin's entry point
 * returns) on descriptors built from any bytes: each field, count, table
 * and string comes from the input (a string is NUL-terminated, a table
 * holds as many entries as its count says, up to the loader's bound, and
 * a count past that bound has a table of the bound's length: the loader
 * must refuse it before reading on; entries past the end of the input are
 * valid ones, so that a long table needs no input). The checks never crash or read past
 * a table; a refusal is one printable line naming the file; an accepted
 * descriptor has valid, unique names, counts within the bounds and
 * non-NULL callbacks.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/plugin_internal.h"

typedef struct reader {
    const uint8_t *p;
    size_t n;
    void *allocs[8192];
    size_t nallocs;
} reader;

static uint8_t u8(reader *r)
{
    if (r->n == 0)
        return 0;
    r->n--;
    return *r->p++;
}

static uint64_t u64(reader *r)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | u8(r);
    return v;
}

static void *alloc(reader *r, size_t size)
{
    if (r->nallocs == sizeof r->allocs / sizeof r->allocs[0])
        return NULL;
    void *m = calloc(1, size ? size : 1);
    if (!m)
        abort();
    r->allocs[r->nallocs++] = m;
    return m;
}

/* A string: a length byte (255: NULL), then that many bytes, NUL added. */
static const char *str(reader *r)
{
    uint8_t len = u8(r);
    if (len == 255)
        return NULL;
    char *s = alloc(r, (size_t)len + 1);
    if (!s)
        return NULL;
    for (size_t i = 0; i < len; i++)
        s[i] = (char)u8(r);
    return s;
}

/* A count: small mostly, any 64-bit value when the byte's top bit is set. */
static size_t count(reader *r)
{
    uint8_t c = u8(r);
    return c & 0x80 ? (size_t)u64(r) : (size_t)(c & 7);
}

static size_t backed(size_t n, size_t bound)
{
    return n < bound ? n : bound;
}

static ks_verdict process_fn(ks_ctx *ctx, void *state, const ks_record *rec)
{
    (void)ctx, (void)state, (void)rec;
    return KS_OK;
}

static void function_fn(void)
{
}

/* An entry past the end of the input is a valid one, named after its
 * index: long valid tables cost no input. */
static const char *index_name(reader *r, char c, size_t i)
{
    char *s = alloc(r, 24);
    if (s)
        snprintf(s, 24, "%c%zu", c, i);
    return s;
}

static const ks_processor_type *processor(reader *r, size_t i)
{
    if (r->n == 0) {
        ks_processor_type *p = alloc(r, sizeof *p);
        if (p) {
            p->struct_size = sizeof *p;
            p->name = index_name(r, 'p', i);
            p->process = process_fn;
        }
        return p;
    }
    uint8_t f = u8(r);
    if (f & 1)
        return NULL;
    ks_processor_type *p = alloc(r, sizeof *p);
    if (!p)
        return NULL;
    p->struct_size = f & 2 ? (size_t)u64(r) : sizeof *p;
    p->name = str(r);
    p->process = f & 4 ? NULL : process_fn;
    p->config_count = count(r);
    if (!(f & 8)) {
        size_t n = backed(p->config_count, KS_PLUGIN_MAX_CONFIG);
        ks_config_field *c = alloc(r, n * sizeof *c);
        for (size_t i = 0; c && i < n; i++) {
            c[i].name = str(r);
            c[i].type = (ks_config_type)(int8_t)u8(r);
        }
        p->config = c;
    }
    return p;
}

static void check_accepted(const ks_plugin_descriptor *d)
{
    if (d->processor_count > KS_PLUGIN_MAX_PROCESSORS ||
        d->function_count > KS_PLUGIN_MAX_FUNCTIONS) {
        fprintf(stderr, "accepted %zu processors, %zu functions\n", d->processor_count,
                d->function_count);
        abort();
    }
    for (size_t i = 0; i < d->processor_count; i++) {
        const ks_processor_type *p = d->processors[i];
        if (!p || !p->name || !p->process || p->config_count > KS_PLUGIN_MAX_CONFIG) {
            fprintf(stderr, "accepted processors[%zu] without a name, process or bounds\n", i);
            abort();
        }
        for (size_t j = 0; j < i; j++)
            if (strcmp(d->processors[j]->name, p->name) == 0) {
                fprintf(stderr, "accepted processor name \"%s\" twice\n", p->name);
                abort();
            }
    }
    for (size_t i = 0; i < d->function_count; i++)
        if (!d->functions[i].name || !d->functions[i].fn) {
            fprintf(stderr, "accepted functions[%zu] without a name or fn\n", i);
            abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    reader *r = calloc(1, sizeof *r);
    if (!r)
        abort();
    r->p = data;
    r->n = len;
    uint8_t f = u8(r);
    ks_plugin_descriptor *d = NULL;
    if (!(f & 1)) {
        d = alloc(r, sizeof *d);
        d->magic = f & 2 ? (uint32_t)u64(r) : KS_PLUGIN_MAGIC;
        d->struct_size = f & 4 ? (uint32_t)u64(r) : (uint32_t)sizeof *d;
        d->abi_major = f & 8 ? (uint16_t)u64(r) : KS_ABI_MAJOR;
        d->abi_minor = f & 16 ? (uint16_t)u8(r) : KS_ABI_MINOR;
        d->name = str(r);
        d->version = str(r);
        d->build_id = str(r);
        d->processor_count = count(r);
        if (!(f & 32)) {
            size_t n = backed(d->processor_count, KS_PLUGIN_MAX_PROCESSORS);
            const ks_processor_type **t = alloc(r, n * sizeof *t);
            for (size_t i = 0; t && i < n; i++)
                t[i] = processor(r, i);
            d->processors = t;
        }
        d->function_count = count(r);
        if (!(f & 64)) {
            size_t n = backed(d->function_count, KS_PLUGIN_MAX_FUNCTIONS);
            ks_function *t = alloc(r, n * sizeof *t);
            for (size_t i = 0; t && i < n; i++) {
                if (r->n == 0) {
                    t[i] = (ks_function){index_name(r, 'f', i), KS_FN_INITIALIZER,
                                         (void (*)(void))function_fn};
                    continue;
                }
                uint8_t ff = u8(r);
                t[i].name = str(r);
                t[i].kind = (ks_function_kind)(int8_t)u8(r);
                t[i].fn = ff & 1 ? NULL : (void (*)(void))function_fn;
            }
            d->functions = t;
        }
    }
    char err[1024] = "";
    int rc = ks_loader_check_descriptor("fuzz.so", d, err, sizeof err);
    if (rc == 0) {
        check_accepted(d);
    } else {
        int one_line = strncmp(err, "fuzz.so: ", 9) == 0;
        for (const char *c = err; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                one_line = 0;
        if (!one_line) {
            fprintf(stderr, "a refusal that is not one printable line naming the file: \"%s\"\n",
                    err);
            abort();
        }
    }
    for (size_t i = 0; i < r->nallocs; i++)
        free(r->allocs[i]);
    free(r);
    return 0;
}
