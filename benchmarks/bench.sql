-- The statements of the benchmark (`./scripts/bench`), by name: the bare batch statement
-- the worker is measured against, the bulk load of a realistic table, and what
-- the benchmark needs to set up, reset and inspect its own schema. Only
-- slot_expiration.bench.store runs them. The benchmark works in a schema
-- of its own (slot_expiration_bench, first on its connections' search path),
-- never in the calendar's tables.

-- name: bench_bare_batch
-- The floor: the least SQL that does one batch's job. Lock the oldest due
-- Available rows, passing over rows another transaction holds, and expire
-- them. No quarantine, no skipped-row count, nothing returned but the count.
WITH picked AS (
    SELECT id FROM availability_slots
    WHERE status = 'Available' AND start_at <= %(as_of)s
    ORDER BY start_at
    LIMIT %(batch_size)s
    FOR UPDATE SKIP LOCKED
)
UPDATE availability_slots AS s
SET status = 'Expired', updated_at = %(as_of)s, version = s.version + 1
FROM picked
WHERE s.id = picked.id;

-- fragment: expire_all_due
-- The single statement: every due Available slot expired at once, in one
-- transaction, on the database's clock (no batches, no quarantine, no skipped
-- rows): what a pg_cron job runs. Section g's peer.
UPDATE availability_slots
SET status = 'Expired', updated_at = now(), version = version + 1
WHERE status = 'Available' AND start_at <= now();

-- name: bench_expire_all_due
-- The single statement, sent by the benchmark (where pg_cron is not there).
-- include: expire_all_due

-- name: bench_cron_command
-- The single statement as section g's pg_cron job runs it, in the benchmark's
-- schema.
SET search_path TO slot_expiration_bench;
-- include: expire_all_due

-- name: bench_create_cron
-- pg_cron in the embedded server's database (cron.database_name): its
-- scheduler starts the jobs of this database.
CREATE EXTENSION IF NOT EXISTS pg_cron;

-- name: bench_cron_available
-- Whether pg_cron can run a job here: installed in this database, and its
-- scheduler serving this database.
SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_cron')
    AND current_setting('cron.database_name', true) = current_database();

-- name: bench_cron_schedule
-- A job at every minute's start; the benchmark unschedules it after its first
-- run.
SELECT cron.schedule(%(name)s, '* * * * *', %(command)s);

-- name: bench_cron_unschedule
SELECT cron.unschedule(%(job)s);

-- name: bench_cron_run
-- The job's first run as pg_cron recorded it: its status, the command's
-- result ("UPDATE n"), and when it started and ended (pg_cron's own clock).
-- pg_cron records each statement's result as it comes: for a moment the run
-- reads 'succeeded' with the SET's 'SET', before the UPDATE's own (seen once);
-- a success counts only once the UPDATE's result is there.
SELECT status, return_message, start_time, end_time
FROM cron.job_run_details
WHERE jobid = %(job)s
  AND (status = 'failed' OR (status = 'succeeded' AND return_message LIKE 'UPDATE %%'))
ORDER BY runid
LIMIT 1;

-- name: bench_create_schema
CREATE SCHEMA slot_expiration_bench;

-- name: bench_drop_schema
DROP SCHEMA slot_expiration_bench CASCADE;

-- name: bench_schema_exists
SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = 'slot_expiration_bench');

-- name: bench_current_schema
-- Where unqualified names resolve: the benchmark refuses to load anywhere else.
SELECT current_schema();

-- name: bench_load_slots
-- A realistic table in one set-based statement. Three kinds of rows:
-- the backlog (`due` Available slots whose start has passed, the most recent
-- past), the history before it (Expired, Booked and Archived slots) and the
-- future (a fifth of it Booked). Consultants publish on a grid of `step` (30
-- minutes, or wider to spread a table over months), one slot per consultant
-- and step, so thousands of slots share each start, as at an hour boundary. The rows are written in a scattered order (row number p
-- becomes p * stride mod total, a permutation since stride and total are
-- coprime), so the slots of one start lie spread over the heap as in a table
-- filled over months.
INSERT INTO availability_slots
    (id, tenant_id, consultant_id, start_at, end_at, status, version, created_at, updated_at)
SELECT
    gen_random_uuid(),
    md5('tenant-' || mod(c.consultant, %(tenants)s))::uuid,
    md5('consultant-' || c.consultant)::uuid,
    d.start_at,
    d.start_at + interval '30 minutes',
    d.status,
    CASE WHEN d.status = 'Available' THEN 1 ELSE 2 END,
    least(d.start_at, %(as_of)s) - interval '14 days',
    least(d.start_at, %(as_of)s) - interval '14 days'
        + CASE WHEN d.status = 'Available' THEN interval '0' ELSE interval '1 day' END
