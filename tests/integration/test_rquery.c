/*
 * test_rquery.c - remote interactive queries (docs/scaling.md "Remote
 * queries") on a real broker: two engine processes of one application, a
 * count over 4 partitions, each process serving its tasks' stores with
 * `query: { listen }`. `kstreams query --remote` of every key against
 * EACH process returns the same count, the expected one (a key the asked
 * process does not hold is redirected to its holder, found by describing
 * the group); a key range spans both processes; a missing key is 404
 * (exit 3); a malformed request is 400 with the reason; a request without
 * the token of a process that has one is 401; `check` refuses a
 * non-loopback listen address without a token, at its line and column.
 * Then a third process with an empty state directory takes every task
 * and restores it slowly (KS_PAUSE_AT=during-restore): a query meanwhile
 * is 503 with the restore's progress, never an old or partial count, and
 * the right count once the restore is done; with `standby=1` (`--standby`)
 * it is answered from the restoring store, marked stale. Without standby
 * replicas, `standby=1` of a task another process runs is redirected to
 * it and answered fresh.
 */
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "itest.h"

#define KEYS 10
#define RECORDS 400 /* 40 per key */

static char dir[256], app[128], in_topic[128], out_topic[128];

static void make_rec(int i, char *key, size_t klen, char *value, size_t vlen,
                     int32_t *partition, void *arg)
{
    (void)partition;
    (void)arg;
    snprintf(key, klen, "key-%d", i % KEYS);
    snprintf(value, vlen, "v%d", i);
}

/* Run `kstreams ARGS`; stdout into out, stderr into errout (either may be
 * NULL). The exit status, -1 when it did not exit. */
static int kstreams(const char *args, char *out, size_t outlen)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", it_kstreams(), args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = out ? fread(out, 1, outlen - 1, p) : 0;
    if (out)
        out[n] = '\0';
    char sink[4096];
    while (fread(sink, 1, sizeof sink, p) > 0)
        ;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* One process's pipeline: its own state directory and query port; `token`
 * NULL for none. */
static void write_yaml(const char *path, const char *name, int port, const char *token)
{
    char tok[128] = "";
    if (token)
        snprintf(tok, sizeof tok, ", token: %s", token);
    it_write_file(path,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s] }\n"
                  "guarantee: exactly-once\n"
                  "commit_interval_ms: 100\n"
                  "state_dir: %s/state-%s\n"
                  "plugin_path: [%s/plugins/.libs]\n"
                  "query: { listen: 127.0.0.1:%d%s }\n"
                  "sources:\n"
                  "  in: { topic: %s, key: string, value: string }\n"
                  "nodes:\n"
                  "  - { name: per_key, type: count, from: in, store: counts, cache_bytes: 0 }\n"
                  "  - { name: per_hour, type: count, from: in, store: hourly, cache_bytes: 0,\n"
                  "      window: { kind: tumbling, size: 1h, retention: 1d } }\n"
                  "sinks:\n"
                  "  - { from: per_key, topic: %s, key: string, value: int64, create: true }\n"
                  "  - { from: per_hour, topic: %s-hourly, key: json, value: int64, create: true }\n",
                  app, it_bootstrap(), dir, name, KS_TEST_BUILDDIR, port, tok, in_topic,
                  out_topic, out_topic);
}

/* The count of `key` asked of the process at `port` with yaml's token: the
 * value, -1 when the query failed. */
static long remote_count(const char *yaml, int port, const char *key)
{
    char args[1024], out[4096];
    snprintf(args, sizeof args, "query %s counts --remote http://127.0.0.1:%d --key %s --int64",
             yaml, port, key);
    if (kstreams(args, out, sizeof out) != 0)
        return -1;
    json_t *doc = json_loads(out, 0, NULL);
    long v = json_is_integer(json_object_get(doc, "value"))
                 ? (long)json_integer_value(json_object_get(doc, "value"))
                 : -1;
    json_decref(doc);
    return v;
}

/* Standby reads where there is no standby (`standby_replicas` 0): of each
 * task A does not run, `standby=1` is redirected like any request (307,
 * the flag along) and the owner answers fresh: unmarked, the same entries
 * as without the flag. How many of A's remote tasks did so; -1 on a
 * failed query. */
