-- kstreams PostgreSQL schema version 2: the mailbox's idempotency ledger.
--
-- Apply after version 1, once, with your migrations (psql -v ON_ERROR_STOP=1
-- -f this file). Needed only by a mailbox node with `ledger_backend:
-- postgres` (docs/outbox-and-mailbox.md): one row per command it handled,
-- written in the same transaction as the handler's own SQL (sql_exec), so
-- the two commit or roll back together. kstreams only INSERTs and SELECTs.
--
-- Rows are never deleted by kstreams. To prune, delete rows far below the
-- consumer group's committed offset of their partition (a replay only
-- starts from there); a deleted row's command, replayed, runs again:
--
--   DELETE FROM ks_mailbox_ledger WHERE created_at < now() - interval '30 days';

CREATE TABLE IF NOT EXISTS ks_mailbox_ledger (
    consumer_group  text        NOT NULL,  -- the application id, or `group:`
    topic           text        NOT NULL,  -- the mailbox topic
    kafka_partition integer     NOT NULL,
    kafka_offset    bigint      NOT NULL,
    event_id        text        NOT NULL,  -- the outbox event id (ks.event_id)
    status          text        NOT NULL CHECK (status IN ('SUCCESS', 'PUSHED_FAILURE')),
    result          json        NOT NULL,  -- the result record, as sent to Kafka
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, topic, kafka_partition, kafka_offset)
);

CREATE INDEX IF NOT EXISTS ks_mailbox_ledger_event ON ks_mailbox_ledger (event_id);
