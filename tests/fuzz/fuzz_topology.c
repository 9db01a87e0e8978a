/*
 * fuzz_topology.c - the pipeline's topology checks (engine/config:
 * config_checks.c, config_graph.c, ops_check.c, run by the loader after the
 * schema, as `kstreams check` does) on pipelines built from any bytes.
 * Random text rarely gets past the YAML schema (fuzz_yaml covers that), so
 * the input here picks, byte by byte, from a small vocabulary of the
 * pipeline's own parts: sources, tables, stores, nodes (types, inputs,
 * stores, tables, windows, functions, configs, repartition), sinks and an
 * outbox, with names from one short list so that references, duplicates
 * and cycles are frequent. No Kafka and no plugin is needed.
 *
 * The loader never crashes or leaks; every refusal is
 * "fuzz.yaml:LINE:COL: ..." with a line of the text; the text of an
 * accepted pipeline loads again to a pipeline with the same parts.
 * A few input bytes (0xff, then a count) instead splice raw bytes into the
 * text, so that the checks also see what the schema lets through; an input
 * that starts with 'a' ("application: ...", the seeds taken from examples/
 * and tests/fixtures) is the text itself.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

typedef struct gen {
    const uint8_t *p;
    size_t n;
    char *out;
    size_t len, cap;
} gen;

static unsigned pick(gen *g, unsigned n)
{
    if (g->n == 0)
        return 0;
    g->n--;
    return *g->p++ % n;
}

static void put(gen *g, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(g->out + g->len, g->cap - g->len, fmt, ap);
        va_end(ap);
        if (k < 0)
            abort();
        if (g->len + (size_t)k < g->cap) {
            g->len += (size_t)k;
            return;
        }
        g->cap = (g->cap + (size_t)k) * 2;
        g->out = realloc(g->out, g->cap);
        if (!g->out)
            abort();
    }
}

#define PICK(g, arr) (arr)[pick((g), sizeof(arr) / sizeof(arr)[0])]

static const char *const names[] = {"a", "b", "c", "views", "clean", "per_user", "orders",
                                    "x-1", "", "a.b", "customers", "sink-1"};
static const char *const topics[] = {"t1", "t2", "views", "orders", "mailbox", "a",
                                     "orders-repartition", "x_y.z"};
static const char *const serdes[] = {"string", "json", "int64", "bytes", "avro"};
static const char *const types[] = {
    "count", "aggregate", "reduce", "join", "join_streams", "mailbox", "ops.filter",
    "ops.map", "ops.select_key", "ops.flat_map", "p.q", "count.x", "ops.nope", "Bad Type"};
static const char *const windows[] = {
    "{ kind: tumbling, size: 1m }",
    "{ kind: hopping, size: 1m, advance: 10s, grace: 5s }",
    "{ kind: session, gap: 30s, emit: final, time_field: ts }",
    "{ kind: sliding, size: 5s }",
    "{ kind: tumbling, size: 0 }",
    "{ kind: join, before: 5s, after: 5s }",
    "{ kind: bogus }",
};
static const char *const configs[] = {
    "{ where: { path: /kind, eq: test } }",
    "{ where: { all: [ { path: \"\", is: object }, { not: { path: /a, contains: bot } } ] } }",
    "{ set: { /a: /b } }",
    "{ path: /customer }",
    "{ kind: left, joiner: merge }",
    "{ kind: outer }",
    "{ where: { path: a } }",
    "{ unknown: 1 }",
    "{}",
};
static const char *const functions[] = {
    "{ init: p.zero, add: p.add }", "{ reduce: p.sum }", "{ init: p.zero, add: \"p:add\", merge: p.m }",
    "{ joiner: p.j }", "{ add: nope }",
};
static const char *const stores[] = {"s1", "s2", "views-per-user", "a", "big"};
static const char *const top_extra[] = {
    "", "guarantee: at-least-once\n", "workers: 3\n", "poison: dead-letter\n",
    "poison: dead-letter\ndead_letter_topic: t1\n", "metrics: 127.0.0.1:9400\n",
    "replication_factor: 3\n", "rollback: { crashes: 2, within: 10m }\n",
};

/* A name or, now and then, a list of them. */
static void name_list(gen *g)
{
    unsigned k = pick(g, 5);
    if (k < 3) {
        put(g, "\"%s\"", PICK(g, names));
        return;
    }
    put(g, "[");
    for (unsigned i = 0, n = k - 2; i < n; i++)
        put(g, "%s\"%s\"", i ? ", " : "", PICK(g, names));
    put(g, "]");
}

/* 0xff then a length: that many raw input bytes, as they are. */
static void maybe_raw(gen *g)
{
    if (g->n < 2 || g->p[0] != 0xff)
        return;
    size_t k = g->p[1] % 32;
    g->p += 2, g->n -= 2;
    if (k > g->n)
        k = g->n;
    put(g, "%.*s", (int)k, (const char *)g->p);
    g->p += k, g->n -= k;
}

