-- The statements of `migrate` (store/migrate.py) and of what the migrations
-- ask of their run (store/migration_context.py): one migrate at a time, where
-- the database stands before Alembic starts, whether an existing
-- availability_slots can be adopted, and the record that it was.

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
-- The migration session's lock_timeout (one try: store/migrate.py, LOCK_TRY_MS):
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

-- fragment: adoption_privilege_rows
-- What migrate needs to add the worker's objects beside the calendar's
-- table: to act as its owner (only an owner may index a table) and to create
-- tables in the schema it creates them in (the first of the search_path).
SELECT 40 AS ordinal,
       format('migrate runs as %s, which does not act as the owner of availability_slots '
              '(%s): run it as that role', current_user, pg_get_userbyid(c.relowner)) AS problem
FROM pg_class AS c
WHERE c.oid = to_regclass('availability_slots')
  AND NOT pg_has_role(current_user, c.relowner, 'USAGE')
UNION ALL
SELECT 41, format('migrate runs as %s, which may not create tables in schema %s',
                  current_user, coalesce(current_schema(), '(none on the search_path)'))
WHERE current_schema() IS NULL OR NOT has_schema_privilege(current_schema(), 'CREATE')

-- fragment: adoption_partition_rows
-- What adopting a partitioned availability_slots asks of its partitions: the
-- worker's index is built on each one (CONCURRENTLY), then attached to the
-- index on the parent. A partition itself partitioned, a foreign table (no
-- index) or one migrate may not index (only an owner may) would stop that
-- half-way: refused before anything changes. Nothing is built where the
-- calendar has an index of the contract's name already (it is kept).
SELECT 50 + CASE WHEN c.relkind = 'p' THEN 0 WHEN c.relkind = 'f' THEN 1 ELSE 2 END AS ordinal,
       CASE
           WHEN c.relkind = 'p'
               THEN format('partition %s is itself partitioned: the worker indexes one level '
                           'of partitions', t.relid::regclass)
           WHEN c.relkind = 'f'
               THEN format('partition %s is a foreign table: no index can be built on it',
                           t.relid::regclass)
           ELSE format('migrate runs as %s, which does not act as the owner of partition %s '
                       '(%s): run it as that role', current_user, t.relid::regclass,
                       pg_get_userbyid(c.relowner))
       END AS problem
FROM pg_partition_tree(to_regclass('availability_slots')) AS t
JOIN pg_class AS c ON c.oid = t.relid
WHERE t.level = 1 AND to_regclass('ix_availability_slots_status_start') IS NULL
  AND (c.relkind IN ('p', 'f') OR NOT pg_has_role(current_user, c.relowner, 'USAGE'))

-- name: adoption_problems
-- Why the existing availability_slots cannot be adopted, one line each (the
-- catalog's part: the table contract, its partitions and migrate's
-- privileges). The status values are read too where they read as text
-- (status_value_mismatches).
SELECT problem FROM (
    -- include: contract_mismatch_rows
    UNION ALL
    -- include: adoption_partition_rows
    UNION ALL
    -- include: adoption_privilege_rows
) AS found
ORDER BY ordinal;

-- name: adoption_guard
-- The first step of the offline adoption script (`migrate --sql --adopt`),
-- which cannot inspect the database beforehand: it stops the script unless
-- the existing availability_slots can be adopted (the same checks as above).
-- Run the script with psql -v ON_ERROR_STOP=1.
DO $guard$
DECLARE
    problems text;
BEGIN
    -- include: refuse_a_slot_table_elsewhere
    SELECT string_agg(found.problem, '; ' ORDER BY found.ordinal) INTO problems FROM (
        -- include: contract_mismatch_rows
        UNION ALL
        -- include: adoption_partition_rows
        UNION ALL
        -- include: adoption_privilege_rows
    ) AS found;
    IF (
        -- include: status_values_readable
    ) THEN
        SELECT concat_ws('; ', problems, string_agg(found.problem, '; ' ORDER BY found.ordinal))
        INTO problems FROM (
            -- include: status_value_rows
        ) AS found;
        problems := nullif(problems, '');
    END IF;
    -- The worker's index on a partitioned table is built partition by partition, each
    -- from what the catalog says then: only `slot-expiration migrate` can.
    IF problems IS NULL AND to_regclass('ix_availability_slots_status_start') IS NULL AND EXISTS (
        SELECT FROM pg_class
        WHERE oid = to_regclass('availability_slots') AND relkind = 'p'
    ) THEN
        problems := 'it is partitioned: this script cannot build the worker''s index one '
                    'partition at a time; run `slot-expiration migrate` itself';
    END IF;
    IF problems IS NOT NULL THEN
        RAISE EXCEPTION 'availability_slots cannot be adopted, nothing changed: %', problems;
    END IF;
END
$guard$;

-- name: creation_guard
-- The first step of the offline script for an empty database (`migrate --sql`),
-- which cannot inspect the database beforehand: it stops the script (nothing
-- created: it runs in the transaction that creates the version table) where
-- the calendar's table exists already, on the search_path (the adoption script
-- is for it) or in a schema the search_path misses (never a second one).
DO $guard$
BEGIN
    -- include: refuse_a_slot_table_elsewhere
    IF to_regclass('availability_slots') IS NOT NULL THEN
        RAISE EXCEPTION 'availability_slots exists already (%): this script is for an empty '
                        'database; print the adoption script with --adopt; nothing changed',
                        to_regclass('availability_slots')::text;
    END IF;
END
$guard$;

-- fragment: refuse_a_slot_table_elsewhere
-- Inside a guard: stop when the search_path finds no availability_slots but
-- another schema holds one, in the words `migrate` uses (SlotTableElsewhereError).
IF to_regclass('availability_slots') IS NULL AND (
    -- include: slot_table_schemas_elsewhere
) IS NOT NULL THEN
    RAISE EXCEPTION '%', (
        SELECT format('availability_slots is not on the search_path (%s) but in %s: point '
                      'every command at it with --schema %s (SLOT_EXPIRATION_SCHEMA), or ALTER '
                      'ROLE %s SET search_path = %s; nothing changed',
                      current_setting('search_path'),
                      CASE WHEN cardinality(found.schemas) = 1
                           THEN 'schema ' || found.schemas[1]
                           ELSE 'schemas ' || array_to_string(found.schemas, ', ') END,
                      CASE WHEN cardinality(found.schemas) = 1 THEN found.schemas[1]
                           ELSE 'SCHEMA' END,
                      current_user,
                      CASE WHEN cardinality(found.schemas) = 1 THEN quote_ident(found.schemas[1])
                           ELSE '"SCHEMA"' END)
        FROM (
            SELECT (
                -- include: slot_table_schemas_elsewhere
            ) AS schemas
        ) AS found
    );
END IF;

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
-- store/schema_location.py). Returns the schema when it changed.
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
