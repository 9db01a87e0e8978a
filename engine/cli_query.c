/*
 * cli_query.c - `kstreams query FILE STORE`: read one key, a key range or a
 * whole store from the state directory of a running or stopped instance.
 *
 * It loads only the pipeline YAML (no plugins), finds
 * STATE_DIR/<application>/task-<P>/ and opens each environment read-only
 * (ks_store_env_open_readonly). LMDB readers take no lock the writer waits
 * on; each snapshot is ended (ks_store_read_end) as soon as the partition
 * has been read so the engine can reuse its pages. Nothing here writes.
 *
 */
#include "cli_query.h"

#include <dirent.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli_help.h"
#include "config.h"
#include "store.h"

/* ---- printing ----------------------------------------------------------- */

typedef struct query {
    const char *store;
    int json;
    int int64;
    int single; /* --key: value only / one object */
    FILE *out;
    json_t *array; /* json output being built */
    int32_t partition; /* being read */
    size_t found;
} query;

/* Valid UTF-8 without control characters. */
static int printable(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        if (c < 0x20 || c == 0x7f)
            return 0;
        size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
                                 : (c & 0xf8) == 0xf0   ? 4
                                                        : 0;
        if (!len || i + len > n || (len == 2 && c < 0xc2))
            return 0;
        for (size_t k = 1; k < len; k++)
            if ((p[i + k] & 0xc0) != 0x80)
                return 0;
        i += len;
    }
    return 1;
}

static void print_hex(FILE *f, const unsigned char *p, size_t n)
{
    fputs("0x", f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%02x", p[i]);
}

static char *hex_string(const unsigned char *p, size_t n)
{
    char *s = malloc(2 * n + 1);
    if (!s)
        return NULL;
    for (size_t i = 0; i < n; i++)
        snprintf(s + 2 * i, 3, "%02x", p[i]);
    s[2 * n] = '\0';
    return s;
}

static void print_text(FILE *f, ks_bytes b)
{
    if (printable(b.data, b.len))
        fwrite(b.data, 1, b.len, f);
    else
        print_hex(f, b.data, b.len);
}

static void print_value(const query *q, ks_bytes v)
{
    if (q->int64 && v.len == 8)
        fprintf(q->out, "%lld", (long long)ks_int64_decode(v.data));
    else
        print_text(q->out, v);
}

/* Set obj[name] (or obj[name_hex]) to the bytes. */
static void json_bytes(json_t *obj, const char *name, const char *name_hex, ks_bytes b)
{
    if (printable(b.data, b.len)) {
        json_object_set_new(obj, name, json_stringn(b.data, b.len));
        return;
    }
    char *h = hex_string(b.data, b.len);
    json_object_set_new(obj, name_hex, h ? json_string(h) : json_null());
    free(h);
}

static int emit(void *arg, ks_bytes key, ks_bytes value)
{
    query *q = arg;
    q->found++;
    if (!q->json) {
        if (!q->single) {
            print_text(q->out, key);
            fputc('\t', q->out);
        }
        print_value(q, value);
        fputc('\n', q->out);
        return 0;
    }
    json_t *o = json_object();
    json_object_set_new(o, "partition", json_integer(q->partition));
    json_bytes(o, "key", "key_hex", key);
    if (q->int64 && value.len == 8)
        json_object_set_new(o, "value", json_integer(ks_int64_decode(value.data)));
    else
        json_bytes(o, "value", "value_hex", value);
    json_array_append_new(q->array, o);
    return 0;
}

/* ---- partitions --------------------------------------------------------- */

static int cmp_int32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The task-<P> directories of `base`, sorted. -1 when base is missing. */
static int list_partitions(const char *base, int32_t **parts, size_t *count)
{
    DIR *d = opendir(base);
    if (!d)
        return -1;
    size_t n = 0, cap = 0;
    int32_t *v = NULL;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        if (strncmp(e->d_name, "task-", 5) != 0)
            continue;
        long p = strtol(e->d_name + 5, &end, 10);
        if (*end || end == e->d_name + 5 || p < 0 || p > INT32_MAX)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            int32_t *nv = realloc(v, cap * sizeof *v);
            if (!nv)
                break;
            v = nv;
        }
        v[n++] = (int32_t)p;
    }
    closedir(d);
    if (n)
        qsort(v, n, sizeof *v, cmp_int32);
    *parts = v;
    *count = n;
    return 0;
}

