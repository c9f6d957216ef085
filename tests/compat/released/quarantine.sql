-- The quarantine of poison rows (slot_expiration_failures): what the cycle
-- records and releases in its own transactions, and what an operator lists
-- and retries. Only slot_expiration.store.quarantine_store runs them.

-- name: quarantine_rows
-- Record the rows the database rejected in this batch, in the batch's own
-- transaction: the selection passes over each until its next attempt. The
-- first failure is kept; the rest reflects the latest attempt.
INSERT INTO slot_expiration_failures AS q
    (slot_id, attempts, first_failed_at, last_failed_at, next_attempt_at, sqlstate, message)
SELECT r.slot_id, r.attempts, %(now)s, %(now)s, r.next_attempt_at, r.sqlstate, r.message
FROM unnest(
    %(ids)s::uuid[], %(attempts)s::integer[], %(next_attempts)s::timestamptz[],
    %(sqlstates)s::text[], %(messages)s::text[]
) AS r (slot_id, attempts, next_attempt_at, sqlstate, message)
ON CONFLICT (slot_id) DO UPDATE SET
    attempts = excluded.attempts,
    last_failed_at = excluded.last_failed_at,
    next_attempt_at = excluded.next_attempt_at,
    sqlstate = excluded.sqlstate,
    message = excluded.message;

-- name: release_rows
-- Rows of this batch that expired leave the quarantine with it.
DELETE FROM slot_expiration_failures WHERE slot_id = ANY (%(ids)s::uuid[]);

-- name: purge_quarantine
-- A quarantined slot that left Available some other way (booked, archived)
-- is no longer the worker's business. Entries another worker is purging
-- right now are passed over, never waited for.
DELETE FROM slot_expiration_failures
WHERE slot_id IN (
    SELECT q.slot_id
    FROM slot_expiration_failures AS q
    JOIN availability_slots AS s ON s.id = q.slot_id
    WHERE s.status <> 'Available'
    FOR UPDATE OF q SKIP LOCKED
);

-- name: retry_quarantined
-- Make quarantined slots due at once (after the data was fixed): the next
-- cycle tries them again. Their count of attempts is kept.
UPDATE slot_expiration_failures
SET next_attempt_at = %(now)s
WHERE %(all)s OR slot_id = ANY (%(ids)s::uuid[])
RETURNING slot_id;

-- name: quarantine_list
-- The quarantine, latest failure first: only slots that are still Available
-- (the others are purged by the next cycle and are no longer the worker's).
SELECT q.slot_id, s.tenant_id, q.attempts, q.first_failed_at, q.last_failed_at,
       q.next_attempt_at, q.sqlstate, q.message
FROM slot_expiration_failures AS q
JOIN availability_slots AS s ON s.id = q.slot_id
WHERE s.status = 'Available'
ORDER BY q.last_failed_at DESC, q.slot_id
LIMIT %(limit)s;

-- name: quarantine_total
SELECT count(*)
FROM slot_expiration_failures AS q
JOIN availability_slots AS s ON s.id = q.slot_id
WHERE s.status = 'Available';
