/*
 * ctorcrash.c - test plugin of the loader's pre-flight: a well formed
 * plugin ("ctorcrash", processor "pass") whose ELF constructor, or entry
 * point, misbehaves, chosen when built:
 *   -DCTOR_ABORT   the constructor calls abort()
 *   -DCTOR_SEGV    the constructor raises SIGSEGV
 *   -DCTOR_HANG    the constructor never returns
 *   -DCTOR_EXIT    the constructor prints a line on stderr and calls exit(3)
 *   -DENTRY_SEGV   the entry point raises SIGSEGV
 * dlopen runs constructors before any descriptor can be checked; loaded in
 * the engine's own process, each of these would kill or hang the engine.
 */
#include <kstreams/kstreams.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void misbehave(void)
{
#if defined(CTOR_ABORT)
    abort();
#elif defined(CTOR_SEGV)
    raise(SIGSEGV);
#elif defined(CTOR_HANG)
    for (;;)
        pause();
#elif defined(CTOR_EXIT)
    fputs("ctor_exit: giving up\n", stderr);
    exit(3);
#endif
}

static ks_verdict process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    (void)state;
    (void)ctx, (void)rec;
    return KS_OK;
}

static const ks_processor_type pass = {
    .struct_size = sizeof(ks_processor_type),
    .name = "pass",
    .description = "does nothing",
    .process = process,
};
static const ks_processor_type *const processors[] = {&pass};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "ctorcrash",
    .version = "1.0.0",
    .build_id = "ctorcrash",
    .processors = processors,
    .processor_count = 1,
};

KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *api)
{
    (void)api;
#ifdef ENTRY_SEGV
    raise(SIGSEGV);
#endif
    return &descriptor;
}
