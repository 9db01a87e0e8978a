/*
 * http.h - the engine's local HTTP endpoint for the outbox.
 *
 *   POST /outbox/<name>/events   {"user": "...", "payload": {...}, "key": "..."}
 *        201 {"id": "..."}  only once the row is committed to disk
 *        400 malformed body, 404 unknown outbox, 413 oversized, 401 bad token
 *        (a 4xx writes nothing), 503 when the outbox store cannot write
 *   GET  /outbox/events/<id>     200 {"id":..., "status": "PENDING", ...} or 404
 *
 * Binds 127.0.0.1:8470 unless `listen:` says otherwise; config/ refuses a
 * non-loopback address without `token:`. With a token every request needs
 * "Authorization: Bearer <token>" (compared in constant time). The token
 * and a Content-Length over max_event_bytes are refused (401, 413) with the
 * headers, before any body byte is read; a chunked body over the limit is
 * read and dropped, then 413. Every request gets a status line, also when
 * its error text cannot be JSON-encoded. Connections are limited as
 * `limits` says (httpd.h). Accepting events needs no Kafka.
 */
#ifndef KS_HTTP_H
#define KS_HTTP_H

#include <jansson.h>
#include <stddef.h>

#include "config/config.h"
#include "outbox/outbox.h"

typedef struct ks_http ks_http;

/* Start serving (own thread, libmicrohttpd). `ob` and `cfg` are borrowed
 * until ks_http_stop. 0, or a negative ks_err with err naming the
 * address. */
int ks_http_start(ks_outbox *ob, const ks_cfg_outbox *cfg, ks_http **out, char *err,
                  size_t errlen);

/* Stop serving (in-flight requests finish) and free. NULL is fine. */
void ks_http_stop(ks_http *h);

/* An event as GET /outbox/events/<id> shows it (also `kstreams
 * outbox-status FILE ID`): id, status, user, topic, attempts, partition,
 * offset, created_ms, updated_ms, and last_error and result when set. A
 * new reference (the caller's), or NULL when a stored text is not UTF-8
 * (a damaged row) or out of memory. */
json_t *ks_outbox_event_json(const ks_outbox_event *ev);

#endif /* KS_HTTP_H */
