-- The schema as the worker needs it: the calendar's table contract, and what a
-- cycle needs of the role it runs as. Run by slot_store (each cycle's
-- preflight), status_store (the schema section of `status`) and migrate
-- (whether an existing availability_slots can be adopted: migrate.sql).

-- fragment: slot_table_contract
-- The table contract of availability_slots (the spec): its columns, their
-- types as format_type() spells them, all NOT NULL.
SELECT * FROM (VALUES
    (1, 'id', 'uuid'),
    (2, 'tenant_id', 'uuid'),
    (3, 'consultant_id', 'uuid'),
    (4, 'start_at', 'timestamp with time zone'),
    (5, 'end_at', 'timestamp with time zone'),
    (6, 'status', 'text'),
    (7, 'version', 'integer'),
    (8, 'created_at', 'timestamp with time zone'),
    (9, 'updated_at', 'timestamp with time zone')
) AS contract (ordinal, column_name, data_type)

-- fragment: worker_requirements
-- What one cycle needs: the relations it reads and writes, the columns it
-- names, and the privileges it uses (NULL: only that the column exists).
SELECT * FROM (VALUES
    (1, 'availability_slots', NULL, 'SELECT'),
    (2, 'availability_slots', 'id', NULL),
    (3, 'availability_slots', 'tenant_id', NULL),
    (4, 'availability_slots', 'start_at', NULL),
    (5, 'availability_slots', 'status', 'UPDATE'),
    (6, 'availability_slots', 'updated_at', 'UPDATE'),
    (7, 'availability_slots', 'version', 'UPDATE'),
    (8, 'slot_expiration_failures', NULL, 'SELECT'),
    (9, 'slot_expiration_failures', NULL, 'INSERT'),
    (10, 'slot_expiration_failures', NULL, 'UPDATE'),
    (11, 'slot_expiration_failures', NULL, 'DELETE'),
    (12, 'slot_expiration_alembic_version', NULL, 'SELECT'),
    -- The cycle history: a row per cycle, and the purge past the retention
    -- (a plain DELETE, whose WHERE reads the rows: SELECT too).
    (13, 'slot_expiration_cycles', NULL, 'SELECT'),
    (14, 'slot_expiration_cycles', NULL, 'INSERT'),
    (15, 'slot_expiration_cycles', NULL, 'DELETE')
) AS requirement (ordinal, relation, column_name, privilege)

-- fragment: reader_requirements
-- What the read-only views need (`status`, `quarantine list`, `ui`, /readyz):
-- the tables they read. Sessions of other roles show their state in `status`
-- only with pg_read_all_stats, which only a superuser can grant.
SELECT * FROM (VALUES
    (1, 'availability_slots', NULL, 'SELECT'),
    (2, 'slot_expiration_failures', NULL, 'SELECT'),
    (3, 'slot_expiration_alembic_version', NULL, 'SELECT'),
    (4, 'slot_expiration_cycles', NULL, 'SELECT')
) AS requirement (ordinal, relation, column_name, privilege)

-- fragment: worker_requirement_problems
-- Each requirement the current role does not meet, one line each (a missing
-- table once), in the order above.
SELECT min(p.ordinal) AS ordinal, p.problem
FROM (
    SELECT r.ordinal, CASE
        WHEN to_regclass(r.relation) IS NULL
            THEN format('table %s does not exist', r.relation)
        WHEN r.column_name IS NOT NULL AND a.attname IS NULL
            THEN format('column %s.%s does not exist', r.relation, r.column_name)
        WHEN r.privilege IS NULL
            THEN NULL
        WHEN r.column_name IS NULL
             AND NOT has_table_privilege(to_regclass(r.relation), r.privilege)
            THEN format('no %s on %s', r.privilege, r.relation)
        WHEN r.column_name IS NOT NULL
             AND NOT has_column_privilege(to_regclass(r.relation), r.column_name, r.privilege)
            THEN format('no %s (%s) on %s', r.privilege, r.column_name, r.relation)
    END AS problem
    FROM (
        -- include: worker_requirements
    ) AS r
    LEFT JOIN pg_attribute AS a
        ON a.attrelid = to_regclass(r.relation) AND a.attname = r.column_name
       AND NOT a.attisdropped
) AS p
WHERE p.problem IS NOT NULL
GROUP BY p.problem

