-- The cycle's statements, by name: one cycle's clock, selection, expiry and
-- counts, and the plan of its selection (for `status`). Only
-- slot_expiration.expiry.store runs them; parameters are bound by psycopg
-- (%(name)s), never formatted into the text. Every fragment is this file's own.

-- fragment: due_slot_predicate
-- What the worker may take now: Available, started by `as_of`, past where the
-- drain's previous batch ended (`after_*`, NULL for a cycle's first batch),
-- not in quarantine until after `now` nor parked there (an entry that ended
-- no longer counts), not already tried in this transaction. The lower bound
-- is an index condition: a drain's later batches, their picks and their
-- counts, never walk the entries that earlier batches expired (dead until a
-- vacuum), only their own window.
s.status = 'Available' AND s.start_at <= %(as_of)s
AND (s.start_at, s.id) > (
    coalesce(%(after_start)s::timestamptz, '-infinity'::timestamptz),
    coalesce(%(after_id)s::uuid, '00000000-0000-0000-0000-000000000000'::uuid)
)
AND s.id <> ALL (%(exclude_ids)s::uuid[])
AND
    -- include: not_in_quarantine

-- fragment: not_in_quarantine
-- The selection's part (due_slot_predicate): slot `s` is not in
-- quarantine until after `now`, nor parked there (an entry that ended no
-- longer counts).
NOT EXISTS (
    SELECT FROM slot_expiration_failures AS q
    WHERE q.slot_id = s.id AND q.ended_at IS NULL
      AND (q.next_attempt_at > %(now)s OR q.parked_at IS NOT NULL)
)

-- fragment: pick_due_slots
-- The selection, oldest start_at first; the statements that lock add
-- FOR UPDATE OF s SKIP LOCKED. ix_availability_slots_status_start is
-- (start_at, id) WHERE status = 'Available': the pick reads exactly its rows.
SELECT s.id, s.tenant_id, s.start_at
FROM availability_slots AS s
WHERE
    -- include: due_slot_predicate
ORDER BY s.start_at, s.id
LIMIT %(batch_size)s

-- fragment: batch_window_end
-- The end of the batch's window, in (start_at, id) order: the last row taken
-- when the batch is full, else the whole predicate. Reads CTE `picked`.
SELECT coalesce(full_batch.start_at, %(as_of)s) AS start_at,
       coalesce(full_batch.id, 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid) AS id
FROM (SELECT 1) AS one
LEFT JOIN (
    SELECT start_at, id FROM picked
    WHERE (SELECT count(*) FROM picked) = %(batch_size)s
    ORDER BY start_at DESC, id DESC
    LIMIT 1
) AS full_batch ON true

-- fragment: skipped_locked_count
-- Rows of the predicate inside the window that the pick passed over: still
-- Available in this statement's snapshot, so locked by another transaction
-- when the worker reached them (or, rarely, changed by one that committed in
-- between). The window bound is an index condition.
SELECT count(*)
FROM availability_slots AS s
WHERE
    -- include: due_slot_predicate
  AND (s.start_at, s.id) <= ((SELECT start_at FROM window_end), (SELECT id FROM window_end))
  AND s.id NOT IN (SELECT id FROM picked)

