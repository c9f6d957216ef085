-- Statements of the operator's views: `slot-expiration status` and the
-- worker's /readyz. Only slot_expiration.store.status_store uses them. They
-- only read, all in one read-only transaction per session.

-- name: status_transaction_limits
-- Local to the transaction (SET LOCAL), so nothing outlives it on a server
-- connection that a pooler in transaction mode hands to someone else next.
SELECT
    set_config('transaction_read_only', 'on', true),
    set_config('statement_timeout', %(statement_timeout)s, true),
    set_config('lock_timeout', %(lock_timeout)s, true);

-- name: schema_revision
-- The migration the schema is at (Alembic's own history table of the worker).
SELECT version_num FROM slot_expiration_alembic_version;

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

-- name: status_failed_slots
-- The quarantine, latest failure first: only slots that are still Available
-- (the others are purged by the next cycle and are no longer the worker's).
SELECT q.slot_id, s.tenant_id, q.attempts, q.first_failed_at, q.last_failed_at,
       q.next_attempt_at, q.sqlstate, q.message
FROM slot_expiration_failures AS q
JOIN availability_slots AS s ON s.id = q.slot_id
WHERE s.status = 'Available'
ORDER BY q.last_failed_at DESC, q.slot_id
LIMIT %(limit)s;

-- name: status_failed_slots_total
SELECT count(*)
FROM slot_expiration_failures AS q
JOIN availability_slots AS s ON s.id = q.slot_id
WHERE s.status = 'Available';

-- name: status_selection_index
-- The index that serves the selection: whether it exists, on which table, and
-- whether PostgreSQL may use it (an interrupted CREATE INDEX CONCURRENTLY
-- leaves it invalid).
SELECT c.relname::text AS table_name, i.indisvalid, pg_get_indexdef(i.indexrelid) AS definition
FROM pg_index AS i
JOIN pg_class AS c ON c.oid = i.indrelid
WHERE i.indexrelid = to_regclass('ix_availability_slots_status_start');

-- name: status_explain_selection
-- The plan of the worker's selection (its predicate, order and lock; see
-- expire_batch in queries.sql), without running it: whether the planner
-- reads ix_availability_slots_status_start or scans the whole table.
EXPLAIN (FORMAT JSON)
SELECT s.id
FROM availability_slots AS s
WHERE s.status = 'Available' AND s.start_at <= %(as_of)s
ORDER BY s.start_at, s.id
LIMIT %(batch_size)s
FOR UPDATE OF s SKIP LOCKED;
