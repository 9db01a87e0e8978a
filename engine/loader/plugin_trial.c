/*
 * plugin_trial.c - the pre-flight of a build: before ks_plugin_open
 * dlopens a private copy, a helper process loads that same copy, calls
 * its entry point and checks its descriptor, then reports. A build whose
 * dynamic section, constructors or entry point crash, exit or hang kills
 * or stalls only the helper, and is refused naming what happened:
 * "PATH: trial load crashed (SIGSEGV in dlopen); refused".
 *
 * Why posix_spawn of a helper binary (the engine itself, with a hidden
 * command) and not fork: the engine loads plugins while librdkafka's and
 * its own threads run (hot reload); a forked child of a threaded process
 * may only call async-signal-safe functions until it execs, and dlopen,
 * malloc and the plugin's constructors are not. An exec'd helper starts
 * as a fresh single-threaded process. glibc's posix_spawn uses
 * clone(CLONE_VM|CLONE_VFORK), so the cost is one exec plus the dynamic
 * loading of the engine binary and of the plugin.
 *
 * Protocol: the helper's stderr and file descriptor 3 are one pipe. Lines
 * starting with TRIAL_MARK are the helper's: "stage NAME" before each step
 * (dlopen, the entry symbol, the descriptor checks), then "ok" or
 * "refused MESSAGE". Other lines are what the build or ld.so printed; the
 * last one is quoted when the helper ends without a verdict.
 *
 * Process-wide state: the helper's path and timeout, set once before
 * threads start (ks_plugin_set_trial).
 */
#include "loader/plugin.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loader/plugin_internal.h"

extern char **environ;

#define TRIAL_MARK "\001ks-trial "
#define TRIAL_FD 3
#define LINE_MAX_KEPT 512

static const char *trial_exe;
static int trial_timeout_ms = KS_PLUGIN_TRIAL_TIMEOUT_MS;
/* trial_exe resolved at set time, and the file it was then. Under
 * valgrind (3.19) readlink("/proc/self/exe") names the program while an
 * exec of "/proc/self/exe" runs valgrind's tool binary, so the resolved
 * path is what is started; when that file has since been replaced (an
 * upgrade), trial_exe itself is (/proc/self/exe: the image that runs). */
static char trial_resolved[4096];
static dev_t trial_dev;
static ino_t trial_ino;

void ks_plugin_set_trial(const char *exe, int timeout_ms)
{
    trial_exe = exe;
    trial_timeout_ms = timeout_ms > 0 ? timeout_ms : KS_PLUGIN_TRIAL_TIMEOUT_MS;
    trial_resolved[0] = '\0';
    struct stat st;
    if (!exe)
        return;
    ssize_t n = readlink(exe, trial_resolved, sizeof trial_resolved - 1);
    trial_resolved[n > 0 ? n : 0] = '\0';
    if (n <= 0 || (size_t)n >= sizeof trial_resolved - 1 ||
        stat(trial_resolved, &st) != 0) {
        trial_resolved[0] = '\0';
        return;
    }
    trial_dev = st.st_dev;
    trial_ino = st.st_ino;
}

/* The program to start: the resolved path while it is still the same file. */
static const char *helper_path(void)
{
    struct stat st;
    if (trial_resolved[0] && stat(trial_resolved, &st) == 0 &&
        st.st_dev == trial_dev && st.st_ino == trial_ino)
        return trial_resolved;
    return trial_exe;
}

/* ------------------------------------------------------------------ */
/* The helper's side                                                   */
/* ------------------------------------------------------------------ */

/* One line to the parent; a single write(2) under PIPE_BUF is atomic. */
static void say(const char *what, const char *text)
{
    char line[2048];
    int n = snprintf(line, sizeof line, TRIAL_MARK "%s%s%s\n", what,
                     text ? " " : "", text ? text : "");
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line) {
        n = (int)sizeof line - 1;
        line[n - 1] = '\n';
    }
    ssize_t put = write(TRIAL_FD, line, (size_t)n);
    (void)put; /* the parent reads a missing verdict as a failure */
}

static void stage(const char *name)
{
    say("stage", name);
}

void ks_loader_default_crash_signals(void)
{
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &dfl, NULL);
}

