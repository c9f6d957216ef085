-- The statements of the operator's views: `slot-expiration status` and the
-- worker's /readyz. Only slot_expiration.store.status_store runs them; they
-- only read, in read-only transactions.

-- name: status_counts_by_status
SELECT status, count(*) AS slots FROM availability_slots GROUP BY status;

-- name: status_backlog_capped
-- Available slots whose start has passed, counted up to `cap` (an index-only
-- walk that stops there, as cheap as the worker's own count after a cycle).
SELECT count(*) FROM (
    SELECT FROM availability_slots
    WHERE status = 'Available' AND start_at <= %(as_of)s
    LIMIT %(cap)s
) AS due;

-- name: status_oldest_overdue
-- The Available slot whose start passed longest ago, quarantined or not.
SELECT s.id, s.tenant_id, s.start_at, q.slot_id IS NOT NULL AS quarantined
FROM availability_slots AS s
LEFT JOIN slot_expiration_failures AS q ON q.slot_id = s.id
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
SELECT c.relname::text AS table_name, i.indisvalid, pg_get_indexdef(i.indexrelid) AS definition
FROM pg_index AS i
JOIN pg_class AS c ON c.oid = i.indrelid
WHERE i.indexrelid = to_regclass('ix_availability_slots_status_start');

-- name: status_explain_selection
-- The plan of the worker's selection (the same text as expire_batch's pick),
-- without running it: whether the planner reads
-- ix_availability_slots_status_start or scans the whole table. Without the
-- pick's FOR UPDATE (a LockRows node above the same scan), whose privilege
-- check would refuse a read-only role.
EXPLAIN (FORMAT JSON)
-- include: pick_due_slots
;
