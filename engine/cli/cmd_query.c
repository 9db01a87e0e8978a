/*
 * cmd_query.c - `kstreams query FILE STORE [options]`: the command line of
 * query (options, their checks, the window of the store from the YAML,
 * the partitions to read, the verdict). query_store.c reads and prints.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/query_remote.h"
#include "query/query_request.h"
#include "query/query_store.h"
#include "query/query_time.h"
#include "config/config.h"
#include "runtime/global_table.h"
#include "runtime/topology.h"
#include "state/layout.h"

const char ks_cmd_query_help[] =
    "Read store STORE of pipeline FILE from its state directory\n"
    "(STATE_DIR/APPLICATION/task-P), read-only: safe while `kstreams run` is\n"
    "writing it, and on a stopped instance. No plugin is loaded.\n"
    "  --key K          one key (text); prints its value. Without --partition\n"
    "                   every partition is searched.\n"
    "  --key-hex HEX    one key given as hex bytes (\"01ff\" or \"0x01ff\")\n"
    "  KEY RANGE        keys in [A, B) in byte order, either bound optional:\n"
    "                   --from-key A / --from-key-hex A, --to-key B / --to-key-hex B\n"
    "  --from A --to B  key-value store: the same as --from-key A --to-key B\n"
    "  --partition P    only task P (= input partition P)\n"
    "  --format F       text (default): KEY<TAB>VALUE lines (the value alone\n"
    "                   for one key); json: an array of\n"
    "                   {\"partition\", \"key\", \"value\"} (one object for one key)\n"
    "  --int64          print 8-byte values as numbers (big-endian int64, as\n"
    "                   count and the int64 serde write them)\n"
    "  --hex            every key and value as hex, printable or not\n"
    "  --remote URL     ask the running application's query server at URL\n"
    "                   (http://HOST:PORT of any of its processes, `query:` in\n"
    "                   FILE; its token is sent) instead of reading the local\n"
    "                   state directory; prints JSON (docs/scaling.md)\n"
    "  --standby        with --remote: a process holding a standby copy of a\n"
    "                   task (or the task, restoring) answers from it: maybe\n"
    "                   stale, said on stderr with its changelog offset\n"
    "Windowed store (the store of count, aggregate or reduce with `window:`):\n"
    "one line per window, KEY<TAB>START<TAB>END<TAB>VALUE (no KEY for one\n"
    "key), partition by partition, keys in byte order, windows by start;\n"
    "json: objects with \"start\" and \"end\" in epoch ms, always an array.\n"
    "  --from T --to T  only windows whose start is in [T, T] (both inclusive);\n"
    "                   T is epoch ms (1700000000000) or ISO-8601 with Z or an\n"
    "                   offset (2023-11-14T22:13:20Z, 2023-11-14)\n"
    "  --time-format F  text: iso (default, UTC) or ms (epoch milliseconds)\n"
    "  --raw            the entries as stored (encoded window keys)\n"
    "END is exclusive (sliding: start + size + 1); for sessions START and END\n"
    "are the first and last record's times. Sliding windows are computed from\n"
    "the stored records: count only (aggregate, reduce: use --raw).\n"
    "Keys and values that are not printable UTF-8 (or would move the cursor)\n"
    "are shown as hex: 0x... in text, \"key_hex\"/\"value_hex\" in json.\n"
    "exit codes: 0 ok, 1 read failure, 2 invalid pipeline, 3 store, state\n"
    "directory, partition, key or window not found, 64 usage (unknown option,\n"
    "bad time or hex, --from after --to, sliding windows of aggregate/reduce)\n";

enum {
    OPT_KEY = 256,
    OPT_KEY_HEX,
    OPT_FROM_KEY,
    OPT_FROM_KEY_HEX,
    OPT_TO_KEY,
    OPT_TO_KEY_HEX,
    OPT_FROM,
    OPT_TO,
    OPT_FORMAT,
    OPT_TIME_FORMAT,
    OPT_PARTITION,
    OPT_INT64,
    OPT_HEX,
    OPT_RAW,
    OPT_REMOTE,
    OPT_STANDBY,
};

static const struct option OPTIONS[] = {
    {"key", required_argument, NULL, OPT_KEY},
    {"key-hex", required_argument, NULL, OPT_KEY_HEX},
    {"from-key", required_argument, NULL, OPT_FROM_KEY},
    {"from-key-hex", required_argument, NULL, OPT_FROM_KEY_HEX},
    {"to-key", required_argument, NULL, OPT_TO_KEY},
    {"to-key-hex", required_argument, NULL, OPT_TO_KEY_HEX},
    {"from", required_argument, NULL, OPT_FROM},
    {"to", required_argument, NULL, OPT_TO},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"time-format", required_argument, NULL, OPT_TIME_FORMAT},
    {"partition", required_argument, NULL, OPT_PARTITION},
    {"int64", no_argument, NULL, OPT_INT64},
    {"hex", no_argument, NULL, OPT_HEX},
    {"raw", no_argument, NULL, OPT_RAW},
    {"remote", required_argument, NULL, OPT_REMOTE},
    {"standby", no_argument, NULL, OPT_STANDBY},
    {0},
};

/* The command line of one query. */
typedef struct query_args {
    const char *file, *store;
    const char *from, *to; /* keys or times: the store decides */
    const char *format, *time_format;
    ks_query_bytes key, kfrom, kto;
    int key_args, kfrom_args, kto_args; /* how often each was given */
    long partition;                     /* -1: all */
    const char *remote;                 /* --remote URL, or NULL */
    int format_set;
    int int64, hex, raw;
    int standby; /* --standby */
} query_args;

