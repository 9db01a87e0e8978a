/*
 * plugin_watch.h - notice that plugin files changed, for hot deploy
 * (reload.c): inotify on each file's directory (a file replaced by rename
 * is seen too); a file counts as changed once it has been quiet for a
 * settle time and its size or mtime differ from what was seen last (a
 * chmod, or a file written back unchanged, is not a change).
 */
#ifndef KS_PLUGIN_WATCH_H
#define KS_PLUGIN_WATCH_H

#include <stddef.h>
#include <stdint.h>

typedef struct ks_plugin_watch ks_plugin_watch;

/* Watch the n files `paths` (copied). 0 with *out (free with
 * ks_plugin_watch_free), or -1 with err ("inotify: ..." or "DIR: cannot
 * watch: ...") and *out NULL. */
int ks_plugin_watch_start(const char *const *paths, size_t n, ks_plugin_watch **out,
                          char *err, size_t errlen);

/* Wait up to timeout_ms for file events, then set changed[i] (n entries,
 * as given to start) to 1 for each file that changed and has been quiet
 * for settle_ms, 0 for the others. Returns how many changed. One thread
 * at a time. */
size_t ks_plugin_watch_poll(ks_plugin_watch *w, int timeout_ms, int64_t settle_ms,
                            int *changed);

/* Stop watching and free. NULL is fine. */
void ks_plugin_watch_free(ks_plugin_watch *w);

#endif /* KS_PLUGIN_WATCH_H */
