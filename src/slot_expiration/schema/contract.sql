-- The contract between the worker and the database: the calendar's table as
-- the worker relies on it, the shape of the worker's own tables, what each of
-- its roles needs, which availability_slots a session finds, and whether an
-- existing one can be adopted. Run through schema/contract.py (each cycle's
-- problems, `status`'s schema part), schema/location.py (the table meant),
-- schema/grants.py (what a role needs) and migrate (adoption, repair; and the
-- guards of its offline scripts). Every fragment is this file's own.
--
-- availability_slots is always the one the session's search_path finds
-- (to_regclass): the worker never names a schema itself.

-- fragment: slot_table_contract
-- The table contract of availability_slots (the spec), as what the worker
-- relies on rather than one spelling of it: each column's kind of type, judged
-- on the base type beneath any domain, all NOT NULL. `written`: an expiry sets
-- it (status, updated_at, version), so the database must let the worker write it.
SELECT * FROM (VALUES
    (1, 'id', 'uuid', 'uuid', false),
    (2, 'tenant_id', 'uuid', 'uuid', false),
    (3, 'consultant_id', 'uuid', 'uuid', false),
    (4, 'start_at', 'timestamptz', 'timestamp with time zone', false),
    (5, 'end_at', 'timestamptz', 'timestamp with time zone', false),
    (6, 'status', 'status', 'text, varchar, an enum, or a domain over text', true),
    (7, 'version', 'integer', 'an integer type (smallint, integer or bigint)', true),
    (8, 'created_at', 'timestamptz', 'timestamp with time zone', false),
    (9, 'updated_at', 'timestamptz', 'timestamp with time zone', true)
) AS contract (ordinal, column_name, kind, expected, written)

-- fragment: slot_table_columns
-- Each column of availability_slots as the contract judges it: its type as
-- written, the base type beneath any domains (and whether that is an enum),
-- whether it refuses NULL (itself, or one of its domains), whether it is an
-- identity column (ALWAYS: the database writes it; BY DEFAULT: a sequence
-- fills it) or a generated one, and a varchar's length limit (NULL: none).
SELECT a.attname::text AS column_name,
       format_type(a.atttypid, a.atttypmod) AS type_name,
       base.oid AS base_type,
       base.typtype AS base_kind,
       a.attnotnull OR base.domain_not_null AS not_null,
       CASE a.attidentity WHEN 'a' THEN 'ALWAYS' WHEN 'd' THEN 'BY DEFAULT' END AS identity,
       a.attgenerated <> '' AS generated,
       CASE WHEN base.oid = 'varchar'::regtype
            THEN nullif(greatest(coalesce(nullif(a.atttypmod, -1), base.typmod), -1), -1) - 4
       END AS max_length
FROM pg_attribute AS a
CROSS JOIN LATERAL (
    WITH RECURSIVE chain (oid, typmod, domain_not_null, depth) AS (
        SELECT a.atttypid, -1, false, 0
        UNION ALL
        SELECT t.typbasetype, CASE WHEN chain.typmod >= 0 THEN chain.typmod ELSE t.typtypmod END,
               chain.domain_not_null OR t.typnotnull, chain.depth + 1
        FROM chain JOIN pg_type AS t ON t.oid = chain.oid
        WHERE t.typtype = 'd'
    )
    SELECT chain.oid, t.typtype, chain.typmod, chain.domain_not_null
    FROM chain JOIN pg_type AS t ON t.oid = chain.oid
    ORDER BY chain.depth DESC
    LIMIT 1
) AS base
WHERE a.attrelid = to_regclass('availability_slots') AND a.attnum > 0 AND NOT a.attisdropped

-- fragment: worker_table_shape
-- The worker's own tables at the newest revision, column by column, as the
-- migrations create them (format_type's spelling); tests/integration holds it
-- equal to what they create. The start check and `status` compare the
-- database with it; `migrate` repairs what differs.
SELECT * FROM (VALUES
    (1, 'slot_expiration_failures', 'slot_id', 'uuid', true),
    (2, 'slot_expiration_failures', 'attempts', 'integer', true),
    (3, 'slot_expiration_failures', 'first_failed_at', 'timestamp with time zone', true),
    (4, 'slot_expiration_failures', 'last_failed_at', 'timestamp with time zone', true),
    (5, 'slot_expiration_failures', 'next_attempt_at', 'timestamp with time zone', true),
    (6, 'slot_expiration_failures', 'sqlstate', 'text', true),
    (7, 'slot_expiration_failures', 'message', 'text', true),
    (8, 'slot_expiration_failures', 'parked_at', 'timestamp with time zone', false),
    (9, 'slot_expiration_failures', 'ended_at', 'timestamp with time zone', false),
    (10, 'slot_expiration_failures', 'ended_status', 'text', false),
    (11, 'slot_expiration_cycles', 'run_id', 'uuid', true),
    (12, 'slot_expiration_cycles', 'instance', 'text', true),
    (13, 'slot_expiration_cycles', 'as_of', 'timestamp with time zone', true),
    (14, 'slot_expiration_cycles', 'started_at', 'timestamp with time zone', true),
    (15, 'slot_expiration_cycles', 'ended_at', 'timestamp with time zone', true),
    (16, 'slot_expiration_cycles', 'outcome', 'text', true),
    (17, 'slot_expiration_cycles', 'stop_reason', 'text', false),
    (18, 'slot_expiration_cycles', 'expired_count', 'integer', true),
    (19, 'slot_expiration_cycles', 'skipped_locked_count', 'integer', true),
    (20, 'slot_expiration_cycles', 'failed_count', 'integer', true),
    (21, 'slot_expiration_cycles', 'batches', 'integer', true),
    (22, 'slot_expiration_cycles', 'duration_ms', 'double precision', true),
    (23, 'slot_expiration_cycles', 'backlog', 'integer', false),
    (24, 'slot_expiration_cycles', 'clock_skew_seconds', 'double precision', false),
    (25, 'slot_expiration_cycles', 'error_type', 'text', false),
    (26, 'slot_expiration_cycles', 'sqlstate', 'text', false),
    (27, 'slot_expiration_cycles', 'error', 'text', false),
    (28, 'slot_expiration_alembic_version', 'version_num', 'character varying(32)', true),
    (29, 'slot_expiration_alembic_version', 'slot_table_schema', 'text', false),
    (30, 'slot_expiration_pauses', 'pause_id', 'uuid', true),
    (31, 'slot_expiration_pauses', 'paused_at', 'timestamp with time zone', true),
    (32, 'slot_expiration_pauses', 'paused_by', 'text', true),
    (33, 'slot_expiration_pauses', 'paused_until', 'timestamp with time zone', false),
    (34, 'slot_expiration_pauses', 'reason', 'text', true),
    (35, 'slot_expiration_pauses', 'resumed_at', 'timestamp with time zone', false),
    (36, 'slot_expiration_pauses', 'resumed_by', 'text', false),
    (37, 'slot_expiration_cycles', 'throttled_seconds', 'double precision', true),
    (38, 'slot_expiration_cycles', 'throttled_by', 'text', false)
) AS shape (ordinal, relation, column_name, data_type, not_null)

-- fragment: worker_shape_mismatch_rows
-- How the worker's own tables that exist differ from their shape, as
-- (ordinal, relation, problem): a column missing, of another type, or NULL
-- where it must not be (or refusing NULL where the worker leaves it out). A
-- missing table is worker_tables_missing's.
SELECT s.ordinal, s.relation, CASE
    WHEN a.attname IS NULL
        THEN format('column %s.%s does not exist', s.relation, s.column_name)
    WHEN format_type(a.atttypid, a.atttypmod) <> s.data_type
        THEN format('column %s.%s is %s, not %s', s.relation, s.column_name,
                    format_type(a.atttypid, a.atttypmod), s.data_type)
    WHEN a.attnotnull <> s.not_null
        THEN format('column %s.%s is %s', s.relation, s.column_name,
                    CASE WHEN a.attnotnull THEN 'NOT NULL, not nullable'
                         ELSE 'nullable, not NOT NULL' END)
END AS problem
FROM (
    -- include: worker_table_shape
) AS s
LEFT JOIN pg_attribute AS a
    ON a.attrelid = to_regclass(s.relation) AND a.attname = s.column_name AND NOT a.attisdropped
WHERE to_regclass(s.relation) IS NOT NULL
  AND (a.attname IS NULL OR format_type(a.atttypid, a.atttypmod) <> s.data_type
       OR a.attnotnull <> s.not_null)

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
    (15, 'slot_expiration_cycles', NULL, 'DELETE'),
    -- The pause in force, read by each cycle before its first batch: read only (the
    -- operator's role pauses and resumes, never the worker's).
    (16, 'slot_expiration_pauses', NULL, 'SELECT')
) AS requirement (ordinal, relation, column_name, privilege)

-- fragment: reader_requirements
-- What the read-only views need (`status`, `quarantine list`, `ui`, /readyz):
-- the tables they read. Sessions of other roles show their state in `status`
-- only with pg_read_all_stats, which only a superuser can grant.
SELECT * FROM (VALUES
    (1, 'availability_slots', NULL, 'SELECT'),
    (2, 'slot_expiration_failures', NULL, 'SELECT'),
    (3, 'slot_expiration_alembic_version', NULL, 'SELECT'),
    (4, 'slot_expiration_cycles', NULL, 'SELECT'),
    (5, 'slot_expiration_pauses', NULL, 'SELECT')
) AS requirement (ordinal, relation, column_name, privilege)

-- fragment: worker_requirement_problems
-- Each requirement the current role does not meet, one line each (a missing
-- table once), in the order above; then how the worker's own tables differ
-- from their shape (a column a cycle writes, renamed or dropped, would fail
-- it later and less clearly). Each with its kind, which says who fixes it
-- (db.errors.Remedy): `migrate`, `calendar` (the calendar's own
-- table changed) or `grant`.
SELECT min(p.ordinal) AS ordinal, p.problem, min(p.kind) AS kind
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
    END AS problem, CASE
        WHEN to_regclass(r.relation) IS NULL THEN 'migrate'
        WHEN r.column_name IS NOT NULL AND a.attname IS NULL
            THEN CASE WHEN r.relation = 'availability_slots' THEN 'calendar' ELSE 'migrate' END
        ELSE 'grant'
    END AS kind
    FROM (
        -- include: worker_requirements
    ) AS r
    LEFT JOIN pg_attribute AS a
        ON a.attrelid = to_regclass(r.relation) AND a.attname = r.column_name
       AND NOT a.attisdropped
    UNION ALL
    SELECT 50 + w.ordinal, w.problem, 'migrate' FROM (
        -- include: worker_shape_mismatch_rows
    ) AS w
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
-- A relation that is not a table (a view, say) is said once, column lines
-- would only mislead.
SELECT 0 AS ordinal, 'table availability_slots does not exist' AS problem
WHERE to_regclass('availability_slots') IS NULL
UNION ALL
SELECT 1, format('availability_slots is %s, not a table: the worker locks, updates and indexes '
                 'the table itself', CASE c.relkind WHEN 'v' THEN 'a view'
                                                    WHEN 'm' THEN 'a materialized view'
                                                    WHEN 'f' THEN 'a foreign table'
                                                    ELSE format('a relation of kind %L', c.relkind)
                                     END)
FROM pg_class AS c
WHERE c.oid = to_regclass('availability_slots') AND c.relkind NOT IN ('r', 'p')
UNION ALL
SELECT columns.ordinal + 1, columns.problem FROM (
    SELECT c.ordinal, CASE
        WHEN col.column_name IS NULL THEN format('column %s is missing', c.column_name)
        WHEN NOT CASE c.kind
                WHEN 'uuid' THEN col.base_type = 'uuid'::regtype
                WHEN 'timestamptz' THEN col.base_type = 'timestamptz'::regtype
                WHEN 'integer' THEN col.base_type IN ('int2'::regtype, 'int4'::regtype,
                                                      'int8'::regtype)
                WHEN 'status' THEN col.base_type IN ('text'::regtype, 'varchar'::regtype)
                                   OR col.base_kind = 'e'
            END
            THEN format('column %s is %s, not %s', c.column_name, col.type_name, c.expected)
        WHEN col.max_length < length('Available')
            THEN format('column %s is %s: too short for ''Available''', c.column_name,
                        col.type_name)
        WHEN NOT col.not_null THEN format('column %s is nullable, not NOT NULL', c.column_name)
        WHEN c.written AND col.identity = 'ALWAYS'
            THEN format('column %s is GENERATED ALWAYS AS IDENTITY: the worker cannot set it, '
                        'and an expiry does', c.column_name)
        -- The contract: a slot's version counts its edits, never a sequence's draws.
        WHEN c.written AND col.identity IS NOT NULL
            THEN format('column %s is GENERATED BY DEFAULT AS IDENTITY: a sequence numbers '
                        'new slots there, while a version counts a slot''s edits', c.column_name)
        WHEN c.written AND col.generated
            THEN format('column %s is a generated column: the worker cannot set it, and an '
                        'expiry does', c.column_name)
    END AS problem
    FROM (
        -- include: slot_table_contract
    ) AS c
    LEFT JOIN (
        -- include: slot_table_columns
    ) AS col ON col.column_name = c.column_name
    WHERE EXISTS (
        SELECT FROM pg_class
        WHERE oid = to_regclass('availability_slots') AND relkind IN ('r', 'p')
    )
) AS columns
WHERE columns.problem IS NOT NULL
UNION ALL
-- An enum status holds exactly the four values (its labels are the catalog's).
SELECT 13, format('column status is the enum %s, which %s', format_type(e.enumtypid, NULL),
                  concat_ws(' and ',
                      'has no value ' || nullif(array_to_string(ARRAY(
                          SELECT quote_literal(v) FROM unnest(e.wanted) AS v
                          WHERE v <> ALL (e.labels)), ', '), ''),
                      'also holds ' || nullif(array_to_string(ARRAY(
                          SELECT quote_literal(v) FROM unnest(e.labels) AS v
                          WHERE v <> ALL (e.wanted)), ', '), '')
                  ))
FROM (
    SELECT col.base_type AS enumtypid,
           ARRAY(SELECT enumlabel::text FROM pg_enum WHERE enumtypid = col.base_type
                 ORDER BY enumsortorder) AS labels,
           ARRAY['Available', 'Booked', 'Expired', 'Archived'] AS wanted
    FROM (
        -- include: slot_table_columns
    ) AS col
    WHERE col.column_name = 'status' AND col.base_kind = 'e'
) AS e
WHERE NOT (e.labels @> e.wanted AND e.wanted @> e.labels)
UNION ALL
-- The primary key, and the partitioning the worker's index can follow: none,
-- by range on start_at (the primary key then holds start_at too: `id` stays
-- unique in practice, and the worker and its quarantine find a slot by id),
-- or by hash on id.
SELECT 11, format('availability_slots is partitioned by %s: the worker adopts a table '
                  'partitioned by range on start_at or by hash on id',
                  pg_get_partkeydef(p.partrelid))
FROM pg_partitioned_table AS p
WHERE p.partrelid = to_regclass('availability_slots')
  AND NOT (
      -- include: slot_table_partitioned_as_adopted
  )
UNION ALL
SELECT 12, CASE WHEN key.range_on_start_at
                THEN 'availability_slots is partitioned by range on start_at: its primary key '
                     'must be (id, start_at)'
                ELSE 'column id is not the primary key' END
FROM (
    SELECT coalesce((
        -- include: slot_table_partitioned_as_adopted
    ) AND p.partstrat = 'r', false) AS range_on_start_at,
           CASE WHEN coalesce(p.partstrat = 'r', false) THEN ARRAY['id', 'start_at']
                ELSE ARRAY['id'] END AS wanted
    FROM pg_class AS c
    LEFT JOIN pg_partitioned_table AS p ON p.partrelid = c.oid
    WHERE c.oid = to_regclass('availability_slots') AND c.relkind IN ('r', 'p')
      AND EXISTS (
          SELECT FROM pg_attribute
          WHERE attrelid = c.oid AND attname = 'id' AND NOT attisdropped
      )
      -- Partitioned otherwise: said above, the key follows from the partitioning.
      AND (p.partrelid IS NULL OR (
          -- include: slot_table_partitioned_as_adopted
      ))
) AS key
WHERE NOT EXISTS (
    SELECT FROM pg_index AS i
    WHERE i.indrelid = to_regclass('availability_slots') AND i.indisprimary
      AND ARRAY(
          SELECT a.attname::text
          FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k (attnum, n)
          JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
          WHERE k.n <= i.indnkeyatts
          ORDER BY a.attname
      ) = key.wanted
)

-- fragment: slot_table_partitioned_as_adopted
-- Whether availability_slots (its pg_partitioned_table row, `p`) is
-- partitioned by range on start_at alone or by hash on id alone.
SELECT p.partnatts = 1 AND p.partexprs IS NULL AND (
    (p.partstrat = 'r' AND p.partattrs[0] = (
        SELECT attnum FROM pg_attribute WHERE attrelid = p.partrelid AND attname = 'start_at'))
    OR (p.partstrat = 'h' AND p.partattrs[0] = (
        SELECT attnum FROM pg_attribute WHERE attrelid = p.partrelid AND attname = 'id'))
)

-- fragment: status_value_rows
-- The contract's "status with exactly the values Available, Booked, Expired,
-- Archived", as (ordinal, problem) rows: values the rows hold beyond the four
-- (a full read of the table, which blocks no write), and the checks that
-- refuse one of the four (status_check_rows). Only where the values read as
-- text (status_values_readable); an enum's labels are contract_mismatch_rows'.
SELECT 20 AS ordinal,
       format('column status holds values outside the contract: %s',
              string_agg(quote_literal(found.status), ', ' ORDER BY found.status)) AS problem
FROM (
    SELECT DISTINCT status::text AS status FROM availability_slots
    WHERE status::text NOT IN ('Available', 'Booked', 'Expired', 'Archived')
) AS found
HAVING count(*) > 0
UNION ALL
    -- include: status_check_rows

-- fragment: status_check_rows
-- The checks that refuse one of the four statuses, as (ordinal, problem) rows:
-- the table's on status alone, and those of the domains the column's type is
-- made of. The catalog only, and each check evaluated by the server on a
-- constant: cheap, so each cycle's preflight asks too (a check that refuses
-- 'Expired', added after adoption, would make every due row poison). Each
-- check runs its own expression, from the catalog, through query_to_xml over a
-- one-row relation named like the table (a domain's check names its value
-- VALUE, which reads a column `value`).
SELECT 20 + v.ordinal AS ordinal,
       format('check constraint %s refuses status %L', c.conname, v.status) AS problem
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
UNION ALL
SELECT 24 + v.ordinal, format('the domain %s of column status refuses %L (check constraint %s)',
                              format_type(c.contypid, NULL), v.status, c.conname)
FROM pg_constraint AS c
CROSS JOIN (VALUES (1, 'Available'), (2, 'Booked'), (3, 'Expired'), (4, 'Archived'))
    AS v (ordinal, status)
WHERE c.contype = 'c' AND c.contypid IN (
    WITH RECURSIVE chain (oid) AS (
        SELECT atttypid FROM pg_attribute
        WHERE attrelid = to_regclass('availability_slots') AND attname = 'status'
          AND NOT attisdropped
        UNION ALL
        SELECT t.typbasetype FROM chain JOIN pg_type AS t ON t.oid = chain.oid
        WHERE t.typtype = 'd'
    )
    SELECT oid FROM chain
)
  AND NOT coalesce((xpath('/row/passes/text()', query_to_xml(
      format('SELECT (%s) AS passes FROM (SELECT %L::text AS value) AS domain_value',
             pg_get_expr(c.conbin, 0), v.status),
      false, true, ''
  )))[1]::text::boolean, true)

-- fragment: status_values_readable
-- Whether the status values read as text (status_value_rows compares them as
-- text): text, varchar, or a domain over either; and whether this role may
-- read them (a migrate that may not is told whose table it is instead:
-- adoption_privilege_rows).
SELECT has_table_privilege(to_regclass('availability_slots'), 'SELECT') AND EXISTS (
    SELECT FROM (
        -- include: slot_table_columns
    ) AS col
    WHERE col.column_name = 'status' AND col.base_type IN ('text'::regtype, 'varchar'::regtype)
) AND EXISTS (
    SELECT FROM pg_class
    WHERE oid = to_regclass('availability_slots') AND relkind IN ('r', 'p')
)

-- name: status_values_readable
-- include: status_values_readable
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
    ('slot_expiration_cycles'), ('slot_expiration_pauses')
) AS own (name)
WHERE to_regclass(name) IS NULL
ORDER BY name;