static ks_exit usage(FILE *err, const char *fmt, const char *arg)
{
    return ks_cli_usage_error("query", err, fmt, arg);
}

static const char *key_limit_text(void)
{
    static char text[48];
    snprintf(text, sizeof text, "keys have at most %d bytes", KS_KEY_MAX);
    return text;
}

/* --key, --from-key, --to-key and their -hex forms into `b`; bad_hex is
 * the message for malformed hex. */
static int set_key_option(ks_query_bytes *b, int *count, int hex, const char *bad_hex,
                          const char *value, FILE *err)
{
    (*count)++;
    if (hex && ks_query_bytes_hex(b, value) != 0)
        return usage(err, bad_hex, value);
    if (!hex && ks_query_bytes_text(b, value) != 0) {
        fprintf(err, "kstreams query: out of memory\n");
        return KS_EXIT_FAILURE;
    }
    return KS_CLI_GO;
}

static int on_option(void *ctx, int opt, const char *value, FILE *err)
{
    query_args *a = ctx;
    char *end;
    switch (opt) {
    case OPT_KEY:
    case OPT_KEY_HEX:
        return set_key_option(&a->key, &a->key_args, opt == OPT_KEY_HEX,
                              "--key-hex needs an even number of hex digits, not '%s'", value,
                              err);
    case OPT_FROM_KEY:
    case OPT_FROM_KEY_HEX:
        return set_key_option(&a->kfrom, &a->kfrom_args, opt == OPT_FROM_KEY_HEX,
                              "--from-key-hex needs an even number of hex digits, not '%s'",
                              value, err);
    case OPT_TO_KEY:
    case OPT_TO_KEY_HEX:
        return set_key_option(&a->kto, &a->kto_args, opt == OPT_TO_KEY_HEX,
                              "--to-key-hex needs an even number of hex digits, not '%s'",
                              value, err);
    case OPT_FROM:
        a->from = value;
        break;
    case OPT_TO:
        a->to = value;
        break;
    case OPT_FORMAT:
        a->format = value;
        a->format_set = 1;
        break;
    case OPT_REMOTE:
        a->remote = value;
        break;
    case OPT_TIME_FORMAT:
        a->time_format = value;
        break;
    case OPT_INT64:
        a->int64 = 1;
        break;
    case OPT_HEX:
        a->hex = 1;
        break;
    case OPT_RAW:
        a->raw = 1;
        break;
    case OPT_STANDBY:
        a->standby = 1;
        break;
    case OPT_PARTITION:
        a->partition = strtol(value, &end, 10);
        if (*end || end == value || a->partition < 0 || a->partition > INT32_MAX)
            return usage(err, "--partition needs a number >= 0, not '%s'", value);
        break;
    }
    return KS_CLI_GO;
}

