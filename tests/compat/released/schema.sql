-- The schema as the worker needs it: the calendar's table contract, and what a
-- cycle needs of the role it runs as. Run by slot_store (each cycle's
-- preflight) and status_store (the schema section of `status`).

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
    (12, 'slot_expiration_alembic_version', NULL, 'SELECT')
) AS requirement (ordinal, relation, column_name, privilege)

-- fragment: reader_requirements
-- What the read-only views need (`status`, `quarantine list`, /readyz): the
-- tables they read. Sessions of other roles show their state in `status`
-- only with pg_read_all_stats, which only a superuser can grant.
SELECT * FROM (VALUES
    (1, 'availability_slots', NULL, 'SELECT'),
    (2, 'slot_expiration_failures', NULL, 'SELECT'),
    (3, 'slot_expiration_alembic_version', NULL, 'SELECT')
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

-- name: contract_mismatches
-- How availability_slots differs from the contract, one line each, in
-- contract order; no row when it fits (extra columns are the calendar's own).
SELECT problem FROM (
    SELECT 0 AS ordinal, 'table availability_slots does not exist' AS problem
    WHERE to_regclass('availability_slots') IS NULL
    UNION ALL
    SELECT c.ordinal, CASE
        WHEN a.attname IS NULL THEN format('column %s is missing', c.column_name)
        WHEN format_type(a.atttypid, a.atttypmod) <> c.data_type
            THEN format('column %s is %s, not %s', c.column_name,
                        format_type(a.atttypid, a.atttypmod), c.data_type)
        WHEN NOT a.attnotnull THEN format('column %s is nullable, not NOT NULL', c.column_name)
    END
    FROM (
        -- include: slot_table_contract
    ) AS c
    LEFT JOIN pg_attribute AS a
        ON a.attrelid = to_regclass('availability_slots') AND a.attname = c.column_name
       AND NOT a.attisdropped
    WHERE to_regclass('availability_slots') IS NOT NULL
) AS found
WHERE problem IS NOT NULL
ORDER BY ordinal;

-- name: worker_tables_missing
-- The worker's own tables that do not exist (the migrations create them).
SELECT name FROM (VALUES
    ('slot_expiration_failures'), ('slot_expiration_alembic_version')
) AS own (name)
WHERE to_regclass(name) IS NULL
ORDER BY name;
