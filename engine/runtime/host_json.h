/*
 * host_json.h - the JSON calls of the host API (ABI 1.3): reading values
 * in place (lib/json/json_ptr.c, shared with the shipped ops plugin) and
 * building one object per processor instance in a host buffer.
 */
#ifndef KS_HOST_JSON_H
#define KS_HOST_JSON_H

#include <kstreams/kstreams.h>

/* Fill the JSON members of `api` (json_find .. json_finish). */
void ks_host_json_fill(ks_host_api *api);

/* Free a writer made by json_writer (NULL is fine). */
void ks_json_writer_free(struct ks_json_writer *w);

#endif /* KS_HOST_JSON_H */