static int no_copy_reads(const char *yaml, int port)
{
    char path[256], args[1024], err[512];
    static char plain_out[1 << 16], flag_out[1 << 16];
    snprintf(err, sizeof err, "%s/query.err", dir);
    int redirected = 0;
    for (int p = 0; p < 4; p++) {
        snprintf(path, sizeof path, "/v1/query?store=counts&partition=%d", p);
        int plain = it_http(port, "GET", path, NULL, NULL, 0);
        snprintf(path, sizeof path, "/v1/query?store=counts&partition=%d&standby=1", p);
        int flagged = it_http(port, "GET", path, NULL, NULL, 0);
        snprintf(args, sizeof args, "query %s counts --remote http://127.0.0.1:%d --partition %d "
                                    "--int64", yaml, port, p);
        if (it_kstreams_run(args, plain_out, sizeof plain_out, err) != 0)
            return -1;
        snprintf(args, sizeof args, "query %s counts --remote http://127.0.0.1:%d --partition %d "
                                    "--int64 --standby", yaml, port, p);
        if (it_kstreams_run(args, flag_out, sizeof flag_out, err) != 0)
            return -1;
        int unmarked = it_log_count(err, "stale") == 0;
        redirected += plain == 307 && flagged == 307 && unmarked &&
                      strcmp(plain_out, flag_out) == 0 && strlen(plain_out) > 2;
    }
    return redirected;
}