_Noreturn void ks_plugin_trial_main(int argc, char **argv,
                                    const ks_host_api *api)
{
    if (argc != 4 || fcntl(TRIAL_FD, F_GETFD) < 0)
        _exit(64);
    /* A crash here is expected and reported by the signal that ends the
     * helper: no core file, and no handler that would turn the signal
     * into an exit status (a sanitizer's SIGSEGV handler reports and
     * exits 1). */
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    ks_loader_default_crash_signals();
    char err[1536] = "";
    void *handle = NULL;
    const ks_plugin_descriptor *d = NULL;
    if (load_checked(argv[2], argv[3], api, stage, &handle, &d, err,
                     sizeof err) != 0)
        say("refused", err);
    else
        say("ok", NULL);
    /* _exit: the build's destructors and atexit handlers are not part of
     * loading it; they run in the engine when it unloads the build. */
    _exit(0);
}

/* ------------------------------------------------------------------ */
/* The engine's side                                                   */
/* ------------------------------------------------------------------ */

typedef struct verdict {
    char stage[64];          /* last step the helper started             */
    char output[LINE_MAX_KEPT]; /* last line the build or ld.so printed  */
    char refusal[1536];      /* "refused" verdict: the checks' message    */
    int ok, refused;         /* a final verdict was read                  */
    char pending[4096];      /* a line not yet complete                   */
    size_t pending_len;
} verdict;

static void copy_text(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src);
}

static void take_line(verdict *v, char *line)
{
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\r' || line[n - 1] == ' '))
        line[--n] = '\0';
    size_t mark = sizeof TRIAL_MARK - 1;
    if (strncmp(line, TRIAL_MARK, mark) != 0) {
        if (n) {
            for (char *c = line; *c; c++) /* one-line rule */
                if ((unsigned char)*c < 0x20)
                    *c = ' ';
            copy_text(v->output, sizeof v->output, line);
        }
        return;
    }
    const char *what = line + mark;
    if (strncmp(what, "stage ", 6) == 0)
        copy_text(v->stage, sizeof v->stage, what + 6);
    else if (strcmp(what, "ok") == 0)
        v->ok = 1;
    else if (strncmp(what, "refused ", 8) == 0) {
        v->refused = 1;
        copy_text(v->refusal, sizeof v->refusal, what + 8);
    }
}

/* Split what was read into lines; a line longer than the buffer is cut. */
static void take_bytes(verdict *v, const char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (buf[i] != '\n' && v->pending_len + 1 < sizeof v->pending) {
            v->pending[v->pending_len++] = buf[i];
            continue;
        }
        if (buf[i] != '\n')
            continue; /* too long: drop the rest of the line */
        v->pending[v->pending_len] = '\0';
        take_line(v, v->pending);
        v->pending_len = 0;
    }
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Read the helper's lines until EOF, a verdict or the deadline. 1 when
 * the deadline passed first. */
static int read_verdict(int rfd, verdict *v, long long deadline)
{
    char buf[4096];
    while (!v->ok && !v->refused) {
        long long left = deadline - now_ms();
        if (left <= 0)
            return 1;
        struct pollfd p = {.fd = rfd, .events = POLLIN};
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue; /* timeout: the next turn sees it */
        ssize_t n = read(rfd, buf, sizeof buf);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            break; /* EOF: the helper (and any child of it) is done */
        take_bytes(v, buf, (size_t)n);
    }
    if (v->pending_len) { /* a last line without newline */
        v->pending[v->pending_len] = '\0';
        take_line(v, v->pending);
        v->pending_len = 0;
    }
    return 0;
}

/* Reap pid by the deadline, killing it when it is not done by then.
 * Returns its wait status; *killed is set when the deadline killed it. */
static int reap(pid_t pid, long long deadline, int *killed)
{
    int st = 0;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return st;
        if (r < 0 && errno != EINTR)
            return -1;
        if (now_ms() >= deadline) {
            *killed = 1;
            kill(pid, SIGKILL);
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
            return st;
        }
        struct timespec nap = {0, 2 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
}

static const char *signal_name(int sig, char *buf, size_t len)
{
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev)
        snprintf(buf, len, "SIG%s", abbrev);
    else
        snprintf(buf, len, "signal %d", sig);
    return buf;
}

/* Start `trial_exe KS_PLUGIN_TRIAL_COMMAND path copy` with stderr and fd 3
 * on wfd, stdin and stdout on /dev/null, default signal dispositions and
 * no signal blocked (the calling thread may block some). */
