/*
 * query_server.h - remote interactive queries (docs/scaling.md "Remote
 * queries"): with `query: { listen }` each process serves the stores of
 * its tasks over HTTP (http/httpd.c, with its limits and token check):
 *
 *   GET /v1/query?store=S&key=K[&from=T&to=T]   one key (its windows)
 *   GET /v1/query?store=S&partition=P[&from_key=A&to_key=B][&from=&to=]
 *       (either with [&standby=1]: a stale copy here may answer)
 *   GET /v1/tasks                                who holds each partition
 *
 * answered with the JSON `kstreams query --format json` prints. A key's
 * task is the partition murmur2 puts it in; a partition this process does
 * not run is answered with 307 to the process that does, found by
 * describing the consumer group (each worker's client.id carries its
 * process's query address); a task that is restoring answers 503 with the
 * restore's progress. With `standby=1` the task restoring here, or a
 * standby of it here (standby.h), answers instead, marked stale by the
 * X-Kstreams-Stale, -Changelog-Offset and -Lag headers.
 */
#ifndef KS_QUERY_SERVER_H
#define KS_QUERY_SERVER_H

#include <stddef.h>

#include "config/config.h"
#include "runtime/engine.h"

typedef struct ks_query_server ks_query_server;

/* The address other processes reach this one's query server at
 * (`advertise:`, else `listen:`; borrowed from p), or NULL when `query:`
 * is off. The workers' client.id carries it (kafka/member_id.h). */
const char *ks_query_address(const ks_pipeline *p);

/* Start serving p->query_listen for `eng` (borrowed; eng->qtasks must be
 * set). 0 with *out, or a negative ks_err with err set. */
int ks_query_server_start(ks_engine *eng, ks_query_server **out, char *err, size_t errlen);

/* Stop serving and free. NULL is fine. */
void ks_query_server_stop(ks_query_server *s);

#endif /* KS_QUERY_SERVER_H */
