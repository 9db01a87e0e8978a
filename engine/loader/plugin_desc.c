/*
 * plugin_desc.c - the checks of a plugin's descriptor after its entry
 * point returned it, in plugin.h's order: magic, struct size, ABI major
 * and minor, identity (name, version, build_id), the processor and
 * function tables. Strings the plugin supplies are quoted through
 * printable(), so a broken one cannot break the one-line rule.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "loader/plugin_internal.h"

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

/* ------------------------------------------------------------------ */
/* Descriptor checks                                                   */
/* ------------------------------------------------------------------ */

static int check_processors(const char *path, const ks_plugin_descriptor *d,
                            char *err, size_t errlen)
{
    char b1[72], b2[72];
    if (d->processor_count > KS_PLUGIN_MAX_PROCESSORS) {
        set_err(err, errlen, "%s: processor_count %zu is over the limit of %d", path,
                d->processor_count, KS_PLUGIN_MAX_PROCESSORS);
        return -1;
    }
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
        if (p->config_count > KS_PLUGIN_MAX_CONFIG) {
            set_err(err, errlen, "%s: processor \"%s\": config_count %zu is over the "
                    "limit of %d", path, printable(p->name, b1), p->config_count,
                    KS_PLUGIN_MAX_CONFIG);
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
    if (d->function_count > KS_PLUGIN_MAX_FUNCTIONS) {
        set_err(err, errlen, "%s: function_count %zu is over the limit of %d", path,
                d->function_count, KS_PLUGIN_MAX_FUNCTIONS);
        return -1;
    }
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
        /* joiners came with 1.4, key mappers with 1.6: an older build
         * cannot mean kinds 6 or 7 */
        int last = d->abi_minor >= 6   ? KS_FN_KEY_MAPPER
                   : d->abi_minor >= 4 ? KS_FN_JOINER
                                       : KS_FN_HANDLER;
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
int ks_loader_check_descriptor(const char *path, const ks_plugin_descriptor *d,
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
