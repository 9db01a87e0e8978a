/*
 * cmd_outbox_status.c - `kstreams outbox-status FILE [EVENT-ID]`: one
 * event of the pipeline's LMDB outbox as JSON, or the number of events per
 * status. Reads the outbox read-only: the engine may be running.
 */
#include <jansson.h>
#include <stdlib.h>

#include "cli/cli_args.h"
#include "cli/commands.h"
#include "outbox/ingest.h"
#include "outbox/outbox.h"
#include "outbox/outbox_service.h"

const char ks_cmd_outbox_status_help[] =
    "Read the outbox of pipeline FILE read-only: with EVENT-ID that event as\n"
    "JSON (id, status, user, topic, attempts, partition, offset, ...);\n"
    "without, the number of events per status.\n"
    "exit codes: 0 ok, 1 read failure, 2 invalid pipeline or no `outbox:`,\n"
    "3 no such event or no outbox yet, 64 usage\n";

/* One row as a JSON object, as the HTTP endpoint shows it. */
static void print_event(const ks_outbox_event *ev, FILE *out)
{
    json_t *o = ks_outbox_event_json(ev);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    fprintf(out, "%s\n", text ? text : "{}");
    free(text);
    json_decref(o);
}

static ks_exit print_one(ks_outbox *ob, const char *dir, const char *id, FILE *out, FILE *err)
{
    ks_outbox_event ev;
    int got = ks_outbox_get(ob, id, &ev);
    if (got != 0) {
        fprintf(err, "%s: %s\n", dir, ks_outbox_last_error(ob));
        return got == KS_ERR_NOT_FOUND || got == KS_ERR_INVALID ? KS_EXIT_NOT_FOUND
                                                                : KS_EXIT_FAILURE;
    }
    print_event(&ev, out);
    ks_outbox_event_clear(&ev);
    return KS_EXIT_OK;
}

static ks_exit print_counts(ks_outbox *ob, const char *dir, FILE *out, FILE *err)
{
    uint64_t counts[KS_OUTBOX_STATUS_COUNT];
    if (ks_outbox_counts(ob, counts) != 0) {
        fprintf(err, "%s: cannot read the outbox\n", dir);
        return KS_EXIT_FAILURE;
    }
    for (int i = 0; i < KS_OUTBOX_STATUS_COUNT; i++)
        fprintf(out, "%-16s %llu\n", ks_outbox_status_name((ks_outbox_status)i),
                (unsigned long long)counts[i]);
    return KS_EXIT_OK;
}

/* The LMDB outbox directory of pipeline `file` into dir; KS_EXIT_INVALID
 * (printed) when it has none. */
static ks_exit outbox_dir(const char *file, char *dir, size_t len, FILE *err)
{
    ks_pipeline *p = NULL;
    if (ks_cli_load_pipeline(file, &p, err) != KS_EXIT_OK)
        return KS_EXIT_INVALID;
    ks_exit rc = KS_EXIT_OK;
    if (!p->outbox) {
        fprintf(err, "%s: the pipeline has no `outbox:` section\n", file);
        rc = KS_EXIT_INVALID;
    } else if (p->outbox->backend == KS_OUTBOX_BACKEND_POSTGRES) {
        fprintf(err, "%s: the outbox is in PostgreSQL table %s: query it with SQL "
                     "(SELECT status, count(*) FROM %s GROUP BY status)\n",
                file, p->outbox->table, p->outbox->table);
        rc = KS_EXIT_INVALID;
    } else {
        ks_outbox_dir(p, dir, len);
    }
    ks_pipeline_free(p);
    return rc;
}

ks_exit ks_cmd_outbox_status(int argc, char **argv, FILE *out, FILE *err)
{
    static const ks_cli_spec spec = {"outbox-status", NULL, NULL, {"pipeline FILE"}, 1};
    const char *operands[KS_CLI_MAX_OPERANDS];
    int rc = ks_cli_parse(&spec, argc, argv, NULL, operands, out, err);
    if (rc != KS_CLI_GO)
        return (ks_exit)rc;
    char dir[4096], msg[2048];
    ks_exit got = outbox_dir(operands[0], dir, sizeof dir, err);
    if (got != KS_EXIT_OK)
        return got;
    ks_outbox *ob = NULL;
    if (ks_outbox_open_readonly(dir, &ob, msg, sizeof msg) != 0) {
        fprintf(err, "%s (has the engine run yet?)\n", msg);
        return KS_EXIT_NOT_FOUND;
    }
    got = operands[1] ? print_one(ob, dir, operands[1], out, err)
                      : print_counts(ob, dir, out, err);
    ks_outbox_close(ob);
    return got;
}
