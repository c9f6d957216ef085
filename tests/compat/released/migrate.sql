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
-- The migration session's lock_timeout (the worker's): a statement that
-- would queue the calendar's writes behind its lock gives up instead.
SELECT set_config('lock_timeout', %(lock_timeout)s, false);

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

-- name: adoption_problems
-- Why the existing availability_slots cannot be adopted, one line each (the
-- catalog's part: the table contract and migrate's privileges). The status
-- values are read too where the column is text (status_value_mismatches).
SELECT problem FROM (
    -- include: contract_mismatch_rows
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
    SELECT string_agg(found.problem, '; ' ORDER BY found.ordinal) INTO problems FROM (
        -- include: contract_mismatch_rows
        UNION ALL
        -- include: adoption_privilege_rows
    ) AS found;
    IF (
        -- include: status_column_is_text
    ) THEN
        SELECT concat_ws('; ', problems, string_agg(found.problem, '; ' ORDER BY found.ordinal))
        INTO problems FROM (
            -- include: status_value_rows
        ) AS found;
        problems := nullif(problems, '');
    END IF;
    IF problems IS NOT NULL THEN
        RAISE EXCEPTION 'availability_slots cannot be adopted, nothing changed: %', problems;
    END IF;
END
$guard$;

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
