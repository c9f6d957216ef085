-- The statements of `migrate` (schema/migrate.py) and of what the migrations
-- ask of their run (schema/migration_context.py): one migrate at a time, its
-- session's settings, where the database stands before Alembic starts, the
-- record of what was adopted, and what a migration asks before it creates
-- (whether the calendar's table can be adopted is contract.sql's).

-- name: migrate_try_lock
-- One migrate at a time per database: a session-level advisory lock (key
-- 'slotexpi' as a bigint), held by a session of its own until migrate ends (or dies).
-- Tried, never waited for: a session blocked in pg_advisory_lock holds a
-- snapshot, and the holder's CREATE INDEX CONCURRENTLY waits for every older
-- snapshot to end; each would wait for the other through two sessions, a
-- deadlock the server cannot see. A try ends at once, so a build waits for it
-- a moment at most.
SELECT pg_try_advisory_lock(8317145157555744873);

-- name: migrate_starting_point
-- Before Alembic starts: does the slot table exist, does our history table.
SELECT to_regclass('availability_slots') IS NOT NULL AS slot_table_exists,
       to_regclass('slot_expiration_alembic_version') IS NOT NULL AS history_exists;

-- name: migrate_lock_timeout
-- The migration session's lock_timeout (one try: schema/migrate.py, LOCK_TRY_MS):
-- a statement that would queue the calendar's writes behind its lock gives up
-- instead, and migrate tries again a little later.
SELECT set_config('lock_timeout', %(lock_timeout)s, false);

-- name: migrate_session_settings
-- What every migrate session relies on, for the whole session (migrate refuses
-- a pooler in transaction mode: migrate_mark_session): the time zone and
-- styles, the search_path the URL's options ask for (--schema; NULL keeps the
-- session's own: a pooler may have dropped the options) and one try's
-- lock_timeout (NULL: the session's own).
SELECT set_config('TimeZone', 'UTC', false),
       set_config('DateStyle', 'ISO, MDY', false),
       set_config('IntervalStyle', 'postgres', false),
       set_config('search_path', coalesce(%(search_path)s, current_setting('search_path')), false),
       set_config('lock_timeout', coalesce(%(lock_timeout)s, current_setting('lock_timeout')),
                  false);

-- name: migrate_mark_session
-- migrate holds a lock and settings across its transactions, which needs a
-- server session of its own: this marks the session it has (a setting of the
-- session, with a token of this run) ...
SELECT set_config('slot_expiration.migrate_session', %(token)s, false);

-- name: migrate_session_mark
-- ... which a later transaction of the same session reads back, and a new
-- connection does not: a pooler in transaction mode hands either of them
-- another client's server session (the token missing, or seen by another).
SELECT current_setting('slot_expiration.migrate_session', true);

-- name: migrate_unmark_session
SELECT set_config('slot_expiration.migrate_session', '', false);

-- name: mark_slot_table_adopted
-- Migration 0001 found the calendar's table and adopted it: recorded on our
-- own history table, so each later migration (and a run resumed after a
-- crash) knows to leave the calendar's table alone.
COMMENT ON TABLE slot_expiration_alembic_version IS
    'slot-expiration adopted availability_slots (migration 0001)';

-- name: slot_table_adopted
SELECT coalesce(
    obj_description(to_regclass('slot_expiration_alembic_version'), 'pg_class')
        LIKE 'slot-expiration adopted availability_slots%',
    false
);

-- name: relation_exists
-- What a migration asks before creating something, so that running the
-- migrations again creates only what is missing (a repair).
SELECT to_regclass(%(name)s) IS NOT NULL;

-- name: column_exists
SELECT EXISTS (
    SELECT FROM pg_attribute
    WHERE attrelid = to_regclass(%(table)s) AND attname = %(column)s AND NOT attisdropped
);

-- name: constraint_exists
SELECT EXISTS (
    SELECT FROM pg_constraint WHERE conrelid = to_regclass(%(table)s) AND conname = %(name)s
);

-- name: constraint_validated
-- Whether a constraint added NOT VALID was validated since (a run cut short in between
-- left it unvalidated: the next one validates it).
SELECT coalesce((
    SELECT convalidated FROM pg_constraint
    WHERE conrelid = to_regclass(%(table)s) AND conname = %(name)s
), false);

-- name: index_validity
SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%(name)s);

-- name: slot_table_autovacuum_set
-- Whether migration 0005's setting is on availability_slots already.
SELECT coalesce('autovacuum_vacuum_scale_factor=0.02' = ANY (reloptions), false)
FROM pg_class WHERE oid = to_regclass('availability_slots');

-- name: slot_table_partitioned
SELECT relkind = 'p' FROM pg_class WHERE oid = to_regclass('availability_slots');

-- name: partitions_without_worker_index
-- The partitions of availability_slots (one level: adoption refuses more) whose
-- index is not yet attached to ix_availability_slots_status_start, each with an
-- index of the worker's shape already on it, if any (a build an earlier migrate
-- started: valid, it is attached; invalid, built again): the same columns in the
-- same order, the same predicate as the index on the parent, btree, not unique.
-- Names come as regclass spells them, quoted where they need it.
SELECT t.relid::regclass::text AS partition,
       found.indexrelid::regclass::text AS index_name,
       coalesce(found.indisvalid, false) AS valid
FROM pg_partition_tree(to_regclass('availability_slots')) AS t
LEFT JOIN LATERAL (
    SELECT i.indexrelid, i.indisvalid
    FROM pg_index AS i
    JOIN pg_class AS ic ON ic.oid = i.indexrelid
    JOIN pg_am AS am ON am.oid = ic.relam
    WHERE i.indrelid = t.relid AND NOT i.indisunique AND am.amname = 'btree'
      AND i.indnatts = 2 AND i.indexprs IS NULL
      AND ARRAY(
          SELECT a.attname::text
          FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k (attnum, n)
          JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
          ORDER BY k.n
      ) = ARRAY['start_at', 'id']
      AND pg_get_expr(i.indpred, i.indrelid) = (
          SELECT pg_get_expr(p.indpred, p.indrelid) FROM pg_index AS p
          WHERE p.indexrelid = to_regclass('ix_availability_slots_status_start')
      )
    ORDER BY i.indisvalid DESC, i.indexrelid
    LIMIT 1
) AS found ON true
WHERE t.level = 1 AND t.isleaf
  AND NOT EXISTS (
      SELECT FROM pg_inherits AS h
      JOIN pg_index AS attached ON attached.indexrelid = h.inhrelid
      WHERE h.inhparent = to_regclass('ix_availability_slots_status_start')
        AND attached.indrelid = t.relid
  )
ORDER BY t.relid::regclass::text;

-- name: drop_worker_table
-- A repair: one of the worker's own tables, empty and no longer of its shape,
-- goes before the migrations create it again ({table}: an identifier psycopg.sql
-- quotes, one of the worker's tables).
DROP TABLE {table};

-- name: record_slot_table_schema
-- Which availability_slots migrate adopted (or created): the schema the
-- search_path finds it in now (migration 0008; and every migrate after it,
-- which changes it only when --schema names the calendar's new schema: see
-- schema/location.py). Returns the schema when it changed.
UPDATE slot_expiration_alembic_version AS v
SET slot_table_schema = found.schema
FROM (
    SELECT n.nspname::text AS schema
    FROM pg_class AS c
    JOIN pg_namespace AS n ON n.oid = c.relnamespace
    WHERE c.oid = to_regclass('availability_slots')
) AS found
WHERE v.slot_table_schema IS DISTINCT FROM found.schema
RETURNING v.slot_table_schema;