/* Read one partition. Returns a KS_EXIT_* code; *missing set when the
 * partition has no environment or no such store. */
static int query_partition(query *q, const char *dir, const char *key, const char *from,
                           const char *to, int *missing, FILE *errf)
{
    char err[1024];
    ks_store_env *env = NULL;
    *missing = 0;
    int rc = ks_store_env_open_readonly(dir, &env, err, sizeof err);
    if (rc == KS_ERR_NOT_FOUND) {
        *missing = 1;
        return KS_EXIT_OK;
    }
    if (rc != 0) {
        fprintf(errf, "kstreams query: %s\n", err);
        return KS_EXIT_FAILURE;
    }
    ks_store_db *db = NULL;
    rc = ks_store_db_open(env, q->store, &db);
    int exit_code = KS_EXIT_OK;
    if (rc == KS_ERR_NOT_FOUND) {
        *missing = 1;
    } else if (rc != 0) {
        fprintf(errf, "kstreams query: %s: cannot open store '%s': %s\n", dir, q->store,
                ks_store_last_error(env));
        exit_code = KS_EXIT_FAILURE;
    } else if (key) {
        ks_bytes v;
        rc = ks_store_get(db, (ks_bytes){key, strlen(key)}, &v);
        if (rc == 0)
            emit(q, (ks_bytes){key, strlen(key)}, v);
        else if (rc != KS_ERR_NOT_FOUND) {
            fprintf(errf, "kstreams query: %s: %s\n", dir, ks_store_last_error(env));
            exit_code = KS_EXIT_FAILURE;
        }
    } else {
        rc = ks_store_range(db, (ks_bytes){from, from ? strlen(from) : 0},
                            (ks_bytes){to, to ? strlen(to) : 0}, emit, q);
        if (rc != 0) {
            fprintf(errf, "kstreams query: %s: %s\n", dir, ks_store_last_error(env));
            exit_code = KS_EXIT_FAILURE;
        }
    }
    ks_store_read_end(env); /* let the writer reuse the snapshot's pages */
    ks_store_env_close(env);
    return exit_code;
}

/* ---- the command -------------------------------------------------------- */

static int usage_error(FILE *errf, const char *fmt, const char *arg)
{
    fputs("kstreams query: ", errf);
    fprintf(errf, fmt, arg);
    fputs("\n", errf);
    ks_cli_command_help("query", errf);
    return KS_EXIT_USAGE;
}

