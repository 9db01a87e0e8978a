/*
 * join_fk.h - the foreign-key table-table join, processor types
 * "fk_subscribe", "fk_register" and "fk_resolve" of the shipped plugin
 * "join" (join_fk.c; the protocol in docs/tables-and-joins.md). Compiled
 * into the join module only; nothing here is exported.
 */
#ifndef KS_PLUGINS_JOIN_FK_H
#define KS_PLUGINS_JOIN_FK_H

#include <kstreams/kstreams.h>

/* The three processor types; static, never freed. */
extern const ks_processor_type ks_join_fk_subscribe_type;
extern const ks_processor_type ks_join_fk_register_type;
extern const ks_processor_type ks_join_fk_resolve_type;

/* Give the types the host API table (borrowed: the module's entry point
 * passes it, valid while the module is loaded). Call before any init(). */
void ks_join_fk_set_host(const ks_host_api *api);

#endif /* KS_PLUGINS_JOIN_FK_H */
