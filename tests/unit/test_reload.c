/*
 * test_reload.c - the task side of hot deploy, without a broker: a real
 * topology with the reload_* test plugin builds (real dlopen), task 0 on
 * real LMDB stores, and the steps a worker takes at its commit boundary:
 * ks_topology_prepare_swap, ks_task_prepare_node, ks_task_swap_node,
 * ks_task_discard_prepared, and migrations that commit or roll back with
 * the batch.
 */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/commands.h"
#include "loader/plugin.h"
#include "runtime/reload.h"
#include "runtime/rollback.h"
#include "runtime/task.h"
#include "runtime/topology.h"
#include "unit/test_util.h"

#define BUILD(name) KS_TEST_BUILDDIR "/tests/plugins/.libs/" name ".so"

static char tmp[64], copies[128];
static ks_topology *topo;
static ks_task *task;
static char last_out[256];
static int nout;
static int64_t offset;

static int emit(void *arg, ks_task *t, const ks_topo_node *sink, const ks_record *rec)
{
    (void)arg, (void)t, (void)sink;
    snprintf(last_out, sizeof last_out, "%.*s", (int)rec->value_len,
             (const char *)rec->value);
    nout++;
    return 0;
}

static int changelog(void *arg, ks_task *t, int store, ks_bytes key, const ks_bytes *value)
{
    (void)arg, (void)t, (void)store, (void)key, (void)value;
    return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static int version_records, last_version = -1;

static int changelog_versions(void *arg, ks_task *t, int store, ks_bytes key,
                              const ks_bytes *value)
{
    (void)arg, (void)t, (void)store;
    if (ks_task_is_version_key(key) && value && value->len == 4) {
        const unsigned char *b = value->data;
        version_records++;
        last_version = b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3];
    }
    return 0;
}

/* Topology on `build` and task 0 on the state under tmp (kept from an
 * earlier open_on), then ks_task_check_versions: its return. */
static int open_on(const char *build, char *err, size_t errlen)
{
    char yaml[2048];
    int n = snprintf(yaml, sizeof yaml,
                     "application: reload-test\n"
                     "kafka: { bootstrap: 127.0.0.1:9092 }\n"
                     "state_dir: \"%s/state\"\n"
                     "plugins: [\"%s\"]\n"
                     "sources:\n  in: { topic: in, key: string, value: string }\n"
                     "nodes:\n  - { name: tag, type: reload.tag, from: in, store: counts }\n"
                     "sinks:\n  - { from: tag, topic: out, key: string, value: string }\n",
                     tmp, build);
    ks_pipeline *p = NULL;
    CU_ASSERT_EQUAL_FATAL(ks_pipeline_parse("reload.yaml", yaml, (size_t)n, &p, err, errlen), 0);
    CU_ASSERT_EQUAL_FATAL(ks_topology_build(p, ks_host_api_table(), copies, &topo, err, errlen),
                          0);
    ks_task_io io = {.emit = emit, .changelog = changelog_versions};
    CU_ASSERT_EQUAL_FATAL(ks_task_create(topo, 0, &io, &task, err, errlen), 0);
    return ks_task_check_versions(task, err, errlen);
}

static void close_task_only(void)
{
    ks_task_destroy(task);
    ks_topology_free(topo);
    task = NULL;
    topo = NULL;
}

static void start(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/ks-reload-test-XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmp));
    snprintf(copies, sizeof copies, "%s/copies", tmp);
    char yaml[2048];
    int n = snprintf(yaml, sizeof yaml,
                     "application: reload-test\n"
                     "kafka: { bootstrap: 127.0.0.1:9092 }\n"
                     "state_dir: \"%s/state\"\n"
                     "plugins: [\"%s\"]\n"
                     "sources:\n  in: { topic: in, key: string, value: string }\n"
                     "nodes:\n  - { name: tag, type: reload.tag, from: in, store: counts }\n"
                     "sinks:\n  - { from: tag, topic: out, key: string, value: string }\n",
                     tmp, BUILD("reload_v1"));
    ks_pipeline *p = NULL;
    char err[1024] = "";
    CU_ASSERT_EQUAL_FATAL(ks_pipeline_parse("reload.yaml", yaml, (size_t)n, &p, err, sizeof err), 0);
    int rc = ks_topology_build(p, ks_host_api_table(), copies, &topo, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    ks_task_io io = {.emit = emit, .changelog = changelog};
    CU_ASSERT_EQUAL_FATAL(ks_task_create(topo, 0, &io, &task, err, sizeof err), 0);
}

