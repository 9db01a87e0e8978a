/*
 * httpd.h - what the engine's two HTTP servers (the outbox's, http.c, and
 * the metrics', metrics.c) share: binding a listen address exactly as
 * `check` parsed it, the limits a client cannot exceed, the bearer-token
 * check, and answers that always carry a status line.
 *
 * Limits (docs/reliability.md): at most max_connections open at once (more
 * wait in the kernel's listen backlog, unaccepted, holding no descriptor of
 * ours); a connection silent for idle_timeout is closed by libmicrohttpd;
 * one open longer than connection_deadline is closed whatever it sends (a
 * client trickling a byte every few seconds never looks idle), by a
 * watchdog thread that shuts its socket down.
 */
#ifndef KS_HTTPD_H
#define KS_HTTPD_H

#include <microhttpd.h>
#include <stddef.h>

#include "config/config.h"

typedef struct ks_httpd ks_httpd;

/*
 * Serve `listen` (ks_parse_listen) with libmicrohttpd's own polling thread,
 * `handler`/`cls` answering requests and `done`/`done_cls` (may be NULL)
 * told when one ends. `what` names the server in errors and logs ("outbox
 * HTTP endpoint", "metrics endpoint"). 0 and *out (stop with
 * ks_httpd_stop), or a negative ks_err with err saying why.
 */
int ks_httpd_start(const char *what, const char *listen, const ks_cfg_http_limits *limits,
                   MHD_AccessHandlerCallback handler, void *cls,
                   MHD_RequestCompletedCallback done, void *done_cls, ks_httpd **out,
                   char *err, size_t errlen);

/* Stop serving (libmicrohttpd ends its connections) and free. NULL is
 * fine. */
void ks_httpd_stop(ks_httpd *s);

/* 1 when `given` equals `want`, in a time that depends on the length of
 * `want` only, never on where the two first differ. NULL never equals. */
int ks_http_token_equal(const char *given, const char *want);

/* 1 when no token is configured (NULL) or the request carries
 * "Authorization: Bearer <token>" (compared in constant time). */
int ks_http_authorized(struct MHD_Connection *c, const char *token);

/*
 * Copy `in` into out (outlen > 0, always NUL-terminated) as valid UTF-8
 * without control characters: every byte that is not part of a well-formed
 * sequence, and every control byte, becomes the four characters \xNN; a
 * sequence that does not fit whole is left out. For error texts that echo
 * a client's bytes (a URL segment with %FF or a cut %C3) into JSON, which
 * jansson refuses unless it is valid UTF-8.
 */
void ks_http_clean_text(const char *in, char *out, size_t outlen);

/*
 * Queue an answer: `body` (len bytes) is taken over (freed by
 * libmicrohttpd) or, when NULL, replaced by a short fixed text naming the
 * status, so that a request whose body could not be built (out of memory,
 * a JSON encoding failure) still gets its status line. MHD_YES, or MHD_NO
 * when libmicrohttpd cannot queue it (the connection is then closed).
 */
enum MHD_Result ks_http_send(struct MHD_Connection *c, unsigned code, const char *content_type,
                             char *body, size_t len);

/* ks_http_send with more headers: `headers` (borrowed; NULL for none) is
 * name, value, name, value, ..., NULL. */
enum MHD_Result ks_http_send_headers(struct MHD_Connection *c, unsigned code,
                                     const char *content_type, char *body, size_t len,
                                     const char *const *headers);

#endif /* KS_HTTPD_H */
