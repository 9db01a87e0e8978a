/*
 * member_id.h - the client.id a process's consumers carry in the group,
 * and its reading by the other processes. Two features read it from the
 * group's description (DescribeConsumerGroups, group_members.h):
 *   - standby placement (runtime/standby.c) groups the members by process:
 *     the workers of one process share `<application>-<instance>`;
 *   - the query server (runtime/query_server.c) learns where each member
 *     answers queries: ` query=HOST:PORT` follows when `query:` is on.
 * So the id is `<application>-<instance>[ query=HOST:PORT]`, set by the
 * worker when either feature is on, and read only here.
 */
#ifndef KS_KAFKA_MEMBER_ID_H
#define KS_KAFKA_MEMBER_ID_H

#include <stddef.h>

/* What separates the process from the query address. */
#define KS_MEMBER_QUERY_MARK " query="

/* Format the client.id of `application` (borrowed) and `instance`
 * (borrowed) into buf (truncated to len); `query_addr` (borrowed,
 * HOST:PORT) is appended when not NULL. */
void ks_member_id_format(const char *application, const char *instance, const char *query_addr,
                         char *buf, size_t len);

/* Read client.id `id` (borrowed): its process part (everything before
 * KS_MEMBER_QUERY_MARK) into process (truncated to plen), and the query
 * address it carries, a pointer into `id`, or NULL when it has none (query
 * off, an empty address, another client). Never fails. */
const char *ks_member_id_parse(const char *id, char *process, size_t plen);

#endif /* KS_KAFKA_MEMBER_ID_H */