-- name: worker_shape_mismatches
-- How the worker's own tables differ from their shape (worker_shape_mismatch_rows),
-- with how many rows each such table holds (what recreating it would lose).
SELECT w.relation, w.problem,
       (xpath('/row/n/text()', query_to_xml(
           format('SELECT count(*) AS n FROM %I', w.relation), false, true, ''
       )))[1]::text::bigint AS rows
FROM (
    -- include: worker_shape_mismatch_rows
) AS w
ORDER BY w.ordinal;

-- fragment: slot_table_schemas_elsewhere
-- When the search_path finds no availability_slots: the other schemas of the
-- database that hold one (the calendar's table lives there, and nothing may
-- create a second one); NULL when the search_path finds it, or none exists.
SELECT array_agg(n.nspname::text ORDER BY n.nspname)
FROM pg_class AS c
JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.relname = 'availability_slots' AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND NOT pg_is_other_temp_schema(n.oid)
  AND to_regclass('availability_slots') IS NULL

-- name: slot_table_elsewhere
-- The schemas holding the availability_slots the search_path misses (see
-- slot_table_schemas_elsewhere), the search_path and the role, to say how to
-- point at it. NULL schemas: nothing is elsewhere.
SELECT (
    -- include: slot_table_schemas_elsewhere
) AS schemas, current_setting('search_path') AS search_path, current_user::text AS role;

