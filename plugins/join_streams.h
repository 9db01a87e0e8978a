/*
 * join_streams.h - the windowed stream-stream join, processor type
 * "streams" of the shipped plugin "join" (join_streams.c). Compiled into
 * the join module only; nothing here is exported.
 */
#ifndef KS_PLUGINS_JOIN_STREAMS_H
#define KS_PLUGINS_JOIN_STREAMS_H

#include <kstreams/kstreams.h>

/* The processor type; static, never freed. */
extern const ks_processor_type ks_join_streams_type;

/* Give the type the host API table (borrowed: the module's entry point
 * passes it, valid while the module is loaded). Call before any init(). */
void ks_join_streams_set_host(const ks_host_api *api);

#endif /* KS_PLUGINS_JOIN_STREAMS_H */
