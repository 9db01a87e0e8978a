/*
 * layout.c - paths under the state directory (layout.h).
 */
#include "state/layout.h"

#include <stdio.h>

static int fit(int n, size_t len)
{
    return n >= 0 && (size_t)n < len ? 0 : -1;
}

static int app_path(const char *state_dir, const char *application, const char *leaf,
                    char *out, size_t len)
{
    return fit(snprintf(out, len, "%s/%s/%s", state_dir, application, leaf), len);
}

int ks_layout_app_dir(const char *state_dir, const char *application, char *out, size_t len)
{
    return fit(snprintf(out, len, "%s/%s", state_dir, application), len);
}

int ks_layout_task_dir(const char *state_dir, const char *application, int32_t task, char *out,
                       size_t len)
{
    return fit(snprintf(out, len, "%s/%s/task-%d", state_dir, application, (int)task), len);
}

int ks_layout_plugins_dir(const char *state_dir, const char *application, char *out, size_t len)
{
    return app_path(state_dir, application, "plugins", out, len);
}

int ks_layout_outbox_dir(const char *state_dir, const char *application, char *out, size_t len)
{
    return app_path(state_dir, application, "outbox", out, len);
}

int ks_layout_status_file(const char *state_dir, const char *application, char *out, size_t len)
{
    return app_path(state_dir, application, "status.json", out, len);
}

int ks_layout_pid_file(const char *state_dir, const char *application, char *out, size_t len)
{
    return app_path(state_dir, application, "kstreams.pid", out, len);
}

int ks_layout_crash_file(const char *state_dir, const char *application, char *out, size_t len)
{
    return app_path(state_dir, application, "crash.txt", out, len);
}

int ks_layout_crash_history_file(const char *state_dir, const char *application, char *out,
                                 size_t len)
{
    return app_path(state_dir, application, "crash-history", out, len);
}

int ks_layout_good_builds_dir(const char *state_dir, const char *application, char *out,
                              size_t len)
{
    return app_path(state_dir, application, "good-builds", out, len);
}