static void test_remote_queries(void)
{
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, "rquery");
    it_unique(in_topic, sizeof in_topic, "rquery-in");
    it_unique(out_topic, sizeof out_topic, "rquery-out");
    CU_ASSERT_FATAL(it_create_topic(in_topic, 4) == 0);
    int base = it_port_base(3);
    CU_ASSERT_FATAL(base > 0);
    int port_a = base, port_b = base + 1;
    char yaml_a[512], yaml_b[512], log_a[512], log_b[512];
    snprintf(yaml_a, sizeof yaml_a, "%s/a.yaml", dir);
    snprintf(yaml_b, sizeof yaml_b, "%s/b.yaml", dir);
    snprintf(log_a, sizeof log_a, "%s/a.log", dir);
    snprintf(log_b, sizeof log_b, "%s/b.log", dir);
    /* B wants a token, A (loopback) none: yaml_b's token reaches both */
    write_yaml(yaml_a, "a", port_a, NULL);
    write_yaml(yaml_b, "b", port_b, "s3cret");

    pid_t a = it_engine_start(yaml_a, "a", log_a);
    pid_t b = it_engine_start(yaml_b, "b", log_b);
    CU_ASSERT_FATAL(a > 0 && b > 0);
    CU_ASSERT_FATAL(it_http_wait(port_a, "/v1/tasks", 60000) == 0);
    CU_ASSERT_FATAL(it_http_wait(port_b, "/v1/tasks", 60000) == 0);
    CU_ASSERT_FATAL(it_produce(in_topic, RECORDS, make_rec, NULL) == 0);

    /* processed when every key counts RECORDS / KEYS, asked of A */
    int64_t until = it_now_ms() + 120000;
    int done = 0;
    while (!done && it_now_ms() < until) {
        done = 1;
        for (int k = 0; k < KEYS && done; k++) {
            char key[16];
            snprintf(key, sizeof key, "key-%d", k);
            done = remote_count(yaml_b, port_a, key) == RECORDS / KEYS;
        }
        if (!done)
            it_sleep_ms(500);
    }
    CU_ASSERT_FATAL(done);
    /* both processes run tasks: a key of each is somewhere else for the other */
    CU_ASSERT(it_log_count(log_a, "started") > 0);
    CU_ASSERT(it_log_count(log_b, "started") > 0);

    /* every key, asked of each process: the same, expected count */
    int same = 0;
    for (int k = 0; k < KEYS; k++) {
        char key[16];
        snprintf(key, sizeof key, "key-%d", k);
        long va = remote_count(yaml_b, port_a, key), vb = remote_count(yaml_b, port_b, key);
        CU_ASSERT_EQUAL(va, RECORDS / KEYS);
        CU_ASSERT_EQUAL(vb, RECORDS / KEYS);
        same += va == vb && va == RECORDS / KEYS;
    }
    printf("\n  %d of %d keys: the same count from both processes\n", same, KEYS);
    int remote = 0;
    for (int p = 0; p < 4; p++) {
        char path[128];
        snprintf(path, sizeof path, "/v1/query?store=counts&partition=%d", p);
        remote += it_http(port_a, "GET", path, NULL, NULL, 0) == 307;
    }
    int redirected = no_copy_reads(yaml_b, port_a);
    printf("  standby=1 where no copy is: %d of A's %d remote tasks redirected, answered fresh\n",
           redirected, remote);
    CU_ASSERT(remote > 0);
    CU_ASSERT_EQUAL(redirected, remote);

    /* a key range over every partition, from each process */
    for (int i = 0; i < 2; i++) {
        char args[1024], out[8192];
        snprintf(args, sizeof args,
                 "query %s counts --remote http://127.0.0.1:%d --from key-2 --to key-5 --int64",
                 yaml_b, i ? port_b : port_a);
        CU_ASSERT_EQUAL(kstreams(args, out, sizeof out), 0);
        json_t *doc = json_loads(out, 0, NULL);
        CU_ASSERT(json_is_array(doc) && json_array_size(doc) == 3);
        long sum = 0;
        size_t j;
        json_t *o;
        json_array_foreach(doc, j, o) sum += (long)json_integer_value(json_object_get(o, "value"));
        CU_ASSERT_EQUAL(sum, 3L * RECORDS / KEYS);
        json_decref(doc);
    }

    /* a windowed store: the windows of one key, and of every key in a
     * time range (record times are the produce times: now) */
    char args[1024], out[8192];
    for (int i = 0; i < 3; i++) {
        static const char *const what[] = {"--key key-5", "--key key-5 --from 0",
                                           "--from 2020-01-01T00:00:00Z"};
        snprintf(args, sizeof args, "query %s hourly --remote http://127.0.0.1:%d %s --int64",
                 yaml_b, i == 1 ? port_b : port_a, what[i]);
        CU_ASSERT_EQUAL(kstreams(args, out, sizeof out), 0);
        json_t *doc = json_loads(out, 0, NULL);
        long sum = 0;
        size_t j;
        json_t *o;
        json_array_foreach(doc, j, o) {
            sum += (long)json_integer_value(json_object_get(o, "value"));
            CU_ASSERT(json_integer_value(json_object_get(o, "end")) -
                          json_integer_value(json_object_get(o, "start")) == 3600000);
        }
        CU_ASSERT(json_is_array(doc));
        CU_ASSERT_EQUAL(sum, i < 2 ? RECORDS / KEYS : RECORDS);
        json_decref(doc);
    }
    snprintf(args, sizeof args,
             "query %s hourly --remote http://127.0.0.1:%d --key key-5 --from 4000000000000",
             yaml_b, port_a);
    CU_ASSERT_EQUAL(kstreams(args, out, sizeof out), 3); /* no window starts then */

    /* a missing key: 404, exit 3 */
    snprintf(args, sizeof args, "query %s counts --remote http://127.0.0.1:%d --key nokey",
             yaml_b, port_a);
    CU_ASSERT_EQUAL(kstreams(args, out, sizeof out), 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "404"));
    /* a bad request: 400 with the reason */
    char resp[2048];
    CU_ASSERT_EQUAL(it_http(port_a, "GET", "/v1/query?store=counts&key=x&bogus=1", NULL, resp,
                            sizeof resp), 400);
    CU_ASSERT_PTR_NOT_NULL(strstr(resp, "unknown parameter 'bogus'"));
    CU_ASSERT_EQUAL(it_http(port_a, "GET", "/v1/query?store=counts", NULL, resp, sizeof resp),
                    400);
    CU_ASSERT_PTR_NOT_NULL(strstr(resp, "partition=P"));
    CU_ASSERT_EQUAL(it_http(port_a, "GET", "/v1/query?store=nostore&key=x", NULL, resp,
                            sizeof resp), 404);
    /* B has a token: without it, refused (directly and through the CLI) */
    CU_ASSERT_EQUAL(it_http(port_b, "GET", "/v1/query?store=counts&key=key-1", NULL, resp,
                            sizeof resp), 401);
    snprintf(args, sizeof args, "query %s counts --remote http://127.0.0.1:%d --key key-1",
             yaml_a, port_b);
    CU_ASSERT_EQUAL(kstreams(args, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "401"));

    CU_ASSERT_EQUAL(it_engine_stop(a, 30000), 0);
    CU_ASSERT_EQUAL(it_engine_stop(b, 30000), 0);

    /* C restores every task from the changelogs, 30 ms per record */
    char yaml_c[512], log_c[512];
    snprintf(yaml_c, sizeof yaml_c, "%s/c.yaml", dir);
    snprintf(log_c, sizeof log_c, "%s/c.log", dir);
    write_yaml(yaml_c, "c", base + 2, NULL);
    pid_t c = it_engine_start_env(yaml_c, "c", log_c, "KS_PAUSE_AT=during-restore:30");
    CU_ASSERT_FATAL(c > 0);
    int restoring = 0, wrong = 0, stale = 0, stale_wrong = 0, stale_found = 0;
    long final = -1;
    char sargs[1024], sout[4096], serr[512];
    snprintf(serr, sizeof serr, "%s/stale.err", dir);
    snprintf(sargs, sizeof sargs, "query %s counts --remote http://127.0.0.1:%d --key key-1 "
                                  "--int64 --standby", yaml_c, base + 2);
    until = it_now_ms() + 120000;
    snprintf(args, sizeof args, "query %s counts --remote http://127.0.0.1:%d --key key-1 --int64",
             yaml_c, base + 2);
    while (it_now_ms() < until) {
        int rc = kstreams(args, out, sizeof out);
        if (rc == 1 && strstr(out, "HTTP 503") == NULL && strstr(out, "\"restore\":{\"store\":\"counts\""))
            restoring++;
        /* with standby=1 the restoring store answers what it has so far
         * (404 before the key is replayed), marked stale */
        int src = it_kstreams_run(sargs, sout, sizeof sout, serr);
        if (rc != 0 && it_log_count(serr, "stale, from a restoring copy") == 1) {
            json_t *doc = json_loads(sout, 0, NULL);
            long v = (long)json_integer_value(json_object_get(doc, "value"));
            json_decref(doc);
            stale++;
            stale_found += src == 0;
            stale_wrong += src == 0 ? v < 1 || v > RECORDS / KEYS : src != 3;
        }
        if (rc == 0) {
            json_t *doc = json_loads(out, 0, NULL);
            final = (long)json_integer_value(json_object_get(doc, "value"));
            json_decref(doc);
            wrong += final != RECORDS / KEYS; /* never an old count */
            break;
        }
        it_sleep_ms(100);
    }
    printf("  restoring: %d answers 503 with the progress, then %ld; with standby=1 %d stale "
           "answers (%d with a count so far, %d wrong)\n", restoring, final, stale, stale_found,
           stale_wrong);
    CU_ASSERT(restoring > 0);
    CU_ASSERT(stale > 0);
    CU_ASSERT_EQUAL(stale_wrong, 0);
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT_EQUAL(final, RECORDS / KEYS);
    CU_ASSERT_EQUAL(it_engine_stop(c, 30000), 0);
}