static int spawn_helper(const char *path, const char *copy, int wfd,
                        pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc != 0)
        return rc;
    if ((rc = posix_spawnattr_init(&at)) != 0) {
        posix_spawn_file_actions_destroy(&fa);
        return rc;
    }
    if (!(rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)) &&
        !(rc = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0)) &&
        !(rc = posix_spawn_file_actions_adddup2(&fa, wfd, 2)) &&
        !(rc = posix_spawn_file_actions_adddup2(&fa, wfd, TRIAL_FD)) &&
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 34)
        /* the engine's sockets and stores are none of the helper's business */
        !(rc = posix_spawn_file_actions_addclosefrom_np(&fa, TRIAL_FD + 1)) &&
#endif
        !(rc = posix_spawnattr_setsigmask(&at, &none)) &&
        !(rc = posix_spawnattr_setsigdefault(&at, &all)) &&
        !(rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK |
                                                 POSIX_SPAWN_SETSIGDEF))) {
        char *argv[] = {(char *)"kstreams", (char *)KS_PLUGIN_TRIAL_COMMAND,
                        (char *)path, (char *)copy, NULL};
        rc = posix_spawn(pid, helper_path(), &fa, &at, argv, environ);
    }
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    return rc;
}

/* The one-line refusal for a helper that ended with wait status st. */
static void explain(const char *path, const verdict *v, int st, int killed,
                    char *err, size_t errlen)
{
    const char *where = v->stage[0] ? v->stage : "its start, before dlopen";
    char sig[32];
    if (killed)
        set_err(err, errlen, "%s: trial load did not finish within %d ms "
                "(hung in %s); killed and refused", path, trial_timeout_ms,
                where);
    else if (WIFSIGNALED(st))
        set_err(err, errlen, "%s: trial load crashed (%s in %s)%s%s; refused",
                path, signal_name(WTERMSIG(st), sig, sizeof sig), where,
                v->output[0] ? ": " : "", v->output);
    else if (WIFEXITED(st))
        set_err(err, errlen, "%s: trial load exited with status %d in %s%s%s; "
                "refused", path, WEXITSTATUS(st), where,
                v->output[0] ? ": " : "", v->output);
    else
        set_err(err, errlen, "%s: trial load ended without a verdict (in %s); "
                "refused", path, where);
}

int ks_loader_trial_load(const char *path, const char *copy, char *err,
                         size_t errlen)
{
    if (!trial_exe)
        return 0;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        set_err(err, errlen, "%s: cannot start the trial load: pipe: %s; "
                "refused", path, strerror(errno));
        return -1;
    }
    /* dup2 onto itself would keep O_CLOEXEC: keep the write end above 3 */
    if (fds[1] <= TRIAL_FD) {
        int high = fcntl(fds[1], F_DUPFD_CLOEXEC, TRIAL_FD + 1);
        close(fds[1]);
        fds[1] = high;
    }
    pid_t pid = -1;
    int rc = fds[1] < 0 ? errno : spawn_helper(path, copy, fds[1], &pid);
    if (fds[1] >= 0)
        close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        set_err(err, errlen, "%s: cannot start the trial load (%s): %s; "
                "refused", path, trial_exe, strerror(rc));
        return -1;
    }
    verdict v;
    memset(&v, 0, sizeof v);
    long long deadline = now_ms() + trial_timeout_ms;
    int killed = read_verdict(fds[0], &v, deadline);
    /* the read end stays open until the helper is reaped: a thread of the
     * build still printing after the verdict must not die of SIGPIPE */
    int st = reap(pid, killed ? now_ms() : deadline, &killed);
    int wait_errno = errno;
    close(fds[0]);
    if (st == -1) {
        set_err(err, errlen, "%s: cannot wait for the trial load: %s; "
                "refused", path, strerror(wait_errno));
        return -1;
    }
    if (!killed && WIFEXITED(st) && WEXITSTATUS(st) == 0 && v.ok)
        return 0;
    if (!killed && WIFEXITED(st) && WEXITSTATUS(st) == 0 && v.refused) {
        set_err(err, errlen, "%s", v.refusal);
        return -1;
    }
    explain(path, &v, st, killed, err, errlen);
    return -1;
}
