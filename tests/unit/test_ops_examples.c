/*
 * test_ops_examples.c - the ops plugin's examples, run: every example of
 * docs/operators.md with its records in and out, and the YAML-only
 * page-views pipeline against the C one (examples/page-views).
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kstreams/testdriver.h"
#include "unit/test_ops.h"
#include "unit/test_util.h"

#define open_ok ks_test_ops_open
#define next_is ks_test_ops_next_is

/* ---- docs/operators.md: every example, run ---------------------------------- */

/* The next word of *p (NUL-terminated in place); "-" gives NULL. */
static char *word(char **p)
{
    char *w = *p, *e = strchr(w, ' ');
    if (e) {
        *e = '\0';
        *p = e + 1;
    } else {
        *p = w + strlen(w);
    }
    return strcmp(w, "-") == 0 ? NULL : w;
}

/* Run one ```text block of "in KEY VALUE", "poison KEY VALUE" and
 * "out SINK KEY VALUE" lines against the pipeline `yaml`; 0 when it all
 * holds. */
static int run_records(const char *yaml, char *records, int line)
{
    ks_driver *drv = open_ok(yaml);
    int bad = 0;
    for (char *l = strtok(records, "\n"); l; l = strtok(NULL, "\n"), line++) {
        char *rest = l, *cmd = word(&rest);
        if (!cmd)
            continue;
        if (!strcmp(cmd, "in") || !strcmp(cmd, "poison")) {
            char *key = word(&rest), *value = strcmp(rest, "-") ? rest : NULL;
            int rc = ks_driver_pipe(drv, "in", key, key ? strlen(key) : 0, value,
                                    value ? strlen(value) : 0, 1000);
            if (rc != (!strcmp(cmd, "in") ? 0 : KS_SKIP)) {
                fprintf(stderr, "\noperators.md:%d: '%s': rc %d\n", line, l, rc);
                bad++;
            }
        } else if (!strcmp(cmd, "out")) {
            char *sink = word(&rest), *key = word(&rest);
            if (!next_is(drv, sink, key, strcmp(rest, "-") ? rest : NULL)) {
                fprintf(stderr, "operators.md:%d: not the next output\n", line);
                bad++;
            }
        } else {
            fprintf(stderr, "\noperators.md:%d: unknown line '%s'\n", line, cmd);
            bad++;
        }
    }
    if (ks_driver_output_count(drv, NULL) != 0) {
        fprintf(stderr, "\noperators.md:%d: %zu outputs not listed\n", line,
                ks_driver_output_count(drv, NULL));
        bad++;
    }
    ks_driver_close(drv);
    return bad;
}

static void test_docs_examples(void)
{
    FILE *f = fopen(KS_TEST_SRCDIR "/../docs/operators.md", "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    static char yaml[8192], records[8192];
    char l[1024];
    int line = 0, in = 0, rec_line = 0, examples = 0, bad = 0;
    size_t yl = 0, rl = 0;
    /* in: 0 prose, 1 a yaml block, 2 after one (blank lines), 3 its records */
    while (fgets(l, sizeof l, f)) {
        line++;
        if (in == 1 || in == 3) {
            if (strncmp(l, "```", 3) == 0) {
                if (in == 3) {
                    records[rl] = '\0';
                    bad += run_records(yaml, records, rec_line + 1);
                    examples++;
                }
                in = in == 1 ? 2 : 0;
            } else if (in == 1 && yl + strlen(l) < sizeof yaml) {
                yl += (size_t)snprintf(yaml + yl, sizeof yaml - yl, "%s", l);
            } else if (in == 3 && rl + strlen(l) < sizeof records) {
                rl += (size_t)snprintf(records + rl, sizeof records - rl, "%s", l);
            }
        } else if (strcmp(l, "```yaml\n") == 0) {
            in = 1;
            yl = 0;
        } else if (in == 2 && strcmp(l, "```text\n") == 0) {
            in = 3;
            rl = 0;
            rec_line = line;
        } else if (in == 2 && strcmp(l, "\n") != 0) {
            in = 0;
        }
    }
    fclose(f);
    printf("\n    docs/operators.md: %d examples run, %d failures\n", examples, bad);
    CU_ASSERT_EQUAL(examples, 5);
    CU_ASSERT_EQUAL(bad, 0);
}

/* ---- examples/page-views: YAML only counts as the C plugin ------------------ */

#define PV_DIR KS_TEST_SRCDIR "/../examples/page-views/"

/* Pipe the demo's views (scripts/demo.sh: 5 users, every 7th a bot) and
 * some odd ones into `file`; the count updates go to out (one line each). */
static void page_views(const char *file, char *out, size_t cap)
{
    ks_driver_options opt = {
        .plugin_path = OPS_PLUGIN_PATH ":" KS_TEST_BUILDDIR "/examples/page-views/.libs",
        .partitions = 4};
    ks_driver *drv = NULL;
    char err[1024] = "";
    int rc = ks_driver_open(file, &opt, &drv, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "\n%s: %s\n", file, err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    static const char *const odd[] = {
        "[1,2]", "\"text\"", "42", "null", "{}", "{\"user_agent\":5}",
        "{\"user_agent\":\"Bot\"}", "{\"user_agent\":\"ro\\u0062ot\"}",
        "{\"user_agent\":null,\"url\":\"/\"}", NULL};
    for (int i = 1; i <= 1000; i++) {
        char key[32], value[160];
        snprintf(key, sizeof key, "user-%d", i % 5 + 1);
        snprintf(value, sizeof value, "{\"user_agent\":\"%s\",\"url\":\"/page/%d\",\"bytes\":%d}",
                 i % 7 == 0 ? "crawler-bot" : "browser", i % 7, i * 10);
        CU_ASSERT_EQUAL(ks_driver_pipe(drv, "views", key, strlen(key), value, strlen(value), i),
                        0);
        if (i % 100 == 0) { /* odd values, and a tombstone */
            const char *v = odd[(i / 100) % 10];
            CU_ASSERT_EQUAL(ks_driver_pipe(drv, "views", key, strlen(key), v, v ? strlen(v) : 0,
                                           i), 0);
        }
    }
    size_t at = 0;
    ks_driver_record r;
    while (ks_driver_read_output(drv, NULL, &r) == 0 && at + 64 < cap)
        at += (size_t)snprintf(out + at, cap - at, "%.*s %lld\n", (int)r.key_len,
                               (const char *)r.key, (long long)ks_int64_decode(r.value));
    ks_driver_close(drv);
}

static void test_page_views_yaml_only(void)
{
    static char c_counts[65536], yaml_counts[65536];
    page_views(PV_DIR "pipeline.yaml", c_counts, sizeof c_counts);
    page_views(PV_DIR "pipeline-yaml-only.yaml", yaml_counts, sizeof yaml_counts);
    CU_ASSERT_STRING_EQUAL(c_counts, yaml_counts);
    /* kept: 858 views by browsers and 4 odd objects, of 1010 piped */
    size_t lines = 0;
    for (const char *p = yaml_counts; (p = strchr(p, '\n')); p++)
        lines++;
    CU_ASSERT_EQUAL(lines, 862);
}

void ks_test_register_ops_examples(void)
{
    CU_pSuite s = CU_add_suite("ops-examples", NULL, NULL);
    CU_add_test(s, "docs/operators.md: every example's records", test_docs_examples);
    CU_add_test(s, "page-views: YAML only counts as the C plugin", test_page_views_yaml_only);
}