static void build(gen *g)
{
    put(g, "application: fuzz\nkafka: { bootstrap: [127.0.0.1:9092] }\n%s", PICK(g, top_extra));
    maybe_raw(g);
    unsigned ns = pick(g, 4);
    if (ns) {
        put(g, "sources:\n");
        for (unsigned i = 0; i < ns; i++) {
            put(g, "  \"%s\": { topic: %s, key: %s, value: %s", PICK(g, names), PICK(g, topics),
                PICK(g, serdes), PICK(g, serdes));
            if (pick(g, 3) == 0)
                put(g, ", create: true, partitions: %u", pick(g, 5));
            put(g, " }\n");
            maybe_raw(g);
        }
    }
    unsigned nt = pick(g, 3);
    if (nt) {
        put(g, "tables:\n");
        for (unsigned i = 0; i < nt; i++)
            put(g, "  \"%s\": { topic: %s, key: %s, value: %s }\n", PICK(g, names),
                PICK(g, topics), PICK(g, serdes), PICK(g, serdes));
    }
    unsigned nst = pick(g, 3);
    if (nst) {
        put(g, "stores:\n");
        for (unsigned i = 0; i < nst; i++)
            put(g, "  \"%s\": { changelog: %s }\n", PICK(g, stores), pick(g, 2) ? "true" : "false");
    }
    unsigned nn = pick(g, 7);
    if (nn) {
        put(g, "nodes:\n");
        for (unsigned i = 0; i < nn; i++) {
            put(g, "  - name: \"%s\"\n    type: %s\n    from: ", PICK(g, names), PICK(g, types));
            name_list(g);
            put(g, "\n");
            unsigned f = pick(g, 256);
            if (f & 1)
                put(g, "    store: %s\n", PICK(g, stores));
            if (f & 2)
                put(g, "    stores: [%s, %s]\n", PICK(g, stores), PICK(g, stores));
            if (f & 4)
                put(g, "    table: \"%s\"\n", PICK(g, names));
            if (f & 8)
                put(g, "    window: %s\n", PICK(g, windows));
            if (f & 16)
                put(g, "    functions: %s\n", PICK(g, functions));
            if (f & 32)
                put(g, "    config: %s\n", PICK(g, configs));
            if (f & 64)
                put(g, "    repartition: %s\n", pick(g, 2) ? "true" : "{ partitions: 3 }");
            maybe_raw(g);
        }
    }
    unsigned nk = pick(g, 4);
    if (nk) {
        put(g, "sinks:\n");
        for (unsigned i = 0; i < nk; i++) {
            put(g, "  - { from: \"%s\", topic: %s, key: %s, value: %s", PICK(g, names),
                PICK(g, topics), PICK(g, serdes), PICK(g, serdes));
            if (pick(g, 2))
                put(g, ", name: \"%s\"", PICK(g, names));
            put(g, " }\n");
        }
    }
    if (pick(g, 4) == 0)
        put(g, "outbox: { name: commands, topic: %s, listen: 127.0.0.1:8470%s }\n",
            PICK(g, topics), pick(g, 2) ? ", results_topic: t2" : "");
    maybe_raw(g);
}

/* "fuzz.yaml:LINE:COL: " with 1 <= LINE <= lines + 1 and COL >= 1. */
static int positioned(const char *err, const char *text, size_t len)
{
    unsigned long line, col;
    int used = 0;
    if (sscanf(err, "fuzz.yaml:%lu:%lu: %n", &line, &col, &used) != 2 || used == 0)
        return 0;
    size_t lines = 1; /* at most: YAML breaks lines at \r, \n, NEL, LS and PS */
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n' || text[i] == '\r' || (unsigned char)text[i] == 0x85 ||
                 ((unsigned char)text[i] == 0xa8 || (unsigned char)text[i] == 0xa9);
    return line >= 1 && line <= lines + 1 && col >= 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    gen g = {data, len, NULL, 0, 0};
    g.cap = 1024;
    g.out = malloc(g.cap);
    if (!g.out)
        abort();
    g.out[0] = '\0';
    if (len > 0 && data[0] == 'a') /* "application: ...": the text as it is */
        put(&g, "%.*s", (int)len, (const char *)data);
    else
        build(&g);
    char err[2048] = "";
    ks_pipeline *p = NULL;
    int rc = ks_pipeline_parse("fuzz.yaml", g.out, g.len, &p, err, sizeof err);
    if (rc != 0) {
        if (p != NULL || !positioned(err, g.out, strnlen(g.out, g.len))) {
            fprintf(stderr, "a refusal without FILE:LINE:COL: \"%s\"\n--- text:\n%s\n", err,
                    g.out);
            abort();
        }
    } else {
        ks_pipeline *again = NULL;
        if (ks_pipeline_parse("fuzz.yaml", g.out, g.len, &again, err, sizeof err) != 0 ||
            again->source_count != p->source_count || again->node_count != p->node_count ||
            again->sink_count != p->sink_count || again->store_count != p->store_count) {
            fprintf(stderr, "the same text loads differently: \"%s\"\n--- text:\n%s\n", err,
                    g.out);
            abort();
        }
        ks_pipeline_free(again);
        ks_pipeline_free(p);
    }
    free(g.out);
    return 0;
}
