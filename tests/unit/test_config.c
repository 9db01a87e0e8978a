/*
 * test_config.c - the pipeline YAML: valid fixtures parsed to the expected
 * values, every invalid fixture rejected with exactly the error its first
 * line announces ("# expect: FILE:LINE:COL: message", FILE = basename;
 * " at FILE:" inside the message, which points at a second place in the
 * file, is the same basename).
 */
#include <CUnit/CUnit.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "config/yaml_tree.h"
#include "unit/test_util.h"

#define FIXTURES KS_TEST_SRCDIR "/fixtures"

static char *read_all(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!fp)
        return NULL;
    if (fseek(fp, 0, SEEK_END) == 0 && (n = ftell(fp)) >= 0 &&
        fseek(fp, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) &&
        fread(buf, 1, (size_t)n, fp) == (size_t)n) {
        buf[n] = '\0';
        *len = (size_t)n;
    } else {
        free(buf);
        buf = NULL;
    }
    fclose(fp);
    return buf;
}

static ks_pipeline *load_fixture(const char *name)
{
    char path[1024], err[1024] = "";
    ks_pipeline *p = NULL;
    snprintf(path, sizeof path, "%s/%s", FIXTURES, name);
    if (ks_pipeline_load(path, &p, err, sizeof err) != 0)
        fprintf(stderr, "\n%s\n", err);
    return p;
}

static ks_pipeline *parse_text(const char *text, char *err, size_t errlen)
{
    ks_pipeline *p = NULL;
    int rc = ks_pipeline_parse("mem.yaml", text, strlen(text), &p, err, errlen);
    CU_ASSERT((rc == 0) == (p != NULL));
    return p;
}

