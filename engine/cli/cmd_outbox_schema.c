/*
 * cmd_outbox_schema.c - `kstreams outbox-schema`: print the SQL of the
 * PostgreSQL outbox, mailbox ledger and user -> partition map
 * (sql/outbox_pg_001.sql to outbox_pg_003.sql, compiled in).
 */
#include "cli/cli_args.h"
#include "cli/commands.h"
#include "outbox/outbox_pg.h"

const char ks_cmd_outbox_schema_help[] =
    "Print the SQL schema of the PostgreSQL outbox and mailbox (the migration\n"
    "files installed as PREFIX/share/kstreams/sql/outbox_pg_001.sql,\n"
    "outbox_pg_002.sql and outbox_pg_003.sql): the table, the trigger\n"
    "enforcing the status transitions, ks_outbox_release(); the mailbox's\n"
    "ledger table; the user -> partition map and ks_assign_partitions().\n"
    "exit codes: 0 ok, 64 usage\n";

ks_exit ks_cmd_outbox_schema(int argc, char **argv, FILE *out, FILE *err)
{
    static const ks_cli_spec spec = {"outbox-schema", NULL, NULL, {NULL}, 0};
    const char *operands[KS_CLI_MAX_OPERANDS];
    int rc = ks_cli_parse(&spec, argc, argv, NULL, operands, out, err);
    if (rc != KS_CLI_GO)
        return (ks_exit)rc;
    fputs(ks_outbox_pg_schema, out);
    return KS_EXIT_OK;
}