static void stop(void)
{
    ks_task_destroy(task);
    ks_topology_free(topo);
    nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    task = NULL;
    topo = NULL;
}

static ks_verdict feed(const char *key)
{
    ks_record rec = {.key = key, .key_len = strlen(key), .value = "x", .value_len = 1,
                     .timestamp = 1000, .topic = "in", .partition = 0, .offset = offset++};
    return ks_task_process(task, &topo->nodes[0], &rec);
}

static const ks_topo_node *tag_node(void)
{
    return ks_topology_node(topo, "tag");
}

/* Open `path` as a new build and prepare node tag on it: the return of
 * ks_task_prepare_node, or -2 when the topology check refused it. *pl and
 * *fns are the caller's to close/free. */
static int prepare(const char *path, ks_plugin **pl, ks_topo_fn **fns, char *err,
                   size_t errlen)
{
    CU_ASSERT_EQUAL_FATAL(ks_plugin_open(path, copies, ks_host_api_table(), pl, err, errlen), 0);
    const ks_processor_type *pt = NULL;
    int rc = ks_topology_prepare_swap(tag_node(), *pl, &pt, fns, err, errlen);
    if (rc != 1)
        return -2;
    ks_node_build b = {.plugin = *pl, .ptype = pt, .fns = *fns, .fn_count = 0};
    const struct ks_ctx *live = ks_task_live(task, tag_node()->index);
    return ks_task_prepare_node(task, tag_node(), &b, live->build.ptype->state_version, err,
                                errlen);
}

static void test_swap_at_boundary(void)
{
    start();
    feed("a");
    feed("a");
    CU_ASSERT_STRING_EQUAL(last_out, "v1 2 x");
    CU_ASSERT_EQUAL(ks_task_commit_stores(task), 0);

    ks_plugin *v2 = NULL;
    ks_topo_fn *fns = NULL;
    char err[1024] = "";
    CU_ASSERT_EQUAL(prepare(BUILD("reload_v2"), &v2, &fns, err, sizeof err), 0);
    feed("a"); /* prepared, not swapped: still v1 */
    CU_ASSERT_STRING_EQUAL(last_out, "v1 3 x");
    CU_ASSERT_EQUAL(ks_task_commit_stores(task), 0);
    CU_ASSERT_EQUAL(ks_task_swap_node(task, tag_node()->index), 1);
    CU_ASSERT_EQUAL(ks_task_swap_node(task, tag_node()->index), 0); /* once */
    feed("a"); /* the new build, same store: the count goes on */
    CU_ASSERT_STRING_EQUAL(last_out, "v2 4 x");
    CU_ASSERT_EQUAL(ks_task_commit_stores(task), 0);

    /* a prepared build that is then refused: discard leaves v2 running */
    ks_plugin *v1 = NULL;
    ks_topo_fn *fns1 = NULL;
    CU_ASSERT_EQUAL(prepare(BUILD("reload_v1"), &v1, &fns1, err, sizeof err), 0);
    ks_task_discard_prepared(task);
    CU_ASSERT_EQUAL(ks_task_swap_node(task, tag_node()->index), 0);
    feed("a");
    CU_ASSERT_STRING_EQUAL(last_out, "v2 5 x");
    ks_plugin_close(v1);
    free(fns1);
    ks_task_destroy(task); /* closes v2's instance before v2 is unloaded */
    task = NULL;
    ks_plugin_close(v2);
    free(fns);
    stop();
}