/* A non-loopback address needs a token: `check` says where. */
static void test_token_rule(void)
{
    char d[256], path[512], out[4096], args[1024];
    it_tempdir(d, sizeof d);
    snprintf(path, sizeof path, "%s/open.yaml", d);
    it_write_file(path,
                  "application: rquery-check\n"
                  "kafka: { bootstrap: [%s] }\n"
                  "plugin_path: [%s/plugins/.libs]\n"
                  "query: { listen: 0.0.0.0:8471 }\n"
                  "sources:\n"
                  "  in: { topic: t, key: string, value: string }\n"
                  "nodes:\n"
                  "  - { name: per_key, type: count, from: in, store: counts }\n",
                  it_bootstrap(), KS_TEST_BUILDDIR);
    snprintf(args, sizeof args, "check %s", path);
    CU_ASSERT_EQUAL(kstreams(args, out, sizeof out), 2);
    char want[600];
    snprintf(want, sizeof want, "%s:4:18: query listens on '0.0.0.0:8471'", path);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
    if (!strstr(out, want))
        printf("\n  check said: %s\n", out);
}

int main(void)
{
    static const it_case cases[] = {
        {"token rule at check time", test_token_rule},
        {"remote queries against each of two processes", test_remote_queries},
        {NULL, NULL},
    };
    return it_main("rquery", cases);
}