/* The checks that need every option: exclusive and repeated ones. */
static int check_args(const query_args *a, FILE *err)
{
    if (a->standby && !a->remote)
        return usage(err, "%s", "--standby goes with --remote (a local query reads the state "
                                "directory, whichever copy it holds)");
    if (a->key_args > 1)
        return usage(err, "%s", "give one key: --key or --key-hex, once");
    if (a->kfrom_args > 1 || a->kto_args > 1)
        return usage(err, "%s", "give each key bound once: --from-key or --from-key-hex, "
                                "--to-key or --to-key-hex");
    if (a->key.set && (a->kfrom.set || a->kto.set))
        return usage(err, "%s", "--key and a key range (--from-key, --to-key) exclude each other");
    if (a->key.set && a->key.len == 0)
        return usage(err, "%s", "--key needs a non-empty key");
    if (a->key.len > KS_KEY_MAX || a->kfrom.len > KS_KEY_MAX || a->kto.len > KS_KEY_MAX)
        return usage(err, "%s", key_limit_text());
    if (strcmp(a->format, "text") != 0 && strcmp(a->format, "json") != 0)
        return usage(err, "--format is text or json, not '%s'", a->format);
    if (strcmp(a->time_format, "iso") != 0 && strcmp(a->time_format, "ms") != 0)
        return usage(err, "--time-format is iso or ms, not '%s'", a->time_format);
    return KS_CLI_GO;
}

/* A key-value store: --from/--to are keys, the same as --from-key/--to-key. */
static int key_bounds(query_args *a, FILE *err)
{
    if ((a->from && a->kfrom.set) || (a->to && a->kto.set))
        return usage(err, "%s", "give a key bound once: --from or --from-key, --to or --to-key");
    if (a->key.set && (a->from || a->to))
        return usage(err, "%s", "--key and --from/--to exclude each other");
    if ((a->from && ks_query_bytes_text(&a->kfrom, a->from) != 0) ||
        (a->to && ks_query_bytes_text(&a->kto, a->to) != 0))
        return usage(err, "%s", "out of memory");
    if (a->kfrom.len > KS_KEY_MAX || a->kto.len > KS_KEY_MAX)
        return usage(err, "%s", key_limit_text());
    return KS_CLI_GO;
}

/* A windowed store: --from/--to are window start times. */
static int time_bounds(const query_args *a, const ks_cfg_node *wnode, ks_win_kind kind,
                       ks_query *q, FILE *err)
{
    if (a->from && ks_query_parse_time(a->from, &q->tfrom) != 0)
        return usage(err,
                     "--from '%s' is not a time: give epoch milliseconds or ISO-8601 "
                     "(2026-03-02T10:15:00Z); for a key range use --from-key",
                     a->from);
    if (a->to && ks_query_parse_time(a->to, &q->tto) != 0)
        return usage(err,
                     "--to '%s' is not a time: give epoch milliseconds or ISO-8601 "
                     "(2026-03-02T10:15:00Z); for a key range use --to-key",
                     a->to);
    if (q->tfrom > q->tto)
        return usage(err, "--from %s is after --to", a->from);
    if (kind == KS_WIN_SLIDING && strcmp(wnode->type, "count") != 0) {
        fprintf(err,
                "kstreams query: store '%s' holds the sliding windows of node '%s' (%s): "
                "only their records are stored, and their values are folded by the "
                "plugin's functions when emitted; read the node's output topic, or "
                "the stored records with --raw\n",
                a->store, wnode->name, wnode->type);
        return KS_EXIT_USAGE;
    }
    return KS_CLI_GO;
}

/* The store named on the command line, and what --from/--to mean for it:
 * fills q's window and filters. */