-- name: expire_batch
-- The healthy-batch fast path, one statement: lock up to batch_size due
-- rows, expire them (Available -> Expired, the state machine's EXPIRE), and
-- count them and the rows passed over inside the batch's window. Only counts
-- come back: what logs, metrics and the history need (returning the 500 ids of
-- a batch cost the client 0.17-0.20 ms of CPU and the batch 0.45 ms, measured).
-- The quarantine entries of rows it expired (a slot rejected before, due
-- again) end at the cycle's tail with every entry whose slot left Available
-- (quarantine.sql, end_departed_entries): the quarantine is written by its own
-- statements only. The update finds each row by key, within the start_at range
-- of the rows picked (they are locked: none moves): on a calendar partitioned
-- by start_at that bound prunes the update to the partitions the batch lies
-- in, where the key alone would search every partition. Measured on 1,000,000
-- rows, 500-row batches rolled back, the two forms taking turns: 14.3 ms
-- against 26.3 ms without the bound on 28 monthly partitions; 5.8 against
-- 5.6 ms on a plain table.
WITH picked AS MATERIALIZED (
    -- include: pick_due_slots
    FOR UPDATE OF s SKIP LOCKED
),
expired AS (
    UPDATE availability_slots AS s
    SET status = 'Expired', updated_at = %(as_of)s, version = s.version + 1
    WHERE s.id = ANY (ARRAY(SELECT id FROM picked)) AND s.status = 'Available'
      AND s.start_at BETWEEN (SELECT min(start_at) FROM picked)
                         AND (SELECT max(start_at) FROM picked)
    RETURNING 1
),
window_end AS (
    -- include: batch_window_end
)
SELECT
    (SELECT count(*) FROM expired) AS expired_count,
    (
        -- include: skipped_locked_count
    ) AS skipped_locked_count,
    (SELECT start_at FROM window_end) AS window_end_start_at,
    (SELECT id FROM window_end) AS window_end_id;

-- name: lock_batch
-- The poison-isolation path: the same selection and skipped-row count as
-- expire_batch, only locking, and returning how often each row failed
-- before; the rows are then expired one by one.
WITH picked AS MATERIALIZED (
    -- include: pick_due_slots
    FOR UPDATE OF s SKIP LOCKED
),
window_end AS (
    -- include: batch_window_end
)
SELECT
    coalesce((SELECT array_agg(id ORDER BY start_at, id) FROM picked), '{}') AS ids,
    coalesce((SELECT array_agg(tenant_id ORDER BY start_at, id) FROM picked), '{}')
        AS tenant_ids,
    coalesce(
        (
            SELECT array_agg(coalesce(q.attempts, 0) ORDER BY p.start_at, p.id)
            FROM picked AS p
            LEFT JOIN slot_expiration_failures AS q
                ON q.slot_id = p.id AND q.ended_at IS NULL
        ),
        '{}'
    ) AS previous_attempts,
    (
        -- include: skipped_locked_count
    ) AS skipped_locked_count,
    (SELECT start_at FROM window_end) AS window_end_start_at,
    (SELECT id FROM window_end) AS window_end_id;

-- name: check_constraints_immediately
-- Deferred constraints and constraint triggers would only fire at COMMIT,
-- where a rejected row can no longer be told apart; checked per statement,
-- they fail inside that row's savepoint instead.
SET CONSTRAINTS ALL IMMEDIATE;

-- name: expire_slot
-- The poison-isolation path, step two: one already-locked row.
UPDATE availability_slots
SET status = 'Expired', updated_at = %(as_of)s, version = version + 1
WHERE id = %(id)s AND status = 'Available'
RETURNING id, tenant_id;

-- name: cycle_clock
-- The first statement of every cycle: the server's clock, to compare with the
-- worker's (a fast clock would expire slots that can still be booked). What the
-- role lacks comes next, from the contract (schema/contract.sql, worker_problems).
SELECT clock_timestamp() AS server_clock;

-- name: standbys
-- Where each streaming standby's replay is against the primary's WAL, in bytes,
-- and its own replay_lag (stale while its replay is paused: throttle.py keeps
-- its own lag tracker), through the function migration 0010 made, which reads
-- pg_stat_replication with its owner's rights: NULL positions where even those
-- cannot see them. The drain's throttle, before each batch.
SELECT name, wal_bytes, replay_bytes, replay_lag_seconds
FROM slot_expiration_standbys()
ORDER BY name;

-- name: count_backlog_capped
-- What is still due after a cycle, counted cheaply: an index-only walk that
-- stops at `cap` rows (the cap sits far above the alert threshold). Due at
-- `as_of`, or (NULL) at the database's clock: a worker's clock that runs
-- slow or fast must not make the backlog look smaller or larger.
SELECT count(*) FROM (
    SELECT FROM availability_slots
    WHERE status = 'Available' AND start_at <= coalesce(%(as_of)s::timestamptz, now())
    LIMIT %(cap)s
) AS due;

-- name: count_backlog
-- Available slots whose start has passed: what the worker still has to do.
SELECT count(*) FROM availability_slots
WHERE status = 'Available' AND start_at <= %(as_of)s;

-- name: count_by_status
SELECT status, count(*) AS slots FROM availability_slots GROUP BY status;

-- name: explain_pick
-- The plan of the worker's selection (the same text as expire_batch's pick),
-- without running it: whether the planner reads
-- ix_availability_slots_status_start or scans the whole table. Without the
-- pick's FOR UPDATE (a LockRows node above the same scan), whose privilege
-- check would refuse a read-only role.
EXPLAIN (FORMAT JSON)
-- include: pick_due_slots
;