static void test_refused_builds(void)
{
    start();
    char err[1024] = "";
    ks_plugin *pl = NULL;
    ks_topo_fn *fns = NULL;
    CU_ASSERT_EQUAL(prepare(BUILD("reload_noproc"), &pl, &fns, err, sizeof err), -2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "reload.yaml:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "has no processor type 'tag'"));
    CU_ASSERT_PTR_NULL(fns);
    ks_plugin_close(pl);

    err[0] = '\0';
    CU_ASSERT_EQUAL(prepare(BUILD("reload_initfail"), &pl, &fns, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "init of node 'tag'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "reload-initfail"));
    CU_ASSERT_EQUAL(ks_task_swap_node(task, tag_node()->index), 0); /* nothing kept */
    feed("b");
    CU_ASSERT_STRING_EQUAL(last_out, "v1 1 x");
    ks_plugin_close(pl);
    free(fns);
    stop();
}

static int64_t migrations(void)
{
    const struct ks_ctx *live = ks_task_live(task, tag_node()->index);
    ks_bytes v;
    if (ks_store_get(live->stores[0].db, (ks_bytes){"__migrations", 12}, &v) != 0)
        return 0;
    return v.len == 8 ? ks_int64_decode(v.data) : -1;
}

static void test_migration_commits_with_the_batch(void)
{
    start();
    feed("c");
    CU_ASSERT_EQUAL(ks_task_commit_stores(task), 0);
    ks_plugin *pl = NULL;
    ks_topo_fn *fns = NULL;
    char err[1024] = "";
    CU_ASSERT_EQUAL(prepare(BUILD("reload_migrate"), &pl, &fns, err, sizeof err), 0);
    CU_ASSERT_EQUAL(ks_task_swap_node(task, tag_node()->index), 1);
    CU_ASSERT_EQUAL(migrations(), 0); /* not before the first batch */
    CU_ASSERT_EQUAL(feed("c"), KS_OK);
    CU_ASSERT_STRING_EQUAL(last_out, "v2 2 x");
    ks_task_abort_stores(task); /* the batch aborts: so does the migration */
    CU_ASSERT_EQUAL(migrations(), 0);
    CU_ASSERT_EQUAL(feed("c"), KS_OK); /* the replay migrates again */
    CU_ASSERT_EQUAL(ks_task_commit_stores(task), 0);
    CU_ASSERT_EQUAL(migrations(), 1);
    CU_ASSERT_EQUAL(feed("c"), KS_OK); /* committed: never again */
    CU_ASSERT_EQUAL(ks_task_commit_stores(task), 0);
    CU_ASSERT_EQUAL(migrations(), 1);
    CU_ASSERT_STRING_EQUAL(last_out, "v2 3 x");
    ks_task_destroy(task);
    task = NULL;
    ks_plugin_close(pl);
    free(fns);
    stop();
}

static int stored_version(void)
{
    const struct ks_ctx *live = ks_task_live(task, tag_node()->index);
    uint32_t v = 0;
    int rc = ks_store_version_get(live->stores[0].db, &v);
    ks_store_read_end(task->env);
    return rc == 0 ? (int)v : rc;
}

/* "m=N" of reload_fmt2's __migrations, 0 when absent. */
static int fmt2_migrations(void)
{
    const struct ks_ctx *live = ks_task_live(task, tag_node()->index);
    ks_bytes v;
    int n = 0;
    char txt[32] = "";
    if (ks_store_get(live->stores[0].db, (ks_bytes){"__migrations", 12}, &v) == 0 &&
        v.len < sizeof txt)
        memcpy(txt, v.data, v.len);
    ks_store_read_end(task->env);
    return sscanf(txt, "m=%d", &n) == 1 ? n : 0;
}

/* The version is kept in the store and checked at every open: stamped by
 * the first build, migrated once (in one batch with the bump, again after
 * an abort), never downgraded, never migrated without migrate(). */
static void test_versions_kept_with_the_state(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/ks-reload-test-XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmp));
    snprintf(copies, sizeof copies, "%s/copies", tmp);
    char err[1024] = "";
    version_records = 0;
    CU_ASSERT_EQUAL(open_on(BUILD("reload_v1"), err, sizeof err), 0);
    CU_ASSERT_EQUAL(stored_version(), KS_ERR_NOT_FOUND); /* a new store */
    feed("a");
    CU_ASSERT_STRING_EQUAL(last_out, "v1 1 x");
    CU_ASSERT_EQUAL(ks_task_commit_stores(task), 0);
    CU_ASSERT_EQUAL(stored_version(), 1); /* stamped with the first batch */
    CU_ASSERT_EQUAL(version_records, 1);  /* and in the changelog */
    CU_ASSERT_EQUAL(last_version, 1);
    feed("a");
    CU_ASSERT_EQUAL(ks_task_commit_stores(task), 0);
    CU_ASSERT_EQUAL(version_records, 1); /* once */
    close_task_only();

    /* a build of version 2 without migrate() cannot open a version-1 store */
    CU_ASSERT_EQUAL(open_on(BUILD("reload_state2"), err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "store 'counts' holds state version 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "has no migrate()"));
    close_task_only();

    /* cold upgrade: fmt2 migrates in its first batch, with the bump */
    CU_ASSERT_EQUAL(open_on(BUILD("reload_fmt2"), err, sizeof err), 0);
    CU_ASSERT_EQUAL(stored_version(), 1);
    CU_ASSERT_EQUAL(feed("a"), KS_OK);
    CU_ASSERT_STRING_EQUAL(last_out, "v2 3 x"); /* read the converted "c=2" */
    ks_task_abort_stores(task);                 /* rolled back: all of it */
    CU_ASSERT_EQUAL(stored_version(), 1);
    CU_ASSERT_EQUAL(fmt2_migrations(), 0);
    CU_ASSERT_EQUAL(feed("a"), KS_OK); /* the replay migrates again */
    CU_ASSERT_STRING_EQUAL(last_out, "v2 3 x");
    CU_ASSERT_EQUAL(ks_task_commit_stores(task), 0);
    CU_ASSERT_EQUAL(stored_version(), 2);
    CU_ASSERT_EQUAL(fmt2_migrations(), 1);
    CU_ASSERT_EQUAL(last_version, 2);
    close_task_only();

    /* the next open finds version 2: no migration */
    CU_ASSERT_EQUAL(open_on(BUILD("reload_fmt2"), err, sizeof err), 0);
    CU_ASSERT_EQUAL(feed("a"), KS_OK);
    CU_ASSERT_STRING_EQUAL(last_out, "v2 4 x");
    CU_ASSERT_EQUAL(ks_task_commit_stores(task), 0);
    CU_ASSERT_EQUAL(fmt2_migrations(), 1);
    close_task_only();

    /* no downgrade */
    err[0] = '\0';
    CU_ASSERT_EQUAL(open_on(BUILD("reload_v1"), err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "store 'counts' holds state version 2"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "does not downgrade"));
    close_task_only();
    nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The restore applies a version record to __meta, never to the data. */
static void test_restore_applies_version_records(void)
{
    start();
    ks_bytes two = {"\0\0\0\2", 4}, bad = {"\2", 1};
    CU_ASSERT_EQUAL(ks_task_restore_put(task, 0, (ks_bytes){"a", 1}, &two, 0), 0);
    CU_ASSERT_EQUAL(ks_task_restore_put(task, 0, ks_task_version_key(), &two, 1), 0);
    CU_ASSERT_EQUAL(ks_task_commit_stores(task), 0);
    CU_ASSERT_EQUAL(stored_version(), 2);
    uint64_t n = 0;
    CU_ASSERT_EQUAL(ks_store_count(task->dbs[0], &n), 0);
    CU_ASSERT_EQUAL(n, 1); /* only "a" */
    CU_ASSERT_EQUAL(ks_task_restore_put(task, 0, ks_task_version_key(), &bad, 2), KS_ERR_IO);
    ks_task_abort_stores(task);
    CU_ASSERT_EQUAL(stored_version(), 2);
    /* a 500-byte store key is a store key, not the version record */
    char k500[KS_VERSION_KEY_LEN - 1];
    memcpy(k500, ks_task_version_key().data, sizeof k500);
    CU_ASSERT_FALSE(ks_task_is_version_key((ks_bytes){k500, sizeof k500}));
    stop();
}

/* A swap of a build whose stores still owe a migration: the new build
 * migrates from the format the stores are in, not from the old build's. */
static void test_swap_keeps_the_owed_migration(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/ks-reload-test-XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmp));
    snprintf(copies, sizeof copies, "%s/copies", tmp);
    char err[1024] = "";
    CU_ASSERT_EQUAL(open_on(BUILD("reload_v1"), err, sizeof err), 0);
    feed("d");
    CU_ASSERT_EQUAL(ks_task_commit_stores(task), 0);
    ks_plugin *pl = NULL;
    ks_topo_fn *fns = NULL;
    CU_ASSERT_EQUAL(prepare(BUILD("reload_fmt2"), &pl, &fns, err, sizeof err), 0);
    CU_ASSERT_EQUAL(ks_task_swap_node(task, tag_node()->index), 1);
    CU_ASSERT_EQUAL(feed("d"), KS_OK);
    CU_ASSERT_STRING_EQUAL(last_out, "v2 2 x");
    CU_ASSERT_EQUAL(ks_task_commit_stores(task), 0);
    CU_ASSERT_EQUAL(stored_version(), 2);
    CU_ASSERT_EQUAL(fmt2_migrations(), 1);
    ks_task_destroy(task);
    task = NULL;
    ks_plugin_close(pl);
    free(fns);
    stop();
}

/* `kstreams status` after kill -9: status.json is still there, the pid in
 * kstreams.pid is gone. Before the fix it printed the dead engine's status
 * and returned 0. */
static void test_status_of_a_dead_engine(void)
{
    char dir[64] = "/tmp/ks-status-test-XXXXXX", path[512], app[128], file[128];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    snprintf(file, sizeof file, "%s/p.yaml", dir);
    FILE *f = fopen(file, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "application: dead\nkafka: { bootstrap: 127.0.0.1:9092 }\n"
               "state_dir: \"%s/state\"\n"
               "sources:\n  in: { topic: in }\nsinks:\n  - { from: in, topic: out }\n",
            dir);
    fclose(f);
    snprintf(app, sizeof app, "%s/state", dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(app, 0755), 0);
    snprintf(app, sizeof app, "%s/state/dead", dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(app, 0755), 0);
    snprintf(path, sizeof path, "%s/status.json", app);
    f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "{\"reload\": {\"attempts\": 3, \"swapped\": 1, \"refused\": 2}}\n");
    fclose(f);

    char *out_text = NULL, *err_text = NULL;
    size_t out_len = 0, err_len = 0;
    FILE *out = open_memstream(&out_text, &out_len), *errf = open_memstream(&err_text, &err_len);

    /* no pid file at all */
    CU_ASSERT_EQUAL(ks_cmd_status(2, (char *[]){"status", file, NULL}, out, errf), 2);
    fflush(errf);
    CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "not running: no pid file"));

    /* the pid of a process that has exited (and been reaped) */
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    CU_ASSERT_FATAL(child > 0);
    waitpid(child, NULL, 0);
    snprintf(path, sizeof path, "%s/kstreams.pid", app);
    f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "%ld\n", (long)child);
    fclose(f);
    CU_ASSERT_EQUAL(ks_cmd_status(2, (char *[]){"status", file, NULL}, out, errf), 2);
    fflush(out);
    fflush(errf);
    CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "not running: pid "));
    CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "is gone"));
    CU_ASSERT_EQUAL(out_len, 0); /* nothing of the dead engine printed */
    /* reload decides the same way */
    CU_ASSERT_EQUAL(ks_cmd_reload(2, (char *[]){"reload", file, NULL}, out, errf), 2);

    /* a live pid (this process): the document is printed, exit 0 */
    f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "%ld\n", (long)getpid());
    fclose(f);
    CU_ASSERT_EQUAL(ks_cmd_status(2, (char *[]){"status", file, NULL}, out, errf), 0);
    fflush(out);
    CU_ASSERT_PTR_NOT_NULL(strstr(out_text, "reload: 3 attempts, 1 swapped, 2 refused"));

    fclose(out);
    fclose(errf);
    free(out_text);
    free(err_text);
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Crash history: counted per plugin and build within the window, pruned;
 * good builds: the last two of different ids, found skipping the bad one. */