FROM generate_series(0::bigint, %(total)s::bigint - 1) AS p
CROSS JOIN LATERAL (SELECT mod(p * %(stride)s::bigint, %(total)s::bigint) AS j) AS a
CROSS JOIN LATERAL (
    SELECT
        CASE
            WHEN a.j < %(due)s THEN 0
            WHEN a.j < %(due)s + %(history)s THEN 1
            ELSE 2
        END AS kind,
        CASE
            WHEN a.j < %(due)s THEN a.j
            WHEN a.j < %(due)s + %(history)s THEN a.j - %(due)s
            ELSE a.j - %(due)s - %(history)s
        END AS i
) AS b
CROSS JOIN LATERAL (
    SELECT mod(b.i, %(consultants)s) AS consultant, b.i / %(consultants)s AS k
) AS c
CROSS JOIN LATERAL (
    SELECT
        CASE b.kind
            WHEN 0 THEN %(as_of)s - (c.k + 1) * %(step)s::interval
            WHEN 1 THEN %(as_of)s
                - (c.k + 1 + (%(due)s::bigint + %(consultants)s - 1) / %(consultants)s)
                  * %(step)s::interval
            ELSE %(as_of)s + interval '1 day' + c.k * %(step)s::interval
        END AS start_at,
        CASE
            WHEN b.kind = 0 THEN 'Available'
            WHEN b.kind = 1 AND mod(c.k * 7 + c.consultant, 20) < 12 THEN 'Expired'
            WHEN b.kind = 1 AND mod(c.k * 7 + c.consultant, 20) < 17 THEN 'Booked'
            WHEN b.kind = 1 THEN 'Archived'
            WHEN mod(c.k + c.consultant, 5) = 0 THEN 'Booked'
            ELSE 'Available'
        END AS status
) AS d;

-- name: bench_empty_slots
TRUNCATE availability_slots CASCADE;

-- name: bench_vacuum_analyze
VACUUM (ANALYZE) availability_slots;

-- name: bench_analyze
ANALYZE availability_slots;

-- fragment: slot_tables
-- The tables that hold the slot table's rows: itself, or (partitioned) its
-- leaf partitions.
SELECT to_regclass('availability_slots') AS relid
WHERE NOT EXISTS (SELECT FROM pg_partition_tree('availability_slots'))
UNION ALL
SELECT relid FROM pg_partition_tree('availability_slots') WHERE isleaf

-- name: bench_autovacuum_off
-- While a phase measures dead tuples, autovacuum must not remove them under it
-- (each table that holds rows: on a partitioned table, each partition).
DO $$
DECLARE leaf regclass;
BEGIN
    FOR leaf IN SELECT relid FROM (
        -- include: slot_tables
    ) AS t LOOP
        EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = false)', leaf);
    END LOOP;
END $$;

-- name: bench_autovacuum_default
DO $$
DECLARE leaf regclass;
BEGIN
    FOR leaf IN SELECT relid FROM (
        -- include: slot_tables
    ) AS t LOOP
        EXECUTE format('ALTER TABLE %s RESET (autovacuum_enabled)', leaf);
    END LOOP;
END $$;

-- name: bench_expire_oldest
-- Expire the `count` oldest due rows in one statement: the dead tuples a long
-- run of expiries leaves behind in the index range the worker scans. They are
-- stamped `stamp`: before AsOf, bench_reset_backlog leaves them expired.
UPDATE availability_slots
SET status = 'Expired', updated_at = %(stamp)s, version = version + 1
WHERE id IN (
    SELECT id FROM availability_slots
    WHERE status = 'Available' AND start_at <= %(as_of)s
    ORDER BY start_at
    LIMIT %(count)s
);

-- name: bench_reset_backlog
-- Put back the backlog a drain expired (rows expired at or after `since`, the
-- moment the table was loaded for), exactly as loaded, so that every drain
-- starts from the same table.
UPDATE availability_slots
SET status = 'Available', version = version - 1, updated_at = created_at
WHERE status = 'Expired' AND updated_at >= %(since)s;

-- name: bench_drained
-- The rows expired since `since`, and how many of them did not rise by exactly
-- one version (a row expired twice, or a row touched that should not have been).
SELECT count(*), count(*) FILTER (WHERE version <> 2)
FROM availability_slots
WHERE status = 'Expired' AND updated_at >= %(since)s;

-- name: bench_create_booking_candidates
-- Slots the booking load picks from at random (pgbench draws a row number).
CREATE TABLE bench_booking_candidates (
    n integer PRIMARY KEY,
    slot_id uuid NOT NULL,
    tenant_id uuid NOT NULL
);

-- name: bench_fill_booking_candidates
INSERT INTO bench_booking_candidates (n, slot_id, tenant_id)
SELECT row_number() OVER (), s.id, s.tenant_id
FROM (
    SELECT id, tenant_id FROM availability_slots
    WHERE status = 'Available' AND start_at > %(as_of)s
    ORDER BY md5(id::text)
    LIMIT %(count)s
) AS s;

-- name: bench_empty_booking_candidates
TRUNCATE bench_booking_candidates;

-- name: bench_analyze_booking_candidates
ANALYZE bench_booking_candidates;

-- name: bench_pick_booking
-- pgbench: one candidate slot by its row number, and the moment of the booking;
-- the columns become pgbench variables, the parameters of book_slot
-- (slot_context.sql) that do not come from the command line.
SELECT
    slot_id AS id,
    tenant_id,
    now() AS now,
    now() + make_interval(mins => %(lead_minutes)s) AS earliest_start
