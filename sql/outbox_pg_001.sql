-- kstreams PostgreSQL outbox, schema version 1.
--
-- Apply once with your migrations (psql -v ON_ERROR_STOP=1 -f this file).
-- The application inserts rows in its OWN transaction, next to its domain
-- rows; kstreams (outbox: { backend: postgres }) publishes them to Kafka.
--
--   INSERT INTO ks_outbox (aggregate, payload) VALUES ('user-42', '{"a":1}');
--
-- status PENDING (the default) is dispatched at once; PREQUEUED holds the
-- row until SELECT ks_outbox_release(ARRAY[id, ...]) moves it to PENDING.
-- Only kstreams moves rows further: the trigger below refuses any UPDATE of
-- status that the transition table does not allow, whoever runs it.

CREATE TABLE IF NOT EXISTS ks_outbox (
    id              bigserial   PRIMARY KEY,
    event_id        text        NOT NULL UNIQUE DEFAULT gen_random_uuid()::text,
    aggregate       text        NOT NULL,  -- the user/aggregate; the default key
    topic           text,                  -- NULL: the `topic:` of the pipeline
    key             bytea,                 -- NULL: aggregate is the key
    payload         bytea       NOT NULL,
    headers         jsonb,                 -- {"name": "value", ...}, strings only
    status          text        NOT NULL DEFAULT 'PENDING',
    attempts        integer     NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    claimed_at      timestamptz,           -- when the last claim happened
    kafka_partition integer,               -- chosen before the produce
    probe_from      bigint,                -- the partition's end before it
    kafka_offset    bigint,                -- set when PUBLISHED
    last_error      text,
    CONSTRAINT ks_outbox_status_known CHECK (status IN ('PREQUEUED', 'PENDING',
        'DISPATCHING', 'PUBLISHED', 'UNDER_PROCESSING', 'SUCCESS', 'PUSHED_FAILURE',
        'FAILURE')),
    CONSTRAINT ks_outbox_attempts CHECK (attempts >= 0),
    -- the ks.event_id header of the record: short and plain
    CONSTRAINT ks_outbox_event_id CHECK (event_id ~ '^[A-Za-z0-9._:-]{1,64}$')
);

-- The dispatcher's claim reads PENDING rows in id order; the stale probe
-- reads DISPATCHING rows by claim time.
CREATE INDEX IF NOT EXISTS ks_outbox_pending ON ks_outbox (id) WHERE status = 'PENDING';
CREATE INDEX IF NOT EXISTS ks_outbox_dispatching ON ks_outbox (claimed_at)
    WHERE status = 'DISPATCHING';

-- The ONE transition table, the same as the LMDB outbox's
-- (engine/outbox_status.c): PREQUEUED->PENDING (release),
-- PENDING->DISPATCHING (claim), DISPATCHING->PUBLISHED|PENDING|FAILURE|
-- UNDER_PROCESSING, PUBLISHED->UNDER_PROCESSING,
-- UNDER_PROCESSING->SUCCESS|PUSHED_FAILURE; SUCCESS, PUSHED_FAILURE and
-- FAILURE are terminal.
CREATE OR REPLACE FUNCTION ks_outbox_transition_allowed(from_status text, to_status text)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT (from_status, to_status) IN (
        ('PREQUEUED', 'PENDING'),
        ('PENDING', 'DISPATCHING'),
        ('DISPATCHING', 'PUBLISHED'),
        ('DISPATCHING', 'PENDING'),
        ('DISPATCHING', 'FAILURE'),
        ('DISPATCHING', 'UNDER_PROCESSING'),
        ('PUBLISHED', 'UNDER_PROCESSING'),
        ('UNDER_PROCESSING', 'SUCCESS'),
        ('UNDER_PROCESSING', 'PUSHED_FAILURE'))
$$;

-- A row starts PENDING or PREQUEUED, never further along.
CREATE OR REPLACE FUNCTION ks_outbox_check_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status NOT IN ('PENDING', 'PREQUEUED') THEN
        RAISE EXCEPTION 'ks_outbox: a new row is PENDING or PREQUEUED, not %', NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION ks_outbox_check_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IS DISTINCT FROM OLD.status
       AND NOT ks_outbox_transition_allowed(OLD.status, NEW.status) THEN
        RAISE EXCEPTION 'ks_outbox: illegal transition % -> % (event %)',
            OLD.status, NEW.status, OLD.event_id USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.event_id IS DISTINCT FROM OLD.event_id THEN
        RAISE EXCEPTION 'ks_outbox: event_id never changes' USING ERRCODE = 'check_violation';
    END IF;
    NEW.updated_at := now();
    RETURN NEW;
END $$;

-- Wakes the dispatchers (LISTEN on the table's name) when a row becomes
-- PENDING; they also poll, so a lost notification only delays.
CREATE OR REPLACE FUNCTION ks_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_TABLE_NAME, '');
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS ks_outbox_insert ON ks_outbox;
CREATE TRIGGER ks_outbox_insert BEFORE INSERT ON ks_outbox
    FOR EACH ROW EXECUTE FUNCTION ks_outbox_check_insert();
DROP TRIGGER IF EXISTS ks_outbox_update ON ks_outbox;
CREATE TRIGGER ks_outbox_update BEFORE UPDATE ON ks_outbox
    FOR EACH ROW EXECUTE FUNCTION ks_outbox_check_update();
DROP TRIGGER IF EXISTS ks_outbox_wake ON ks_outbox;
CREATE TRIGGER ks_outbox_wake AFTER INSERT OR UPDATE OF status ON ks_outbox
    FOR EACH ROW WHEN (NEW.status = 'PENDING') EXECUTE FUNCTION ks_outbox_notify();

-- Release held (PREQUEUED) rows: the number of rows moved to PENDING.
CREATE OR REPLACE FUNCTION ks_outbox_release(ids bigint[]) RETURNS integer
LANGUAGE sql AS $$
    WITH moved AS (
        UPDATE ks_outbox SET status = 'PENDING'
         WHERE id = ANY(ids) AND status = 'PREQUEUED'
        RETURNING 1)
    SELECT count(*)::integer FROM moved
$$;

CREATE TABLE IF NOT EXISTS ks_outbox_schema (version integer PRIMARY KEY);
INSERT INTO ks_outbox_schema (version) VALUES (1) ON CONFLICT DO NOTHING;