static int resolve_store(query_args *a, const ks_pipeline *p, ks_query *q, FILE *err)
{
    if (!ks_pipeline_store(p, a->store)) {
        fprintf(err, "kstreams query: %s: no store '%s'; stores:", a->file, a->store);
        for (size_t s = 0; s < p->store_count; s++)
            fprintf(err, " %s", p->stores[s].name);
        fprintf(err, "%s\n", p->store_count ? "" : " (none)");
        return KS_EXIT_NOT_FOUND;
    }
    const ks_cfg_node *wnode = NULL;
    ks_win_spec wspec = {0};
    char msg[2048];
    if (!a->raw && ks_topology_store_window(p, a->store, &wnode, &wspec, msg, sizeof msg) < 0) {
        fprintf(err, "%s\n", msg);
        return KS_EXIT_INVALID;
    }
    q->kind = wspec.kind;
    q->size = wspec.size;
    q->retention = wspec.retention;
    q->tfrom = INT64_MIN;
    q->tto = INT64_MAX;
    int rc = q->kind == KS_WIN_NONE ? key_bounds(a, err) : time_bounds(a, wnode, q->kind, q, err);
    q->store = a->store;
    q->json = strcmp(a->format, "json") == 0;
    q->int64 = a->int64;
    q->hex = a->hex;
    q->ms = strcmp(a->time_format, "ms") == 0;
    q->single = a->key.set;
    q->key = a->key.set ? &a->key : NULL;
    q->kfrom = &a->kfrom;
    q->kto = &a->kto;
    return rc;
}