FROM bench_booking_candidates
WHERE n = %(n)s;

-- name: bench_booked_candidates
-- Candidates the booking load has booked: proof that its bookings took.
SELECT count(*)
FROM bench_booking_candidates AS c
JOIN availability_slots AS s ON s.id = c.slot_id
WHERE s.status = 'Booked';

-- name: bench_begin
BEGIN;

-- name: bench_commit
COMMIT;

-- name: bench_gate_workers
-- Held in a transaction, it makes every worker's first statement on the
-- quarantine wait, so that worker processes started one after another all
-- begin their drain at the same moment, when the transaction ends.
LOCK TABLE slot_expiration_failures IN ACCESS EXCLUSIVE MODE;

-- name: bench_workers_waiting
SELECT count(*) FROM pg_stat_activity
WHERE application_name = 'slot-expiration' AND wait_event_type = 'Lock';

-- name: bench_table_stats
SELECT
    coalesce(s.n_live_tup, 0),
    coalesce(s.n_dead_tup, 0),
    pg_table_size(c.oid),
    pg_indexes_size(c.oid)
FROM pg_class AS c
LEFT JOIN pg_stat_user_tables AS s ON s.relid = c.oid
WHERE c.oid = to_regclass('availability_slots');

-- name: bench_server_settings
SELECT name, current_setting(name)
FROM pg_settings
WHERE name = ANY (%(names)s::text[])
ORDER BY name;

-- name: bench_server_version
SELECT current_setting('server_version');

-- name: bench_explain_prefix
-- Put before a named statement: its plan as executed, with buffer counts
-- (inside a transaction the benchmark rolls back).
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING ON)

-- name: bench_checkpoints
-- Checkpoints so far (timed or requested): what the server did by itself that can
-- disturb a measurement, beside the benchmark's own.
SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter;

-- name: bench_autovacuum_runs
-- Autovacuum and autoanalyze runs so far on each table of the benchmark's schema (the
-- slot table, its partitions, the tables a section makes): a section that drops and
-- makes tables must not read a smaller total as negative runs.
SELECT relid::bigint AS relid, autovacuum_count + autoanalyze_count AS runs
FROM pg_stat_user_tables
WHERE schemaname = current_schema();

-- name: bench_wal_position
SELECT pg_current_wal_insert_lsn()::text;

-- name: bench_wal_bytes_since
SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %(since)s::pg_lsn)::bigint;

-- name: bench_checkpoint
-- Before each measured part: dirty pages written out (the disk settles), and
-- every page's next change writes a full page image to the WAL, as the first
-- change after any checkpoint does on a server in service.
CHECKPOINT;

-- name: bench_create_plain_calendar
-- Section h: a calendar's own table, unpartitioned: the contract's columns,
-- its key and an index of its own for its queries (the worker's index comes
-- with migrate's adoption).
CREATE TABLE availability_slots (
    id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL,
    consultant_id uuid NOT NULL,
    start_at timestamptz NOT NULL,
    end_at timestamptz NOT NULL,
    status text NOT NULL,
    version integer NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX availability_slots_consultant ON availability_slots
    (tenant_id, consultant_id, start_at);

-- name: bench_create_monthly_calendar
-- The same calendar partitioned by range on start_at (pg_partman makes the
-- monthly partitions): a key must hold start_at.
CREATE TABLE availability_slots (
    id uuid NOT NULL,
    tenant_id uuid NOT NULL,
    consultant_id uuid NOT NULL,
    start_at timestamptz NOT NULL,
    end_at timestamptz NOT NULL,
    status text NOT NULL,
    version integer NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (id, start_at)
) PARTITION BY RANGE (start_at);
CREATE INDEX availability_slots_consultant ON availability_slots
    (tenant_id, consultant_id, start_at);

-- name: bench_partman_schema
-- Where pg_partman is installed in this database (NULL: not installed).
SELECT (SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'pg_partman');

-- name: bench_partman_installable
SELECT EXISTS (SELECT FROM pg_available_extensions WHERE name = 'pg_partman');

-- name: bench_create_partman
-- pg_partman in the benchmark's own schema: it goes with the schema.
CREATE EXTENSION pg_partman SCHEMA slot_expiration_bench;

-- name: bench_partman_create_parent
-- Monthly partitions from the first month given on, premake months ahead of
-- now, and a default partition; the schema is where pg_partman is installed
-- (the three filled in by psycopg.sql, as an identifier and literals).
SELECT {schema}.create_parent(
    'slot_expiration_bench.availability_slots', 'start_at', 'native', 'monthly',
    p_premake := {premake}, p_start_partition := {first}
);

-- name: bench_partitions
-- The partitions of the slot table (0 when it is not partitioned).
SELECT count(*) FROM pg_inherits WHERE inhparent = to_regclass('availability_slots');

-- name: bench_relation_bytes
-- The slot table's size with its partitions: heap, and indexes.
SELECT
    coalesce(sum(pg_table_size(r.relid)), 0)::bigint,
    coalesce(sum(pg_indexes_size(r.relid)), 0)::bigint
FROM (
    -- include: slot_tables
) AS r;