-- name: slot_table_identity
-- Which availability_slots this session's statements name, and which one the
-- worker adopted (schema/location.py judges the two): the schema the
-- search_path finds it in (NULL: none) and whether the search_path names that
-- schema itself (a temporary table of the session's own shadows every other);
-- the schema the search_path finds the worker's version table in, and whether
-- that table records the adopted table's schema (migration 0008) where this
-- role may read it (else the preflight names the missing grant); where the
-- search_path finds none, the schemas that hold one; the other
-- schemas holding a version table of the worker (an adopted calendar the
-- search_path misses); the search_path and the role, to say how to point.
SELECT n.nspname::text AS found_in,
       coalesce(n.nspname = ANY (current_schemas(false)), true) AS on_search_path,
       coalesce((
           -- include: slot_table_schemas_elsewhere
       ), '{}') AS schemas_elsewhere,
       w.nspname::text AS worker_schema,
       EXISTS (
           SELECT FROM pg_attribute
           WHERE attrelid = wc.oid AND attname = 'slot_table_schema' AND NOT attisdropped
       ) AND has_table_privilege(wc.oid, 'SELECT') AS records_schema,
       ARRAY(
           SELECT o.nspname::text
           FROM pg_class AS oc
           JOIN pg_namespace AS o ON o.oid = oc.relnamespace
           WHERE oc.relname = 'slot_expiration_alembic_version' AND oc.relkind = 'r'
             AND oc.oid IS DISTINCT FROM wc.oid AND NOT pg_is_other_temp_schema(o.oid)
           ORDER BY o.nspname
       ) AS worker_schemas_elsewhere,
       current_setting('search_path') AS search_path,
       current_user::text AS role
FROM (SELECT) AS one
LEFT JOIN pg_class AS c ON c.oid = to_regclass('availability_slots')
LEFT JOIN pg_namespace AS n ON n.oid = c.relnamespace
LEFT JOIN pg_class AS wc ON wc.oid = to_regclass('slot_expiration_alembic_version')
LEFT JOIN pg_namespace AS w ON w.oid = wc.relnamespace;

-- name: slot_table_recorded
-- The schema of the availability_slots migrate adopted (or created), as
-- recorded on the worker's version table; NULL before migration 0008 ran.
SELECT slot_table_schema FROM slot_expiration_alembic_version;

-- fragment: row_security_policies
-- The row-level security policies on availability_slots that apply to this
-- role (directly, through a membership, or to PUBLIC), each with what it does:
-- a permissive policy USING (true) for reading and one for updating (FOR ALL
-- serves both; an UPDATE's WITH CHECK true or none) show the worker every row;
-- a restrictive policy that holds anything back hides rows whatever they show.
SELECT pol.polname::text AS name,
       pol.polpermissive AS permissive,
       pol.polcmd IN ('r', '*') AS reads,
       pol.polcmd IN ('w', '*') AS updates,
       coalesce(pg_get_expr(pol.polqual, pol.polrelid) = 'true', false) AS shows_all,
       coalesce(pg_get_expr(pol.polwithcheck, pol.polrelid) = 'true', true) AS checks_nothing
FROM pg_policy AS pol
WHERE pol.polrelid = to_regclass('availability_slots')
  AND (0 = ANY (pol.polroles) OR EXISTS (
      SELECT FROM unnest(pol.polroles) AS granted (role)
      WHERE pg_has_role(current_user, granted.role, 'USAGE')
  ))

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

-- name: grant_requirements
-- The privileges to grant: the worker's, or (read_only) the read-only views'.
SELECT relation, column_name, privilege FROM (
    SELECT r.ordinal, r.relation, r.column_name, r.privilege FROM (
        -- include: worker_requirements
    ) AS r
    WHERE NOT %(read_only)s AND r.privilege IS NOT NULL
    UNION ALL
    SELECT r.ordinal, r.relation, r.column_name, r.privilege FROM (
        -- include: reader_requirements
    ) AS r
    WHERE %(read_only)s
) AS wanted
ORDER BY ordinal;

-- name: worker_problems
-- What the current role lacks to run a cycle, one line each (worker_requirements),
-- and how availability_slots now differs from the table contract (the catalog
-- only: a column retyped after adoption, a check added that refuses 'Expired':
-- a cycle never runs on a table whose types its statements rely on changed),
-- each with its kind, which says who fixes it (expiry.store.Problem). The
-- second statement of every cycle, after its clock (expiry.sql, cycle_clock).
-- Measured on an empty calendar: 2.0 ms (median of 300) against 0.6 ms without
-- the contract and the policies, once per cycle (a drain runs it once too).
SELECT current_user::text AS role,
       coalesce(array_agg(r.problem ORDER BY r.ordinal), '{}') AS problems,
       coalesce(array_agg(r.kind ORDER BY r.ordinal), '{}') AS problem_kinds
FROM (
    -- include: worker_requirement_problems
    UNION ALL
    SELECT 60 + contract.ordinal, contract.problem, 'calendar' FROM (
        -- include: contract_mismatch_rows
    ) AS contract
    WHERE contract.ordinal > 0  -- a missing table is the requirements' first line
    UNION ALL
    SELECT 60 + checks.ordinal, checks.problem, 'calendar' FROM (
        -- include: status_check_rows
    ) AS checks
    WHERE (
        -- include: status_values_readable
    )
    UNION ALL
    -- The worker is a cross-tenant system job: a tenant policy would hide rows from it
    -- and it would report nothing due.
    SELECT 99, 'row-level security on availability_slots hides rows from this role: no '
               'permissive policy shows it every row to read and update',
           'row_security'
    WHERE to_regclass('availability_slots') IS NOT NULL
      AND row_security_active(to_regclass('availability_slots'))
      AND NOT (
          SELECT coalesce(
              bool_or(p.permissive AND p.reads AND p.shows_all)
              AND bool_or(p.permissive AND p.updates AND p.shows_all AND p.checks_nothing),
              false
          )
          FROM (
              -- include: row_security_policies
          ) AS p
      )
    UNION ALL
    -- A restrictive policy holds rows back whatever the permissive ones show.
    SELECT 100, format('the restrictive row-level security %s %s on availability_slots '
                       'hides rows from this role',
                       CASE WHEN count(*) > 1 THEN 'policies' ELSE 'policy' END,
                       string_agg(quote_ident(p.name), ', ' ORDER BY p.name)),
           'restrictive_policy'
    FROM (
        -- include: row_security_policies
    ) AS p
    WHERE row_security_active(to_regclass('availability_slots'))
      AND NOT p.permissive AND (p.reads OR p.updates) AND NOT (p.shows_all AND p.checks_nothing)
    HAVING count(*) > 0
) AS r;

