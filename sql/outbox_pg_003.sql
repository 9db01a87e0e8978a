-- kstreams PostgreSQL schema version 3: sequential partition assignment.
--
-- Apply after version 2, once, with your migrations (psql -v ON_ERROR_STOP=1
-- -f this file). Used by a postgres outbox with `max_users_per_partition`
-- (docs/outbox-and-mailbox.md): each user (the outbox row's aggregate) gets
-- a partition of its topic the first time one of its rows is dispatched,
-- and keeps it forever. The n-th distinct user of a topic (n = 0, 1, ...)
-- gets partition n / max_users_per_partition, so partition p fills before
-- p+1 opens. kstreams calls ks_assign_partitions() and only reads the rest.

CREATE TABLE IF NOT EXISTS ks_user_partitions (
    topic           text        NOT NULL,
    user_id         text        NOT NULL,  -- the outbox row's aggregate
    kafka_partition integer     NOT NULL CHECK (kafka_partition >= 0),
    assigned_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, user_id)
);

-- Users assigned so far per topic; its row is the per-topic lock.
CREATE TABLE IF NOT EXISTS ks_user_partition_counts (
    topic text   PRIMARY KEY,
    users bigint NOT NULL DEFAULT 0
);

-- The partitions of `p_users` in `p_topic`, assigning the new ones in array
-- order. Concurrent callers of one topic queue on the count row (FOR
-- UPDATE), and each statement after the lock sees what the previous
-- holder committed (READ COMMITTED, the default: do not call it in a
-- REPEATABLE READ or SERIALIZABLE transaction), so two processes never
-- give a user two partitions nor two users one slot.
CREATE OR REPLACE FUNCTION ks_assign_partitions(p_topic text, p_users text[],
                                                p_max_users integer)
RETURNS TABLE (user_id text, kafka_partition integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    n bigint;
    u text;
BEGIN
    IF p_max_users IS NULL OR p_max_users < 1 THEN
        RAISE EXCEPTION 'max_users_per_partition must be at least 1, not %',
            p_max_users USING ERRCODE = 'check_violation';
    END IF;
    INSERT INTO ks_user_partition_counts (topic) VALUES (p_topic)
        ON CONFLICT (topic) DO NOTHING;
    SELECT c.users INTO n FROM ks_user_partition_counts c WHERE c.topic = p_topic FOR UPDATE;
    FOR u IN SELECT x.u FROM unnest(p_users) WITH ORDINALITY AS x(u, i)
             WHERE x.u IS NOT NULL GROUP BY x.u ORDER BY min(x.i) LOOP
        INSERT INTO ks_user_partitions AS p (topic, user_id, kafka_partition)
            VALUES (p_topic, u, (n / p_max_users)::integer)
            ON CONFLICT (topic, user_id) DO NOTHING;
        IF FOUND THEN
            n := n + 1;
        END IF;
    END LOOP;
    UPDATE ks_user_partition_counts c SET users = n WHERE c.topic = p_topic;
    RETURN QUERY SELECT p.user_id, p.kafka_partition FROM ks_user_partitions p
        WHERE p.topic = p_topic AND p.user_id = ANY (p_users);
END;
$$;