static void test_rollback_history_and_builds(void)
{
    char dir[64] = "/tmp/ks-rollback-XXXXXX", hist[128], good[128], so[128];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    snprintf(hist, sizeof hist, "%s/crash-history", dir);
    snprintf(good, sizeof good, "%s/good-builds", dir);
    FILE *f = fopen(hist, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "1000\tp\tb2\n"    /* too old */
               "1500\tp\tb2\n1600\tp\tb2\nbroken line\n1700\tq\tb2\n1800\tp\tb1\n"
               "1900\tp\tb2\n");
    fclose(f);
    CU_ASSERT_EQUAL(ks_rollback_count_crashes(hist, "p", "b2", 2000, 600000), 3);
    CU_ASSERT_EQUAL(ks_rollback_count_crashes(hist, "p", "b1", 2000, 600000), 1);
    CU_ASSERT_EQUAL(ks_rollback_count_crashes(hist, "p", "b2", 2000, 150000), 1);
    CU_ASSERT_EQUAL(ks_rollback_count_crashes("/nonexistent/h", "p", "b2", 2000, 600000), 0);
    char err[512];
    CU_ASSERT_EQUAL(ks_rollback_prune_history(hist, 2000, 450000, err, sizeof err), 0);
    CU_ASSERT_EQUAL(ks_rollback_count_crashes(hist, "p", "b2", 2000, 100000000), 2);
    CU_ASSERT_EQUAL(ks_rollback_count_crashes(hist, "q", "b2", 2000, 100000000), 1);
    /* times at the ends of int64 (found by fuzz_decoders: (now - secs) *
     * 1000 overflowed): the ancient one is old, the future one recent */
    f = fopen(hist, "a");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "-9223372036854775808\tp\tb2\n9223372036854775807\tp\tb2\n"
               "-9223372036854\tp\tb2\n");
    fclose(f);
    CU_ASSERT_EQUAL(ks_rollback_count_crashes(hist, "p", "b2", 2000, 100000000), 3);
    CU_ASSERT_EQUAL(ks_rollback_count_crashes(hist, "p", "b2", 2000, INT64_MAX), 4);
    /* a line cut by NULs (a power loss after an append) keeps its newline
     * when pruned (found by fuzz_decoders: it swallowed the next line) */
    static const char cut[] = "1950\tp\tb9\0\0\n1960\tp\tb9\n";
    f = fopen(hist, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fwrite(cut, 1, sizeof cut - 1, f);
    fclose(f);
    CU_ASSERT_EQUAL(ks_rollback_count_crashes(hist, "p", "b9", 2000, 600000), 2);
    CU_ASSERT_EQUAL(ks_rollback_prune_history(hist, 2000, 600000, err, sizeof err), 0);
    CU_ASSERT_EQUAL(ks_rollback_count_crashes(hist, "p", "b9", 2000, 600000), 2);

    char path[4200], build[256];
    CU_ASSERT_EQUAL(ks_rollback_find(good, "p", "b2", path, sizeof path, build, sizeof build), 0);
    snprintf(so, sizeof so, "%s/b1.so", dir);
    f = fopen(so, "w");
    fputs("build one", f);
    fclose(f);
    CU_ASSERT_EQUAL(ks_rollback_keep(good, "p", "b1", so, err, sizeof err), 0);
    CU_ASSERT_EQUAL(ks_rollback_kept_build(good, "p", build, sizeof build), 1);
    CU_ASSERT_STRING_EQUAL(build, "b1");
    CU_ASSERT_EQUAL(ks_rollback_find(good, "p", "b2", path, sizeof path, build, sizeof build), 1);
    CU_ASSERT_STRING_EQUAL(build, "b1");
    /* b2 committed a batch too (it crashes later on): b1 is the way back */
    CU_ASSERT_EQUAL(ks_rollback_keep(good, "p", "b2", so, err, sizeof err), 0);
    CU_ASSERT_EQUAL(ks_rollback_find(good, "p", "b2", path, sizeof path, build, sizeof build), 1);
    CU_ASSERT_STRING_EQUAL(build, "b1");
    CU_ASSERT_PTR_NOT_NULL(strstr(path, "p.prev.so"));
    CU_ASSERT_EQUAL(ks_rollback_find(good, "p", "b1", path, sizeof path, build, sizeof build), 1);
    CU_ASSERT_STRING_EQUAL(build, "b2");
    f = fopen(path, "r");
    char text[32] = "";
    CU_ASSERT_PTR_NOT_NULL(f && fgets(text, sizeof text, f));
    if (f)
        fclose(f);
    CU_ASSERT_STRING_EQUAL(text, "build one");
    CU_ASSERT_EQUAL(ks_rollback_find(good, "other", "b1", path, sizeof path, build,
                                     sizeof build), 0);
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void ks_test_register_reload(void)
{
    CU_pSuite s = CU_add_suite("reload", NULL, NULL);
    CU_add_test(s, "swap at the boundary: once, counts go on, discard", test_swap_at_boundary);
    CU_add_test(s, "missing type and failing init are refused", test_refused_builds);
    CU_add_test(s, "migration commits and aborts with its batch", test_migration_commits_with_the_batch);
    CU_add_test(s, "status of a killed engine: not running, exit 2", test_status_of_a_dead_engine);
    CU_add_test(s, "rollback: crash history and good builds", test_rollback_history_and_builds);
    CU_add_test(s, "state version kept in the store: stamp, migrate once, no downgrade",
                test_versions_kept_with_the_state);
    CU_add_test(s, "restore applies version records to __meta", test_restore_applies_version_records);
    CU_add_test(s, "a swap migrates from the format the stores are in",
                test_swap_keeps_the_owed_migration);
}