static const char *scalar(const ks_cfg_scalars *s, const char *key)
{
    for (size_t i = 0; i < s->count; i++)
        if (strcmp(s->items[i].key, key) == 0)
            return s->items[i].value;
    return NULL;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names in the fixture directory starting with `prefix`, sorted. */
static size_t list_fixtures(const char *prefix, char ***out)
{
    DIR *d = opendir(FIXTURES);
    struct dirent *e;
    char **v = NULL;
    size_t n = 0;
    if (!d)
        return 0;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        char **nv;
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 || len < 5 ||
            strcmp(e->d_name + len - 5, ".yaml") != 0)
            continue;
        nv = realloc(v, (n + 1) * sizeof *v);
        if (!nv)
            break;
        v = nv;
        v[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (n)
        qsort(v, n, sizeof *v, cmp_str);
    *out = v;
    return n;
}

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* ------------------------------------------------------------------ */

static void test_invalid_fixtures(void)
{
    char **names = NULL;
    size_t n = list_fixtures("invalid-", &names);
    size_t bad = 0;

    CU_ASSERT(n >= 20);
    for (size_t i = 0; i < n; i++) {
        char path[1024], err[1024] = "", want[1024];
        size_t len = 0;
        char *text, *nl;
        ks_pipeline *p = (ks_pipeline *)1;
        const char *tag = "# expect: ";

        snprintf(path, sizeof path, "%s/%s", FIXTURES, names[i]);
        text = read_all(path, &len);
        CU_ASSERT_PTR_NOT_NULL_FATAL(text);
        if (strncmp(text, tag, strlen(tag)) != 0) {
            fprintf(stderr, "\n%s: first line is not '# expect: ...'\n",
                    names[i]);
            bad++;
            free(text);
            continue;
        }
        nl = strchr(text, '\n');
        if (nl)
            *nl = '\0';
        /* the error names the path as given: directory + basename, also
         * where the message itself points into the file (" at NAME:") */
        snprintf(want, sizeof want, "%s/", FIXTURES);
        for (const char *t = text + strlen(tag); *t;) {
            char at[300];
            snprintf(at, sizeof at, " at %s:", names[i]);
            size_t w = strlen(want);
            if (strncmp(t, at, strlen(at)) == 0) {
                snprintf(want + w, sizeof want - w, " at %s/%s:", FIXTURES, names[i]);
                t += strlen(at);
            } else if (w + 1 < sizeof want) {
                want[w] = *t++;
                want[w + 1] = '\0';
            } else {
                break;
            }
        }
        free(text);

        if (ks_pipeline_load(path, &p, err, sizeof err) != -1 || p != NULL) {
            fprintf(stderr, "\n%s: loaded, expected an error\n", names[i]);
            ks_pipeline_free(p);
            bad++;
        } else if (strcmp(err, want) != 0) {
            fprintf(stderr, "\n%s:\n  want: %s\n  got:  %s\n", names[i], want,
                    err);
            bad++;
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    free_list(names, n);
}

static void test_valid_fixtures(void)
{
    char **names = NULL;
    size_t n = list_fixtures("valid-", &names);
    CU_ASSERT(n >= 4);
    for (size_t i = 0; i < n; i++) {
        ks_pipeline *p = load_fixture(names[i]);
        CU_ASSERT_PTR_NOT_NULL(p);
        ks_pipeline_free(p);
    }
    free_list(names, n);
}

static void test_minimal(void)
{
    ks_pipeline *p = load_fixture("valid-minimal.yaml");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_STRING_EQUAL(p->application, "minimal");
    CU_ASSERT_PTR_NOT_NULL(strstr(p->file, "valid-minimal.yaml"));
    CU_ASSERT_EQUAL_FATAL(p->bootstrap_count, 1);
    CU_ASSERT_STRING_EQUAL(p->bootstrap[0], "127.0.0.1:9092");
    CU_ASSERT_EQUAL(p->kafka_properties.count, 0);
    /* defaults */
    CU_ASSERT_EQUAL(p->guarantee, KS_GUARANTEE_EXACTLY_ONCE);
    CU_ASSERT_EQUAL(p->commit_interval_ms, 100);
    CU_ASSERT_STRING_EQUAL(p->state_dir, "./state");
    CU_ASSERT_EQUAL(p->workers, 1);
    CU_ASSERT_EQUAL(p->replication_factor, -1);
    CU_ASSERT_EQUAL(p->plugin_count, 0);
    CU_ASSERT_EQUAL(p->plugin_path_count, 0);
    CU_ASSERT_EQUAL(p->poison, KS_POISON_FAIL);
    CU_ASSERT_STRING_EQUAL(p->dead_letter_topic, "minimal-dlq");
    CU_ASSERT_PTR_NULL(p->metrics_listen);
    CU_ASSERT_EQUAL(p->store_count, 0);
    CU_ASSERT_EQUAL(p->node_count, 0);
    /* source */
    CU_ASSERT_EQUAL_FATAL(p->source_count, 1);
    CU_ASSERT_STRING_EQUAL(p->sources[0].name, "in");
    CU_ASSERT_STRING_EQUAL(p->sources[0].topic, "input");
    CU_ASSERT_EQUAL(p->sources[0].key_serde, KS_SERDE_BYTES);
    CU_ASSERT_EQUAL(p->sources[0].value_serde, KS_SERDE_BYTES);
    CU_ASSERT_EQUAL(p->sources[0].create, 0);
    CU_ASSERT_EQUAL(p->sources[0].partitions, 1);
    CU_ASSERT_EQUAL(p->sources[0].mark.line, 7);
    CU_ASSERT_EQUAL(p->sources[0].mark.col, 3);
    CU_ASSERT_PTR_EQUAL(p->sources[0].mark.file, p->file);
    CU_ASSERT_EQUAL(p->sources[0].topic_mark.line, 7);
    CU_ASSERT_EQUAL(p->sources[0].topic_mark.col, 16);
    /* sink */
    CU_ASSERT_EQUAL_FATAL(p->sink_count, 1);
    CU_ASSERT_STRING_EQUAL(p->sinks[0].name, "sink-1");
    CU_ASSERT_STRING_EQUAL(p->sinks[0].from, "in");
    CU_ASSERT_STRING_EQUAL(p->sinks[0].topic, "output");
    CU_ASSERT_EQUAL(p->sinks[0].key_serde, KS_SERDE_BYTES);
    CU_ASSERT_EQUAL(p->sinks[0].create, 0);
    CU_ASSERT_EQUAL(p->sinks[0].partitions, 0); /* the sources' count */
    CU_ASSERT_EQUAL(p->sinks[0].mark.line, 9);
    CU_ASSERT_EQUAL(p->sinks[0].mark.col, 5);
    CU_ASSERT_EQUAL(p->sinks[0].from_mark.line, 9);
    CU_ASSERT_EQUAL(p->sinks[0].from_mark.col, 13);
    CU_ASSERT_EQUAL(p->sinks[0].name_mark.line, 9);
    ks_pipeline_free(p);
}

static void test_full(void)
{
    ks_pipeline *p = load_fixture("valid-full.yaml");
    const ks_cfg_node *n;
    const ks_cfg_store *st;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_STRING_EQUAL(p->application, "page-views");
    CU_ASSERT_EQUAL_FATAL(p->bootstrap_count, 2);
    CU_ASSERT_STRING_EQUAL(p->bootstrap[1], "127.0.0.1:9093");
    CU_ASSERT_EQUAL_FATAL(p->kafka_properties.count, 2);
    CU_ASSERT_STRING_EQUAL(p->kafka_properties.items[0].key, "linger.ms");
    CU_ASSERT_STRING_EQUAL(p->kafka_properties.items[0].value, "5");
    CU_ASSERT_STRING_EQUAL(scalar(&p->kafka_properties, "compression.type"),
                           "lz4");
    CU_ASSERT_EQUAL(p->guarantee, KS_GUARANTEE_EXACTLY_ONCE);
    CU_ASSERT_EQUAL(p->commit_interval_ms, 250);
    CU_ASSERT_STRING_EQUAL(p->state_dir, "/var/lib/kstreams");
    CU_ASSERT_EQUAL(p->workers, 4);
    CU_ASSERT_EQUAL(p->replication_factor, 3);
    CU_ASSERT_EQUAL_FATAL(p->plugin_count, 3);
    CU_ASSERT_STRING_EQUAL(p->plugins[0], "./build/page_views.so");
    CU_ASSERT_STRING_EQUAL(p->plugins[1], "count");
    CU_ASSERT_EQUAL(p->plugin_marks[1].line, 11);
    CU_ASSERT_EQUAL(p->plugin_marks[1].col, 34);
    CU_ASSERT_EQUAL_FATAL(p->plugin_path_count, 2);
    CU_ASSERT_STRING_EQUAL(p->plugin_path[1], "/opt/kstreams/plugins");
    CU_ASSERT_EQUAL(p->poison, KS_POISON_DEAD_LETTER);
    CU_ASSERT_STRING_EQUAL(p->dead_letter_topic, "page-views-poison");
    CU_ASSERT_STRING_EQUAL(p->metrics_listen, "127.0.0.1:9400");

    CU_ASSERT_EQUAL_FATAL(p->store_count, 1);
    st = ks_pipeline_store(p, "views-per-user");
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    CU_ASSERT_EQUAL(st->map_size, UINT64_C(4) << 30);
    CU_ASSERT_EQUAL(st->changelog, 1);
    CU_ASSERT_EQUAL(st->declared, 1);
    CU_ASSERT_EQUAL(st->mark.line, 18);

    CU_ASSERT_EQUAL_FATAL(p->source_count, 1);
    CU_ASSERT_EQUAL(p->sources[0].key_serde, KS_SERDE_STRING);
    CU_ASSERT_EQUAL(p->sources[0].value_serde, KS_SERDE_JSON);
    CU_ASSERT_EQUAL(p->sources[0].create, 1);
    CU_ASSERT_EQUAL(p->sources[0].partitions, 4);

    CU_ASSERT_EQUAL_FATAL(p->node_count, 3);
    n = ks_pipeline_node(p, "clean");
    CU_ASSERT_PTR_EQUAL_FATAL(n, &p->nodes[0]);
    CU_ASSERT_STRING_EQUAL(n->type, "page_views.drop_bots");
    CU_ASSERT_STRING_EQUAL(n->plugin, "page_views");
    CU_ASSERT_STRING_EQUAL(n->processor, "drop_bots");
    CU_ASSERT_EQUAL(n->type_mark.line, 25);
    CU_ASSERT_EQUAL(n->type_mark.col, 11);
    CU_ASSERT_EQUAL(n->mark.line, 24);
    CU_ASSERT_EQUAL(n->mark.col, 5);
    CU_ASSERT_EQUAL(n->name_mark.col, 11);
    CU_ASSERT_EQUAL_FATAL(n->from_count, 1);
    CU_ASSERT_STRING_EQUAL(n->from[0], "views");
    CU_ASSERT_EQUAL(n->from_marks[0].line, 26);
    CU_ASSERT_EQUAL_FATAL(n->config.count, 2);
    CU_ASSERT_STRING_EQUAL(scalar(&n->config, "bot_marker"), "bot");
    CU_ASSERT_STRING_EQUAL(scalar(&n->config, "max_len"), "512");
    CU_ASSERT_EQUAL(n->config.items[0].key_mark.line, 27);
    CU_ASSERT_EQUAL(n->config.items[0].key_mark.col, 15);
    CU_ASSERT_EQUAL(n->config.items[0].mark.col, 27);
    CU_ASSERT_EQUAL(n->store_count, 0);
    CU_ASSERT_EQUAL(n->function_count, 0);
    CU_ASSERT_EQUAL(n->window.count, 0);

    n = ks_pipeline_node(p, "per_user");
    CU_ASSERT_PTR_NOT_NULL_FATAL(n);
    CU_ASSERT_STRING_EQUAL(n->plugin, "count");
    CU_ASSERT_STRING_EQUAL(n->processor, "count");
    CU_ASSERT_EQUAL_FATAL(n->store_count, 1);
    CU_ASSERT_STRING_EQUAL(n->stores[0], "views-per-user");
    CU_ASSERT_EQUAL(n->store_marks[0].line, 31);

    n = ks_pipeline_node(p, "per_minute");
    CU_ASSERT_PTR_NOT_NULL_FATAL(n);
    CU_ASSERT_EQUAL_FATAL(n->from_count, 1);
    CU_ASSERT_STRING_EQUAL(n->from[0], "clean");
    CU_ASSERT_EQUAL_FATAL(n->window.count, 4);
    CU_ASSERT_STRING_EQUAL(scalar(&n->window, "kind"), "tumbling");
    CU_ASSERT_STRING_EQUAL(scalar(&n->window, "size"), "60s");
    CU_ASSERT_STRING_EQUAL(scalar(&n->window, "emit"), "final");
    CU_ASSERT_EQUAL_FATAL(n->function_count, 2);
    CU_ASSERT_STRING_EQUAL(n->functions[0].role, "init");
    CU_ASSERT_STRING_EQUAL(n->functions[0].plugin, "page_views");
    CU_ASSERT_STRING_EQUAL(n->functions[0].name, "zero");
    CU_ASSERT_STRING_EQUAL(n->functions[1].role, "add");
    CU_ASSERT_STRING_EQUAL(n->functions[1].plugin, "page_views");
    CU_ASSERT_STRING_EQUAL(n->functions[1].name, "add_bytes");
    CU_ASSERT_EQUAL(n->functions[1].mark.line, 36);

    CU_ASSERT_EQUAL_FATAL(p->sink_count, 2);
    CU_ASSERT_STRING_EQUAL(p->sinks[0].name, "sink-1");
    CU_ASSERT_EQUAL(p->sinks[0].key_serde, KS_SERDE_STRING);
    CU_ASSERT_EQUAL(p->sinks[0].value_serde, KS_SERDE_INT64);
    CU_ASSERT_STRING_EQUAL(p->sinks[1].name, "minutes");
    CU_ASSERT_STRING_EQUAL(p->sinks[1].from, "per_minute");
    CU_ASSERT_STRING_EQUAL(p->sinks[1].topic, "bytes-per-minute");
    CU_ASSERT_EQUAL(p->sinks[1].key_serde, KS_SERDE_JSON);
    CU_ASSERT_EQUAL(p->sinks[1].create, 1);
    CU_ASSERT_EQUAL(p->sinks[1].partitions, 4);
    CU_ASSERT_EQUAL(p->sinks[1].name_mark.line, 41);
    ks_pipeline_free(p);
}

static void test_branches(void)
{
    ks_pipeline *p = load_fixture("valid-branches.yaml");
    const ks_cfg_node *n;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    /* one string, split at commas */
    CU_ASSERT_EQUAL_FATAL(p->bootstrap_count, 2);
    CU_ASSERT_STRING_EQUAL(p->bootstrap[0], "kafka-1:9092");
    CU_ASSERT_STRING_EQUAL(p->bootstrap[1], "kafka-2:9092");
    CU_ASSERT_EQUAL(p->guarantee, KS_GUARANTEE_AT_LEAST_ONCE);
    CU_ASSERT_EQUAL(p->commit_interval_ms, 1000);
    CU_ASSERT_EQUAL(p->poison, KS_POISON_SKIP);
    CU_ASSERT_STRING_EQUAL(p->dead_letter_topic, "branches-dlq");
    CU_ASSERT_EQUAL(p->source_count, 2);
    CU_ASSERT_PTR_NOT_NULL(ks_pipeline_source(p, "refunds"));
    CU_ASSERT_PTR_NULL(ks_pipeline_source(p, "big"));
    CU_ASSERT_PTR_NULL(ks_pipeline_node(p, "orders"));
    CU_ASSERT_PTR_NULL(ks_pipeline_store(p, "orders"));
    n = ks_pipeline_node(p, "big");
    CU_ASSERT_PTR_NOT_NULL_FATAL(n);
    CU_ASSERT_STRING_EQUAL(scalar(&n->config, "threshold"), "1000");
    CU_ASSERT_STRING_EQUAL(scalar(&n->config, "currency"), "EUR");
    n = ks_pipeline_node(p, "all_money");
    CU_ASSERT_PTR_NOT_NULL_FATAL(n);
    CU_ASSERT_EQUAL_FATAL(n->from_count, 3);
    CU_ASSERT_STRING_EQUAL(n->from[0], "big");
    CU_ASSERT_STRING_EQUAL(n->from[1], "small");
    CU_ASSERT_STRING_EQUAL(n->from[2], "refunds");
    CU_ASSERT_EQUAL(n->from_marks[2].line, 25);
    CU_ASSERT_EQUAL(n->from_marks[2].col, 24);
    CU_ASSERT_EQUAL_FATAL(p->sink_count, 2);
    CU_ASSERT_STRING_EQUAL(p->sinks[0].name, "sink-1");
    CU_ASSERT_STRING_EQUAL(p->sinks[0].from, "big");
    CU_ASSERT_EQUAL(p->sinks[0].value_serde, KS_SERDE_JSON);
    CU_ASSERT_STRING_EQUAL(p->sinks[1].name, "sink-2");
    CU_ASSERT_STRING_EQUAL(p->sinks[1].from, "all_money");
    CU_ASSERT_EQUAL(p->sinks[1].key_serde, KS_SERDE_BYTES);
    CU_ASSERT_EQUAL(p->sinks[1].mark.line, 32);
    CU_ASSERT_EQUAL(p->sinks[1].mark.col, 5);
    ks_pipeline_free(p);
}

static void test_outbox_fields(void)
{
    ks_pipeline *p = load_fixture("valid-outbox.yaml");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const ks_cfg_outbox *o = p->outbox;
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    CU_ASSERT_STRING_EQUAL(o->name, "commands");
    CU_ASSERT_STRING_EQUAL(o->topic, "mailbox");
    CU_ASSERT_STRING_EQUAL(o->listen, "127.0.0.1:8470");
    CU_ASSERT_EQUAL(o->max_users_per_partition, 100);
    CU_ASSERT_EQUAL(o->stale_after_ms, 30000);
    CU_ASSERT_EQUAL(o->max_attempts, 5);
    CU_ASSERT_EQUAL(o->recover_unknown_partition, 1);
    CU_ASSERT_STRING_EQUAL(o->results_topic, "shop.statuses");
    ks_pipeline_free(p);
}

static void test_stores(void)
{
    ks_pipeline *p = load_fixture("valid-stores.yaml");
    const ks_cfg_store *st;
    const ks_cfg_node *n;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_STRING_EQUAL(p->application, "stores.test_1");
    CU_ASSERT_EQUAL_FATAL(p->store_count, 5);
    /* declared, in file order */
    CU_ASSERT_STRING_EQUAL(p->stores[0].name, "big");
    CU_ASSERT_EQUAL(p->stores[0].map_size, UINT64_C(512) << 20);
    CU_ASSERT_EQUAL(p->stores[0].changelog, 1);
    CU_ASSERT_EQUAL(p->stores[0].declared, 1);
    CU_ASSERT_STRING_EQUAL(p->stores[1].name, "plain");
    CU_ASSERT_EQUAL(p->stores[1].map_size, UINT64_C(1) << 30);
    CU_ASSERT_EQUAL(p->stores[1].changelog, 1);
    CU_ASSERT_EQUAL(p->stores[1].mark.line, 11);
    CU_ASSERT_EQUAL(p->stores[1].mark.col, 3);
    st = ks_pipeline_store(p, "quiet");
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    CU_ASSERT_EQUAL(st->changelog, 0);
    CU_ASSERT_EQUAL(st->map_size, 1048576);
    /* used by nodes, not declared: defaults, mark of the use */
    st = ks_pipeline_store(p, "extra");
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    CU_ASSERT_PTR_EQUAL(st, &p->stores[3]);
    CU_ASSERT_EQUAL(st->declared, 0);
    CU_ASSERT_EQUAL(st->map_size, UINT64_C(1) << 30);
    CU_ASSERT_EQUAL(st->changelog, 1);
    CU_ASSERT_EQUAL(st->mark.line, 21);
    CU_ASSERT_EQUAL(st->mark.col, 28);
    st = ks_pipeline_store(p, "later");
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    CU_ASSERT_EQUAL(st->declared, 0);
    CU_ASSERT_EQUAL(st->mark.line, 25);

    n = ks_pipeline_node(p, "joiner");
    CU_ASSERT_PTR_NOT_NULL_FATAL(n);
    CU_ASSERT_EQUAL_FATAL(n->store_count, 3);
    CU_ASSERT_STRING_EQUAL(n->stores[2], "extra");
    n = ks_pipeline_node(p, "reducer");
    CU_ASSERT_PTR_NOT_NULL_FATAL(n);
    CU_ASSERT_STRING_EQUAL(n->plugin, "reduce");
    CU_ASSERT_EQUAL_FATAL(n->function_count, 1);
    CU_ASSERT_STRING_EQUAL(n->functions[0].role, "reduce");
    CU_ASSERT_STRING_EQUAL(n->functions[0].plugin, "joins");
    CU_ASSERT_STRING_EQUAL(n->functions[0].name, "sum");
    CU_ASSERT_STRING_EQUAL(p->sinks[1].name, "reduced_out");
    ks_pipeline_free(p);
}

/* ------------------------------------------------------------------ */

static void test_duration(void)
{
    int64_t ms = -1;
    CU_ASSERT_EQUAL(ks_parse_duration_ms("250ms", &ms), 0);
    CU_ASSERT_EQUAL(ms, 250);
    CU_ASSERT_EQUAL(ks_parse_duration_ms("10s", &ms), 0);
    CU_ASSERT_EQUAL(ms, 10000);
    CU_ASSERT_EQUAL(ks_parse_duration_ms("5m", &ms), 0);
    CU_ASSERT_EQUAL(ms, 300000);
    CU_ASSERT_EQUAL(ks_parse_duration_ms("1h", &ms), 0);
    CU_ASSERT_EQUAL(ms, 3600000);
    CU_ASSERT_EQUAL(ks_parse_duration_ms("2d", &ms), 0);
    CU_ASSERT_EQUAL(ms, 172800000);
    CU_ASSERT_EQUAL(ks_parse_duration_ms("1500", &ms), 0);
    CU_ASSERT_EQUAL(ms, 1500);
    CU_ASSERT_EQUAL(ks_parse_duration_ms("0s", &ms), 0);
    CU_ASSERT_EQUAL(ms, 0);
    ms = 7;
    CU_ASSERT_EQUAL(ks_parse_duration_ms("", &ms), -1);
    CU_ASSERT_EQUAL(ks_parse_duration_ms("s", &ms), -1);
    CU_ASSERT_EQUAL(ks_parse_duration_ms("-5s", &ms), -1);
    CU_ASSERT_EQUAL(ks_parse_duration_ms("1.5s", &ms), -1);
    CU_ASSERT_EQUAL(ks_parse_duration_ms("10 s", &ms), -1);
    CU_ASSERT_EQUAL(ks_parse_duration_ms("10sec", &ms), -1);
    CU_ASSERT_EQUAL(ks_parse_duration_ms("10S", &ms), -1);
    CU_ASSERT_EQUAL(ks_parse_duration_ms("9223372036854775807", &ms), 0);
    CU_ASSERT_EQUAL(ms, INT64_MAX);
    CU_ASSERT_EQUAL(ks_parse_duration_ms("9223372036854775808", &ms), -1);
    CU_ASSERT_EQUAL(ks_parse_duration_ms("9223372036854775807s", &ms), -1);
    CU_ASSERT_EQUAL(ks_parse_duration_ms("99999999999999999999999", &ms), -1);
    CU_ASSERT_EQUAL(ks_parse_duration_ms(NULL, &ms), -1);
}

static void test_size(void)
{
    uint64_t b = 0;
    CU_ASSERT_EQUAL(ks_parse_size("1048576", &b), 0);
    CU_ASSERT_EQUAL(b, 1048576);
    CU_ASSERT_EQUAL(ks_parse_size("64KiB", &b), 0);
    CU_ASSERT_EQUAL(b, 65536);
    CU_ASSERT_EQUAL(ks_parse_size("512MiB", &b), 0);
    CU_ASSERT_EQUAL(b, UINT64_C(512) << 20);
    CU_ASSERT_EQUAL(ks_parse_size("4GiB", &b), 0);
    CU_ASSERT_EQUAL(b, UINT64_C(4) << 30);
    CU_ASSERT_EQUAL(ks_parse_size("2TiB", &b), 0);
    CU_ASSERT_EQUAL(b, UINT64_C(2) << 40);
    CU_ASSERT_EQUAL(ks_parse_size("100B", &b), 0);
    CU_ASSERT_EQUAL(b, 100);
    CU_ASSERT_EQUAL(ks_parse_size("4GB", &b), -1);
    CU_ASSERT_EQUAL(ks_parse_size("4gib", &b), -1);
    CU_ASSERT_EQUAL(ks_parse_size("GiB", &b), -1);
    CU_ASSERT_EQUAL(ks_parse_size("", &b), -1);
    CU_ASSERT_EQUAL(ks_parse_size("-1", &b), -1);
    CU_ASSERT_EQUAL(ks_parse_size("1.5GiB", &b), -1);
    CU_ASSERT_EQUAL(ks_parse_size("18446744073709551615", &b), 0);
    CU_ASSERT_EQUAL(b, UINT64_MAX);
    CU_ASSERT_EQUAL(ks_parse_size("18446744073709551616", &b), -1);
    CU_ASSERT_EQUAL(ks_parse_size("17179869184GiB", &b), -1);
}

static void test_serde_name(void)
{
    CU_ASSERT_STRING_EQUAL(ks_serde_name(KS_SERDE_BYTES), "bytes");
    CU_ASSERT_STRING_EQUAL(ks_serde_name(KS_SERDE_STRING), "string");
    CU_ASSERT_STRING_EQUAL(ks_serde_name(KS_SERDE_JSON), "json");
    CU_ASSERT_STRING_EQUAL(ks_serde_name(KS_SERDE_INT64), "int64");
    CU_ASSERT_STRING_EQUAL(ks_serde_name((ks_serde)99), "unknown");
}

#define BASE                                                                 \
    "application: t\n"                                                       \
    "kafka: { bootstrap: [h:1] }\n"                                          \
    "sources: { in: { topic: input } }\n"

static void expect_error(const char *text, const char *want)
{
    char err[1024] = "";
    ks_pipeline *p = parse_text(text, err, sizeof err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_STRING_EQUAL(err, want);
    if (strcmp(err, want) != 0)
        fprintf(stderr, "\n  want: %s\n  got:  %s\n", want, err);
    ks_pipeline_free(p);
}

static void test_in_memory(void)
{
    char err[256];
    ks_pipeline *p;

    /* aliases are fine, and share nothing after parsing */
    p = parse_text(BASE "x: &t { topic: out }\n", err, sizeof err);
    CU_ASSERT_PTR_NULL(p);
    p = parse_text("application: t\n"
                   "kafka: { bootstrap: [h:1] }\n"
                   "sources: { in: &src { topic: input, key: string } }\n"
                   "sinks: [ { from: in, topic: out, key: &k int64, "
                   "value: *k } ]\n",
                   err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->sinks[0].value_serde, KS_SERDE_INT64);
    CU_ASSERT_STRING_EQUAL(p->file, "mem.yaml");
    ks_pipeline_free(p);

    /* booleans in several spellings, integers with sign */
    p = parse_text(BASE "workers: +3\n"
                        "stores: { s: { changelog: off } }\n"
                        "nodes: [ { name: n, type: x, from: in, store: s } ]\n"
                        "sinks: [ { from: in, topic: o, create: Yes } ]\n",
                   err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->workers, 3);
    CU_ASSERT_EQUAL(p->stores[0].changelog, 0);
    CU_ASSERT_EQUAL(p->sinks[0].create, 1);
    ks_pipeline_free(p);

    /* null values of optional lists and maps mean empty */
    p = parse_text(BASE "nodes:\nstores: ~\nplugins:\n"
                        "sinks: [ { from: in, topic: o } ]\n",
                   err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->node_count, 0);
    CU_ASSERT_EQUAL(p->store_count, 0);
    CU_ASSERT_EQUAL(p->plugin_count, 0);
    ks_pipeline_free(p);

    /* errors that fixtures cannot hold or that need the text exactly */
    expect_error("", "mem.yaml:1:1: empty pipeline; expected a mapping with "
                     "application, kafka, sources and sinks");
    expect_error("---\n", "mem.yaml:1:1: empty pipeline; expected a mapping "
                          "with application, kafka, sources and sinks");
    expect_error("just text", "mem.yaml:1:1: expected a mapping at the top "
                              "level, found 'just text'");
    expect_error("application: t\napplication: u\n",
                 "mem.yaml:2:1: duplicate key 'application'; first defined "
                 "at line 1");
    expect_error("a: \"x\\0y\"\n",
                 "mem.yaml:1:4: a scalar contains a NUL character");
    expect_error("application: t\nstate_dir: \"\\xff\xff\"\n",
                 "mem.yaml:2:17: YAML syntax error: invalid leading UTF-8 "
                 "octet");
    expect_error(BASE "workers: 99999999999999999999\n",
                 "mem.yaml:4:10: 'workers' must be between 1 and 64, found "
                 "'99999999999999999999'");
    expect_error(BASE "workers: [1]\n",
                 "mem.yaml:4:10: expected an integer for 'workers', found a "
                 "list");
    expect_error(BASE "state_dir: \"\"\n",
                 "mem.yaml:4:12: expected a non-empty string for 'state_dir'");
    expect_error(BASE "replication_factor: 40000\n",
                 "mem.yaml:4:21: 'replication_factor' must be between -1 and "
                 "32767, found '40000'");
    expect_error(BASE "replication_factor: 0\n",
                 "mem.yaml:4:21: 'replication_factor' must be -1 (the broker's "
                 "default.replication.factor) or at least 1, found '0'");
    expect_error(BASE "sinks: [ { from: in, topic: o } ]\n"
                      "dead_letter_topic: \"a b\"\n",
                 "mem.yaml:5:20: invalid topic name 'a b'; expected "
                 "[A-Za-z0-9._-]+, at most 249 characters");
    expect_error(BASE "sinks: [ { from: in, topic: o } ]\n"
                      "nodes: [ { name: n, type: x, from: in, store: [a] } ]\n",
                 "mem.yaml:5:47: expected a store name for 'store', found a "
                 "list");
    expect_error(BASE "sinks: [ { from: in, topic: o } ]\n"
                      "nodes: [ { name: n, type: x, from: in, stores: [a, a] } "
                      "]\n",
                 "mem.yaml:5:52: node 'n': store 'a' is listed twice");
    expect_error(BASE "sinks: [ { from: in, topic: o } ]\n"
                      "nodes: [ { name: n, type: x, from: in, "
                      "functions: [a.b] } ]\n",
                 "mem.yaml:5:51: expected a mapping for 'functions', found a "
                 "list");
    expect_error(BASE "sinks: [ { from: in, topic: o } ]\n"
                      "nodes: [ { name: n, type: a.b.c, from: in } ]\n",
                 "mem.yaml:5:27: invalid type 'a.b.c'; expected "
                 "plugin.processor or plugin (plugin in [a-z0-9_]+)");
    expect_error(BASE "sinks: [ { from: in, topic: o, from: x } ]\n",
                 "mem.yaml:4:32: duplicate key 'from'; first defined at line "
                 "4");
    expect_error(BASE "sinks: [ { from: [in], topic: o } ]\n",
                 "mem.yaml:4:18: expected a string for 'from', found a list");
    expect_error(BASE "commit_interval_ms: [1]\n",
                 "mem.yaml:4:21: expected an integer or a duration (e.g. "
                 "100ms) for 'commit_interval_ms', found a list");
    expect_error(BASE "sinks: [ { from: in, topic: o } ]\n"
                      "nodes: [ { name: n, type: x, from: { a: b } } ]\n",
                 "mem.yaml:5:36: expected a name or a list of names for "
                 "'from', found a mapping");
    expect_error(BASE "sinks:\n",
                 "mem.yaml:4:1: missing value for 'sinks'");
    expect_error(BASE "sinks: [ { from: in, topic: o } ]\n[a]: 1\n",
                 "mem.yaml:5:1: expected a string key in pipeline");
    /* a recursive alias neither hangs nor crashes */
    expect_error(BASE "sinks: [ { from: in, topic: o } ]\n"
                      "plugins: &a [*a]\n",
                 "mem.yaml:5:10: expected a list of strings for 'plugins', "
                 "found a list");
    /* messages stay on one line whatever the YAML held */
    expect_error(BASE "guarantee: \"a\\nb\"\n",
                 "mem.yaml:4:12: unknown guarantee 'a?b'; expected "
                 "exactly-once or at-least-once");

    /* the caller's buffer bounds the message */
    {
        char small[16];
        CU_ASSERT_EQUAL(ks_pipeline_parse("mem.yaml", "", 0, &p, small,
                                          sizeof small),
                        -1);
        CU_ASSERT_PTR_NULL(p);
        CU_ASSERT_STRING_EQUAL(small, "mem.yaml:1:1: e");
    }
}

/* A nested value under `config:` reaches plugins as JSON text; window:
 * and properties: stay scalars only. */
static void test_nested_config(void)
{
    char err[1024] = "";
    ks_pipeline *p = parse_text(
        BASE "nodes:\n"
             "  - name: f\n    type: ops.filter\n    from: in\n    config:\n"
             "      plain: /a/b\n"
             "      where: { all: [ { path: /n, ge: 10 }, { path: /s, in: [\"10\", x, -1.5e3,"
             " true, False, ~, 'true', \"q\\\"\\\\\\t\", 007, 0x1f, 1e400] } ] }\n"
             "      list: [ { a: [] }, {} ]\n"
             "sinks: [ { from: f, topic: o } ]\n",
        err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const ks_cfg_scalars *c = &p->nodes[0].config;
    CU_ASSERT_EQUAL_FATAL(c->count, 3);
    CU_ASSERT_STRING_EQUAL(c->items[0].value, "/a/b");
    CU_ASSERT_PTR_NULL(c->items[0].nested);
    CU_ASSERT_STRING_EQUAL(c->items[1].nested, "a mapping");
    CU_ASSERT_STRING_EQUAL(c->items[1].value,
                           "{\"all\":[{\"path\":\"/n\",\"ge\":10},{\"path\":\"/s\",\"in\":"
                           "[\"10\",\"x\",-1.5e3,true,false,null,\"true\",\"q\\\"\\\\\\u0009\","
                           "\"007\",\"0x1f\",1e400]}]}");
    CU_ASSERT_EQUAL(c->items[1].mark.line, 10);
    CU_ASSERT_STRING_EQUAL(c->items[2].nested, "a list");
    CU_ASSERT_STRING_EQUAL(c->items[2].value, "[{\"a\":[]},{}]");
    if (p)
        ks_pipeline_free(p);

    expect_error(BASE "nodes:\n  - name: f\n    type: ops.filter\n    from: in\n"
                      "    config: { where: &a [ *a ] }\n"
                      "sinks: [ { from: f, topic: o } ]\n",
                 "mem.yaml:8:22: in 'where' of 'config': nested deeper than 32 levels");
    expect_error(BASE "nodes:\n  - name: f\n    type: ops.filter\n    from: in\n"
                      "    window: { size: [1] }\n"
                      "sinks: [ { from: f, topic: o } ]\n",
                 "mem.yaml:8:21: expected a scalar for 'size' in 'window', found a list "
                 "(nested values are not allowed)");
}

/* `outbox: { backend: postgres }`: its keys, defaults and refusals. */
#define PG_BASE BASE "sinks: [ { from: in, topic: out } ]\n"
static void test_outbox_postgres(void)
{
#ifdef KS_HAVE_POSTGRES
    char err[1024] = "";
    ks_pipeline *p = parse_text("application: t\n"
                                "kafka: { bootstrap: [h:1] }\n"
                                "sources: { in: { topic: input } }\n"
                                "sinks: [ { from: in, topic: out } ]\n"
                                "outbox: { backend: postgres, dsn_env: APP_DSN, topic: ev }\n",
                                err, sizeof err);
    if (!p)
        fprintf(stderr, "\n  %s\n", err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const ks_cfg_outbox *o = p->outbox;
    CU_ASSERT_EQUAL(o->backend, KS_OUTBOX_BACKEND_POSTGRES);
    CU_ASSERT_STRING_EQUAL(o->dsn_env, "APP_DSN");
    CU_ASSERT_PTR_NULL(o->dsn);
    CU_ASSERT_STRING_EQUAL(o->table, "ks_outbox");
    CU_ASSERT_STRING_EQUAL(o->name, "ks_outbox");
    CU_ASSERT_EQUAL(o->poll_interval_ms, 1000);
    CU_ASSERT_EQUAL(o->stale_after_ms, 30000);
    CU_ASSERT_EQUAL(o->max_users_per_partition, 0); /* no key: murmur2, no assignment */
    ks_pipeline_free(p);
    /* the key turns on sequential assignment (the map in ks_user_partitions) */
    p = parse_text(PG_BASE "outbox: { backend: postgres, dsn_env: E, topic: ev, "
                           "max_users_per_partition: 10 }\n",
                   err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->outbox->max_users_per_partition, 10);
    ks_pipeline_free(p);
    expect_error(PG_BASE "outbox: { backend: postgres, dsn_env: E, topic: ev, "
                         "max_users_per_partition: 0 }\n",
                 "mem.yaml:5:78: 'max_users_per_partition' must be between 1 and "
                 "2147483647, found '0'");
    expect_error(PG_BASE "outbox: { backend: postgres, topic: ev }\n",
                 "mem.yaml:5:9: a postgres outbox needs exactly one of 'dsn' (a libpq "
                 "connection string) and 'dsn_env' (the environment variable holding it)");
    expect_error(PG_BASE "outbox: { backend: postgres, dsn: 'host=x', dsn_env: E, topic: ev }\n",
                 "mem.yaml:5:45: a postgres outbox needs exactly one of 'dsn' (a libpq "
                 "connection string) and 'dsn_env' (the environment variable holding it)");
    expect_error(PG_BASE "outbox: { backend: postgres, dsn: 'host=x', topic: ev, listen: "
                      "'0.0.0.0:1' }\n",
                 "mem.yaml:5:56: 'listen' is not a key of the postgres outbox backend");
    expect_error(PG_BASE "outbox: { name: c, topic: ev, table: t }\n",
                 "mem.yaml:5:31: 'table' is not a key of the lmdb outbox backend");
    expect_error(PG_BASE "outbox: { backend: postgres, dsn: 'host=x', topic: ev, table: "
                      "'a;b' }\n",
                 "mem.yaml:5:63: invalid table name 'a;b'; expected [A-Za-z_][A-Za-z0-9_]* "
                 "(at most 63)");
    expect_error(PG_BASE "outbox: { backend: mysql, topic: ev }\n",
                 "mem.yaml:5:20: invalid outbox backend 'mysql'; expected lmdb or postgres");
    /* libpq's own parser judges the string; the password is not repeated */
    err[0] = '\0';
    p = parse_text(PG_BASE "outbox: { backend: postgres, dsn: 'password=s3cret bogus', topic: ev }\n",
                   err, sizeof err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT(strstr(err, "mem.yaml:5:35: invalid PostgreSQL connection string") == err);
    CU_ASSERT(strstr(err, "s3cret") == NULL);
    ks_pipeline_free(p);
#endif
}

static void test_load_errors(void)
{
    char err[256];
    ks_pipeline *p = (ks_pipeline *)1;
    CU_ASSERT_EQUAL(ks_pipeline_load(FIXTURES "/no-such-file.yaml", &p, err,
                                     sizeof err),
                    -1);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_STRING_EQUAL(err, FIXTURES "/no-such-file.yaml: cannot open: "
                                         "No such file or directory");
    ks_pipeline_free(NULL);
}

/* Every prefix of a valid file either parses or fails with a located
 * error, without leaking (the ASan build checks). */
static void test_truncated(void)
{
    char path[1024];
    size_t len = 0, ok = 0, failed = 0;
    char *text;
    snprintf(path, sizeof path, "%s/valid-full.yaml", FIXTURES);
    text = read_all(path, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    for (size_t cut = 0; cut <= len; cut++) {
        char err[1024] = "";
        ks_pipeline *p = NULL;
        int rc = ks_pipeline_parse("cut.yaml", text, cut, &p, err, sizeof err);
        if (rc == 0) {
            CU_ASSERT_PTR_NOT_NULL(p);
            ok++;
        } else {
            CU_ASSERT_PTR_NULL(p);
            CU_ASSERT(strncmp(err, "cut.yaml:", 9) == 0);
            CU_ASSERT_PTR_NULL(strchr(err, '\n'));
            failed++;
        }
        ks_pipeline_free(p);
    }
    CU_ASSERT(ok >= 1);
    CU_ASSERT(failed >= 1);
    free(text);
}

/* A mapping of 50 000 keys (the pairwise check took about a minute of
 * CPU on one): all unique parses and keeps every key; with repeats, the
 * first repeat in file order is reported with both positions. */
static char *many_keys(size_t n, size_t dup_at, size_t dup_of, size_t dup2_at, size_t dup2_of,
                       size_t *len)
{
    size_t cap = n * 24 + 64, used = 0;
    char *t = malloc(cap);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    used += (size_t)snprintf(t, cap, "application: t\nmany:\n");
    for (size_t i = 0; i < n; i++) {
        size_t k = i == dup_at ? dup_of : i == dup2_at ? dup2_of : i;
        used += (size_t)snprintf(t + used, cap - used, "  key%zu: %zu\n", k, i);
    }
    *len = used;
    return t;
}

static void test_many_keys(void)
{
    size_t len;
    ks_ydoc doc;
    ks_yerr yerr;
    char *t = many_keys(50000, (size_t)-1, 0, (size_t)-1, 0, &len);
    CU_ASSERT_EQUAL_FATAL(ks_ydoc_parse(t, len, &doc, &yerr), 0);
    const ks_ynode *many = ks_ynode_get(doc.root, "many");
    CU_ASSERT_PTR_NOT_NULL_FATAL(many);
    CU_ASSERT_EQUAL(many->count, 50000);
    const ks_ynode *last = ks_ynode_get(many, "key49999");
    CU_ASSERT_PTR_NOT_NULL_FATAL(last);
    CU_ASSERT_STRING_EQUAL(last->text, "49999");
    ks_ydoc_free(&doc);
    free(t);

    /* key 45000 repeats key7 and key 40000 repeats key123: the earlier
     * repeat (line 40003, the line of key 40000) is the one reported */
    t = many_keys(50000, 45000, 7, 40000, 123, &len);
    char err[1024] = "";
    ks_pipeline *p = NULL;
    CU_ASSERT_EQUAL(ks_pipeline_parse("many.yaml", t, len, &p, err, sizeof err), -1);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_STRING_EQUAL(err, "many.yaml:40003:3: duplicate key 'key123'; first defined "
                                "at line 126");
    free(t);

    /* a declared store no node names, and no undeclared use to pair it with */
    expect_error(BASE "sinks: [ { from: in, topic: o } ]\nstores: { lonely: {} }\n",
                 "mem.yaml:5:11: store 'lonely' is declared but no node uses it; name it in "
                 "a node's 'store' or 'stores', or remove it");
    /* the closest misspelling is named, not the first undeclared store */
    expect_error(BASE "sinks: [ { from: in, topic: o } ]\nstores: { seen: {} }\n"
                      "nodes: [ { name: a, type: x, from: in, stores: [zzz, sen] } ]\n",
                 "mem.yaml:5:11: store 'seen' is declared but no node uses it; node 'a' names "
                 "store 'sen' at mem.yaml:6:54, which is not declared (a typo?)");

    /* a key repeated three times: the second occurrence, against the first */
    expect_error("a: 1\nb: 2\na: 3\na: 4\n",
                 "mem.yaml:3:1: duplicate key 'a'; first defined at line 1");
}

/* `rollback:`: defaults, both keys, errors at file:line:col */
static void test_rollback(void)
{
    char err[512];
    ks_pipeline *p = parse_text(BASE "sinks: [ { from: in, topic: o } ]\n", err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->rollback_crashes, 3);
    CU_ASSERT_EQUAL(p->rollback_within_ms, 600000);
    ks_pipeline_free(p);
    p = parse_text(BASE "sinks: [ { from: in, topic: o } ]\nrollback: { crashes: 5, within: 1h }\n",
                   err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->rollback_crashes, 5);
    CU_ASSERT_EQUAL(p->rollback_within_ms, 3600000);
    ks_pipeline_free(p);
    p = parse_text(BASE "sinks: [ { from: in, topic: o } ]\nrollback: { crashes: 0 }\n", err,
                   sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->rollback_crashes, 0);
    CU_ASSERT_EQUAL(p->rollback_within_ms, 600000);
    ks_pipeline_free(p);
    expect_error(BASE "rollback: { crashes: -1 }\n",
                 "mem.yaml:4:22: 'crashes' must be between 0 and 1000, found '-1'");
    expect_error(BASE "rollback: { within: 0s }\n",
                 "mem.yaml:4:21: 'within' must be greater than 0, found '0s'");
    expect_error(BASE "rollback: { within: soon }\n",
                 "mem.yaml:4:21: expected an integer or a duration (e.g. 100ms) for 'within', "
                 "found 'soon'");
    expect_error(BASE "rollback: { after: 3 }\n",
                 "mem.yaml:4:13: unknown key 'after' in rollback; expected one of: crashes, "
                 "within");
    expect_error(BASE "rollback: 3\n",
                 "mem.yaml:4:11: expected a mapping for 'rollback', found '3'");
}

void ks_test_register_config(void)
{
    CU_pSuite s = CU_add_suite("config", NULL, NULL);
    if (!s)
        return;
    CU_add_test(s, "invalid fixtures give their expected error",
                test_invalid_fixtures);
    CU_add_test(s, "valid fixtures load", test_valid_fixtures);
    CU_add_test(s, "minimal: defaults and marks", test_minimal);
    CU_add_test(s, "full example: every key", test_full);
    CU_add_test(s, "branches: two sinks, merged inputs", test_branches);
    CU_add_test(s, "stores: declared and created on use", test_stores);
    CU_add_test(s, "outbox: every key", test_outbox_fields);
    CU_add_test(s, "outbox: backend postgres", test_outbox_postgres);
    CU_add_test(s, "ks_parse_duration_ms", test_duration);
    CU_add_test(s, "ks_parse_size", test_size);
    CU_add_test(s, "ks_serde_name", test_serde_name);
    CU_add_test(s, "in-memory texts and exact errors", test_in_memory);
    CU_add_test(s, "rollback: defaults, keys, errors", test_rollback);
    CU_add_test(s, "nested config values as JSON", test_nested_config);
    CU_add_test(s, "file errors", test_load_errors);
    CU_add_test(s, "truncated files fail cleanly", test_truncated);
    CU_add_test(s, "50 000 keys: duplicates found in O(n log n)", test_many_keys);
}