int ks_cli_query(int argc, char **argv, FILE *out, FILE *errf)
{
    const char *file = NULL, *store = NULL, *key = NULL, *from = NULL, *to = NULL;
    const char *format = "text";
    long partition = -1;
    int int64 = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            ks_cli_command_help("query", out);
            return KS_EXIT_OK;
        } else if (!strcmp(a, "--int64")) {
            int64 = 1;
        } else if (!strcmp(a, "--key") && has_value) {
            key = argv[++i];
        } else if (!strcmp(a, "--from") && has_value) {
            from = argv[++i];
        } else if (!strcmp(a, "--to") && has_value) {
            to = argv[++i];
        } else if (!strcmp(a, "--format") && has_value) {
            format = argv[++i];
        } else if (!strcmp(a, "--partition") && has_value) {
            char *end;
            partition = strtol(argv[++i], &end, 10);
            if (*end || end == argv[i] || partition < 0 || partition > INT32_MAX)
                return usage_error(errf, "--partition needs a number >= 0, not '%s'", argv[i]);
        } else if (a[0] != '-' && !file) {
            file = a;
        } else if (a[0] != '-' && !store) {
            store = a;
        } else {
            return usage_error(errf, "unexpected argument '%s'", a);
        }
    }
    if (!file || !store)
        return usage_error(errf, "%s", !file ? "missing pipeline FILE" : "missing STORE");
    if (key && (from || to))
        return usage_error(errf, "%s", "--key and --from/--to exclude each other");
    if (key && !*key)
        return usage_error(errf, "%s", "--key needs a non-empty key");
    if (strcmp(format, "text") != 0 && strcmp(format, "json") != 0)
        return usage_error(errf, "--format is text or json, not '%s'", format);

    char err[2048];
    ks_pipeline *p = NULL;
    if (ks_pipeline_load(file, &p, err, sizeof err) != 0) {
        fprintf(errf, "%s\n", err);
        return KS_EXIT_INVALID;
    }
    int exit_code = KS_EXIT_OK;
    int32_t *parts = NULL;
    size_t nparts = 0;
    char base[4096];
    snprintf(base, sizeof base, "%s/%s", p->state_dir, p->application);
    if (!ks_pipeline_store(p, store)) {
        fprintf(errf, "kstreams query: %s: no store '%s'; stores:", file, store);
        for (size_t s = 0; s < p->store_count; s++)
            fprintf(errf, " %s", p->stores[s].name);
        fprintf(errf, "%s\n", p->store_count ? "" : " (none)");
        exit_code = KS_EXIT_NOT_FOUND;
        goto done;
    }
    if (list_partitions(base, &parts, &nparts) != 0) {
        fprintf(errf, "kstreams query: %s: no state directory (has the pipeline run with "
                      "this state_dir?)\n",
                base);
        exit_code = KS_EXIT_NOT_FOUND;
        goto done;
    }
    if (partition >= 0) {
        free(parts);
        parts = malloc(sizeof *parts);
        if (!parts) {
            exit_code = KS_EXIT_FAILURE;
            goto done;
        }
        parts[0] = (int32_t)partition;
        nparts = 1;
    }

    query q = {.store = store,
               .json = strcmp(format, "json") == 0,
               .int64 = int64,
               .single = key != NULL,
               .out = out};
    if (q.json)
        q.array = json_array();
    size_t present = 0;
    for (size_t i = 0; i < nparts && exit_code == KS_EXIT_OK; i++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/task-%d", base, (int)parts[i]);
        int missing = 0;
        q.partition = parts[i];
        exit_code = query_partition(&q, dir, key, from, to, &missing, errf);
        present += !missing;
        if (key && q.found) /* a key lives in one partition */
            break;
    }
    if (exit_code == KS_EXIT_OK && partition >= 0 && !present) {
        fprintf(errf, "kstreams query: %s/task-%ld: no store '%s' here\n", base, partition,
                store);
        exit_code = KS_EXIT_NOT_FOUND;
    } else if (exit_code == KS_EXIT_OK && key && !q.found) {
        fprintf(errf, "kstreams query: key '%s' not found in store '%s'\n", key, store);
        exit_code = KS_EXIT_NOT_FOUND;
    } else if (exit_code == KS_EXIT_OK && q.json) {
        json_t *doc = key ? json_array_get(q.array, 0) : q.array;
        char *s = json_dumps(doc, JSON_COMPACT);
        if (s) {
            fprintf(out, "%s\n", s);
            free(s);
        } else {
            exit_code = KS_EXIT_FAILURE;
        }
    }
    json_decref(q.array);
done:
    free(parts);
    ks_pipeline_free(p);
    if (fflush(out) != 0 && exit_code == KS_EXIT_OK)
        exit_code = KS_EXIT_FAILURE;
    return exit_code;
}
