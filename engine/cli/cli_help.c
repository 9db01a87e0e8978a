/*
 * cli_help.c - the `kstreams COMMAND --help` texts, one per command of
 * main.c. docs/cli.md and docs/kstreams.1 say the same at length.
 */
#include "cli/cli_help.h"

#include <string.h>

static const struct {
    const char *cmd;
    const char *text;
} HELP[] = {
    {"run", "usage: kstreams run FILE [--instance NAME]\n"
            "\n"
            "Run the pipeline FILE until SIGINT or SIGTERM, then commit (or abort) the\n"
            "open batch and exit. NAME tells processes of one application apart\n"
            "(default: derived from the host name and the state directory).\n"
            "exit codes: 0 clean stop, 1 runtime failure, 2 invalid pipeline or plugin,\n"
            "64 usage\n"},
    {"check", "usage: kstreams check FILE\n"
              "\n"
              "Validate FILE, load its plugins, check every node's config against its\n"
              "processor's schema, print the topology and \"FILE: ok\".\n"
              "exit codes: 0 valid, 2 invalid (the error names file:line:column or the\n"
              "plugin path), 64 usage\n"},
    {"describe", "usage: kstreams describe FILE [--dot]\n"
                 "\n"
                 "Print the topology of FILE: sources, processors (plugin, build id),\n"
                 "stores and sinks; with --dot as a Graphviz graph:\n"
                 "  kstreams describe pipeline.yaml --dot | dot -Tsvg > topology.svg\n"
                 "exit codes: 0 ok, 2 invalid pipeline or plugin, 64 usage\n"},
    {"query", "usage: kstreams query FILE STORE [--partition P]\n"
              "                      [--key K | --key-hex HEX | KEY RANGE] [--from T] [--to T]\n"
              "                      [--format text|json] [--int64] [--hex]\n"
              "                      [--time-format iso|ms] [--raw]\n"
              "\n"
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
              "bad time or hex, --from after --to, sliding windows of aggregate/reduce)\n"},
    {"reload", "usage: kstreams reload FILE\n"
               "\n"
               "Make the engine running pipeline FILE load its plugin files again (hot\n"
               "deploy): signal the pid in STATE_DIR/APPLICATION/kstreams.pid with SIGHUP,\n"
               "wait up to 60 s for the result, print it as `kstreams status` does.\n"
               "exit codes: 0 swapped or unchanged, 1 refused or no result in 60 s,\n"
               "2 invalid pipeline, no engine running it, or cannot signal it\n"},
    {"status", "usage: kstreams status FILE [--json]\n"
               "\n"
               "Print the status of the engine running pipeline FILE: per processor the\n"
               "plugin, build id, file, loaded at and last reload error; reload counters.\n"
               "--json prints STATE_DIR/APPLICATION/status.json itself.\n"
               "exit codes: 0 ok, 2 invalid pipeline or no status file (engine not running)\n"},
    {"outbox-status", "usage: kstreams outbox-status FILE [EVENT-ID]\n"
                      "\n"
                      "Read the outbox of pipeline FILE read-only: with EVENT-ID that event as\n"
                      "JSON (id, status, user, topic, attempts, partition, offset, ...);\n"
                      "without, the number of events per status.\n"
                      "exit codes: 0 ok, 1 read failure, 2 invalid pipeline or no `outbox:`,\n"
                      "3 no such event or no outbox yet, 64 usage\n"},
    {"outbox-schema", "usage: kstreams outbox-schema\n"
                      "\n"
                      "Print the SQL schema of the PostgreSQL outbox (the migration file\n"
                      "installed as PREFIX/share/kstreams/sql/outbox_pg_001.sql): the table,\n"
                      "the trigger enforcing the status transitions, ks_outbox_release().\n"
                      "exit codes: 0 ok, 64 usage\n"},
    {"version", "usage: kstreams version\n"
                "\n"
                "Print the kstreams version and the plugin ABI (major.minor) it loads.\n"},
};

int ks_cli_command_help(const char *cmd, FILE *f)
{
    for (size_t i = 0; cmd && i < sizeof HELP / sizeof HELP[0]; i++)
        if (strcmp(HELP[i].cmd, cmd) == 0) {
            fputs(HELP[i].text, f);
            return 0;
        }
    return -1;
}
