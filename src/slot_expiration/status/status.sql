-- The statements of the operator's views: `slot-expiration status` and the
-- worker's /readyz. Only slot_expiration.status.store runs them; they only
-- read, in read-only transactions (the selection's plan is expiry.sql's).

-- name: database_clock
-- The database's now (its transaction's start, so every part of a report
-- measures from one instant): what the operator's views measure times and
-- ages on, the clock the worker writes its history and last success on.
SELECT now();

-- name: status_oldest_overdue
-- The Available slot whose start passed longest ago, quarantined or not (an entry
-- that ended, kept for the history, is not a quarantine). Its start read as a
-- timestamptz whatever the column became: where the contract's type was changed
-- (the schema part names it), the report still reads, in the session's UTC.
SELECT s.id, s.tenant_id, s.start_at::timestamptz AS start_at,
       q.slot_id IS NOT NULL AS quarantined
FROM availability_slots AS s
LEFT JOIN slot_expiration_failures AS q ON q.slot_id = s.id AND q.ended_at IS NULL
WHERE s.status = 'Available' AND s.start_at <= %(as_of)s
ORDER BY s.start_at, s.id
LIMIT 1;

-- name: status_worker_sessions
-- The worker's sessions on this database now. Without pg_read_all_stats, the
-- server hides state and timings of other roles' sessions (they read NULL).
SELECT pid, state, backend_start, xact_start, state_change, wait_event_type, wait_event
FROM pg_stat_activity
WHERE application_name = %(application_name)s AND datname = current_database()
ORDER BY backend_start, pid;

-- name: status_selection_index
-- The index that serves the selection: whether it exists, on which table, and
-- whether PostgreSQL may use it (an interrupted CREATE INDEX CONCURRENTLY
-- leaves it invalid).
SELECT c.relname::text AS table_name, i.indisvalid AS valid,
       pg_get_indexdef(i.indexrelid) AS definition
FROM pg_index AS i
JOIN pg_class AS c ON c.oid = i.indrelid
WHERE i.indexrelid = to_regclass('ix_availability_slots_status_start');

-- name: status_slot_table_partitions
-- The partitions of a partitioned slot table and the parts of the selection's
-- index on them (their relnames, as EXPLAIN names them); empty for a plain table.
SELECT ARRAY(
           SELECT c.relname::text FROM pg_partition_tree(to_regclass('availability_slots')) AS t
           JOIN pg_class AS c ON c.oid = t.relid WHERE t.level > 0
       ) AS partitions,
       ARRAY(
           SELECT c.relname::text
           FROM pg_partition_tree(to_regclass('ix_availability_slots_status_start')) AS t
           JOIN pg_class AS c ON c.oid = t.relid WHERE t.level > 0
       ) AS index_partitions;

-- name: status_slot_table_size
-- How big the slot table is: its rows counted exactly up to `cap` (a short
-- walk that stops there: enough to tell a table too small to judge its plan),
-- the planner's estimate (NULL before the first ANALYZE or VACUUM) and its
-- size on disk, indexes and TOAST included; a partitioned table's are its
-- partitions' (the parent itself holds no rows), a plain table's its own
-- (pg_partition_tree gives nothing for a table that is not partitioned).
SELECT (SELECT count(*) FROM (SELECT FROM availability_slots LIMIT %(cap)s) AS r) AS counted,
       CASE WHEN bool_or(c.reltuples >= 0) THEN sum(greatest(c.reltuples, 0))::bigint
       END AS rows_estimate,
       coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint AS total_bytes
FROM pg_class AS c
WHERE c.oid IN (
    SELECT relid FROM pg_partition_tree(to_regclass('availability_slots')) WHERE isleaf
    UNION
    SELECT oid FROM pg_class WHERE oid = to_regclass('availability_slots') AND relkind = 'r'
);