/* A key for messages: as text when printable, else 0x... */
static void describe_key(const ks_query_bytes *k, char *buf, size_t len)
{
    if (ks_query_printable(k->data, k->len) && k->len < len) {
        memcpy(buf, k->data, k->len);
        buf[k->len] = '\0';
        return;
    }
    size_t n = (size_t)snprintf(buf, len, "0x");
    for (size_t i = 0; i < k->len && n + 3 < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%02x", k->data[i]);
}

/* Read the partitions (all, or --partition) into q. *present counts the
 * partitions that have the store. */
static ks_exit read_partitions(const query_args *a, const ks_pipeline *p, ks_query *q,
                               size_t *present, FILE *err)
{
    char base[4096];
    int32_t *parts = NULL, one = (int32_t)a->partition;
    size_t nparts = 0;
    const ks_cfg_store *st = ks_pipeline_store(p, a->store);
    if (st && st->global) { /* one environment for the process, no partitions */
        int missing = 0;
        ks_global_dir(p, base, sizeof base);
        q->partition = -1;
        ks_exit rc = ks_query_partition(q, base, &missing, err) ? KS_EXIT_FAILURE : KS_EXIT_OK;
        *present = !missing;
        if (missing && rc == KS_EXIT_OK) {
            fprintf(err, "kstreams query: %s: no global store (has the pipeline run with "
                         "this state_dir?)\n",
                    base);
            return KS_EXIT_NOT_FOUND;
        }
        return rc;
    }
    ks_layout_app_dir(p->state_dir, p->application, base, sizeof base);
    if (ks_query_list_partitions(base, &parts, &nparts) != 0) {
        fprintf(err, "kstreams query: %s: no state directory (has the pipeline run with "
                     "this state_dir?)\n",
                base);
        return KS_EXIT_NOT_FOUND;
    }
    const int32_t *list = a->partition >= 0 ? &one : parts;
    size_t count = a->partition >= 0 ? 1 : nparts;
    ks_exit rc = KS_EXIT_OK;
    *present = 0;
    for (size_t i = 0; i < count && rc == KS_EXIT_OK; i++) {
        char dir[4200];
        int missing = 0;
        ks_layout_task_dir(p->state_dir, p->application, list[i], dir, sizeof dir);
        q->partition = list[i];
        rc = ks_query_partition(q, dir, &missing, err) ? KS_EXIT_FAILURE : KS_EXIT_OK;
        *present += !missing;
        if (q->key && q->found) /* a key lives in one partition */
            break;
    }
    free(parts);
    return rc;
}

/* After reading: what was not found, or the JSON document. */
static ks_exit verdict(const query_args *a, const ks_pipeline *p, const ks_query *q,
                       size_t present, FILE *out, FILE *err)
{
    char kdesc[128], base[4096];
    if (a->key.set)
        describe_key(&a->key, kdesc, sizeof kdesc);
    if (a->partition >= 0 && !present) {
        ks_layout_app_dir(p->state_dir, p->application, base, sizeof base);
        fprintf(err, "kstreams query: %s/task-%ld: no store '%s' here\n", base, a->partition,
                a->store);
        return KS_EXIT_NOT_FOUND;
    }
    if (a->key.set && !q->found && q->kind != KS_WIN_NONE) {
        fprintf(err, "kstreams query: no window of key '%s' in store '%s'", kdesc, a->store);
        if (a->from || a->to)
            fprintf(err, " with a start in [%s, %s]", a->from ? a->from : "-",
                    a->to ? a->to : "-");
        fputc('\n', err);
        return KS_EXIT_NOT_FOUND;
    }
    if (a->key.set && !q->found) {
        fprintf(err, "kstreams query: key '%s' not found in store '%s'\n", kdesc, a->store);
        return KS_EXIT_NOT_FOUND;
    }
    if (!q->json)
        return KS_EXIT_OK;
    /* one object for one key of a key-value store; windows: an array */
    json_t *doc = a->key.set && q->kind == KS_WIN_NONE ? json_array_get(q->array, 0) : q->array;
    char *s = json_dumps(doc, JSON_COMPACT);
    if (!s)
        return KS_EXIT_FAILURE;
    fprintf(out, "%s\n", s);
    free(s);
    return KS_EXIT_OK;
}

/* Everything after the options: load, resolve, read, judge. */
static int run_query(query_args *a, ks_query *q, FILE *out, FILE *err)
{
    ks_pipeline *p = NULL;
    int rc = check_args(a, err);
    if (rc == KS_CLI_GO && ks_cli_load_pipeline(a->file, &p, err) != KS_EXIT_OK)
        rc = KS_EXIT_INVALID;
    if (rc == KS_CLI_GO)
        rc = resolve_store(a, p, q, err);
    if (rc == KS_CLI_GO && q->json && !(q->array = json_array()))
        rc = KS_EXIT_FAILURE;
    if (rc == KS_CLI_GO && a->remote) {
        if (a->raw || (a->format_set && !q->json))
            rc = usage(err, "%s", "--remote prints JSON (--format json) and has no --raw");
        else
            rc = ks_query_remote(a->remote, p->query_token, q, a->partition, a->standby, out,
                                 err);
        ks_pipeline_free(p);
        return rc;
    }
    size_t present = 0;
    if (rc == KS_CLI_GO)
        rc = read_partitions(a, p, q, &present, err);
    if (rc == KS_EXIT_OK)
        rc = verdict(a, p, q, present, out, err);
    ks_pipeline_free(p);
    return rc;
}

ks_exit ks_cmd_query(int argc, char **argv, FILE *out, FILE *err)
{
    static const ks_cli_spec spec = {"query", OPTIONS, on_option, {"pipeline FILE", "STORE"},
                                     0};
    query_args a = {.format = "text", .time_format = "iso", .partition = -1};
    ks_query q = {.out = out};
    const char *operands[KS_CLI_MAX_OPERANDS];
    int rc = ks_cli_parse(&spec, argc, argv, &a, operands, out, err);
    if (rc == KS_CLI_GO) {
        a.file = operands[0];
        a.store = operands[1];
        rc = run_query(&a, &q, out, err);
    }
    json_decref(q.array);
    free(q.ts);
    free(a.key.data);
    free(a.kfrom.data);
    free(a.kto.data);
    if (fflush(out) != 0 && rc == KS_EXIT_OK)
        rc = KS_EXIT_FAILURE;
    return (ks_exit)rc;
}