-- name: schema_revision
-- The migration the schema is at (Alembic's own history table of the worker).
SELECT version_num FROM slot_expiration_alembic_version;

-- fragment: contract_mismatch_rows
-- How availability_slots differs from the contract, one (ordinal, problem)
-- row each, in contract order; no row when it fits (extra columns, indexes,
-- constraints and triggers are the calendar's own). The catalog only: cheap.
SELECT 0 AS ordinal, 'table availability_slots does not exist' AS problem
WHERE to_regclass('availability_slots') IS NULL
UNION ALL
SELECT columns.ordinal, columns.problem FROM (
    SELECT c.ordinal, CASE
        WHEN a.attname IS NULL THEN format('column %s is missing', c.column_name)
        WHEN format_type(a.atttypid, a.atttypmod) <> c.data_type
            THEN format('column %s is %s, not %s', c.column_name,
                        format_type(a.atttypid, a.atttypmod), c.data_type)
        WHEN NOT a.attnotnull THEN format('column %s is nullable, not NOT NULL', c.column_name)
    END AS problem
    FROM (
        -- include: slot_table_contract
    ) AS c
    LEFT JOIN pg_attribute AS a
        ON a.attrelid = to_regclass('availability_slots') AND a.attname = c.column_name
       AND NOT a.attisdropped
    WHERE to_regclass('availability_slots') IS NOT NULL
) AS columns
WHERE columns.problem IS NOT NULL
UNION ALL
-- `id uuid primary key`: the worker and its quarantine find a slot by id alone.
SELECT 10, 'column id is not the primary key'
WHERE EXISTS (
    SELECT FROM pg_attribute
    WHERE attrelid = to_regclass('availability_slots') AND attname = 'id' AND NOT attisdropped
) AND NOT EXISTS (
    SELECT FROM pg_index AS i
    JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
    WHERE i.indrelid = to_regclass('availability_slots') AND i.indisprimary
      AND i.indnkeyatts = 1 AND a.attname = 'id'
)

-- fragment: status_value_rows
-- The contract's "status text with exactly the values Available, Booked,
-- Expired, Archived", as (ordinal, problem) rows: values the rows hold beyond
-- the four (a full read of the table, which blocks no write), and check
-- constraints on status alone that refuse one of the four (each evaluated by
-- the server on that value: query_to_xml runs the constraint's own
-- expression, from the catalog, over a one-row relation named like the
-- table). Only when the column is text (status_column_is_text).
SELECT 20 AS ordinal,
       format('column status holds values outside the contract: %s',
              string_agg(quote_literal(found.status), ', ' ORDER BY found.status)) AS problem
FROM (
    SELECT DISTINCT status FROM availability_slots
    WHERE status NOT IN ('Available', 'Booked', 'Expired', 'Archived')
) AS found
HAVING count(*) > 0
UNION ALL
SELECT 20 + v.ordinal, format('check constraint %s refuses status %L', c.conname, v.status)
FROM pg_constraint AS c
CROSS JOIN (VALUES (1, 'Available'), (2, 'Booked'), (3, 'Expired'), (4, 'Archived'))
    AS v (ordinal, status)
WHERE c.conrelid = to_regclass('availability_slots') AND c.contype = 'c'
  AND c.conkey = ARRAY[(
      SELECT attnum FROM pg_attribute WHERE attrelid = c.conrelid AND attname = 'status'
  )]
  -- A CHECK passes on true or NULL; a NULL result leaves no element in the XML.
  AND NOT coalesce((xpath('/row/passes/text()', query_to_xml(
      format('SELECT (%s) AS passes FROM (SELECT %L::text AS status) AS availability_slots',
             pg_get_expr(c.conbin, c.conrelid), v.status),
      false, true, ''
  )))[1]::text::boolean, true)

-- fragment: status_column_is_text
-- Whether the status values can be read at all (status_value_rows names the
-- column, and compares it with text).
SELECT EXISTS (
    SELECT FROM pg_attribute
    WHERE attrelid = to_regclass('availability_slots') AND attname = 'status'
      AND NOT attisdropped AND atttypid = 'text'::regtype
)

-- name: status_column_is_text
-- include: status_column_is_text
;

-- name: contract_mismatches
-- How availability_slots differs from the contract, one line each, in
-- contract order; no row when it fits.
SELECT problem FROM (
    -- include: contract_mismatch_rows
) AS found
ORDER BY ordinal;

-- name: status_value_mismatches
-- The status values that break the contract (status_value_rows), one line each.
SELECT problem FROM (
    -- include: status_value_rows
) AS found
ORDER BY ordinal;

-- name: worker_tables_missing
-- The worker's own tables that do not exist (the migrations create them).
SELECT name FROM (VALUES
    ('slot_expiration_failures'), ('slot_expiration_alembic_version'),
    ('slot_expiration_cycles')
) AS own (name)
WHERE to_regclass(name) IS NULL
ORDER BY name;
