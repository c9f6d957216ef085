-- The quarantine of poison rows (slot_expiration_failures): what the cycle
-- records and releases in its own transactions, and what an operator lists
-- and retries. Only slot_expiration.quarantine.store runs them.

-- fragment: quarantine_slot_lookup
-- The slot of the quarantine entry `q`, found by its primary key: one probe
-- per entry. The LIMIT keeps the planner from turning it into a join, which
-- (the quarantine is small, and autovacuum may never have analyzed it) it
-- could run as a scan of the whole availability_slots: the quarantine's
-- statements read the slot table by key whatever the statistics say.
SELECT ds.tenant_id, ds.status FROM availability_slots AS ds WHERE ds.id = q.slot_id LIMIT 1

-- name: quarantine_rows
-- Record the rows the database rejected in this batch, in the batch's own
-- transaction: the selection passes over each until its next attempt. The
-- first failure is kept; the rest reflects the latest attempt. An entry that
-- had ended (its slot came back to Available) starts over.
INSERT INTO slot_expiration_failures AS q
    (slot_id, attempts, first_failed_at, last_failed_at, next_attempt_at, sqlstate, message)
SELECT r.slot_id, r.attempts, %(now)s, %(now)s, r.next_attempt_at, r.sqlstate, r.message
FROM unnest(
    %(ids)s::uuid[], %(attempts)s::integer[], %(next_attempts)s::timestamptz[],
    %(sqlstates)s::text[], %(messages)s::text[]
) AS r (slot_id, attempts, next_attempt_at, sqlstate, message)
ON CONFLICT (slot_id) DO UPDATE SET
    attempts = excluded.attempts,
    first_failed_at = CASE WHEN q.ended_at IS NULL THEN q.first_failed_at
                           ELSE excluded.first_failed_at END,
    last_failed_at = excluded.last_failed_at,
    next_attempt_at = excluded.next_attempt_at,
    sqlstate = excluded.sqlstate,
    message = excluded.message,
    parked_at = NULL,
    ended_at = NULL,
    ended_status = NULL;

-- name: release_rows
-- Rows of this batch that expired end their quarantine with it; the entry is
-- kept, ended, for the retention period (`quarantine list --history`).
UPDATE slot_expiration_failures
SET ended_at = %(now)s, ended_status = 'Expired'
WHERE slot_id = ANY (%(ids)s::uuid[]) AND ended_at IS NULL;

-- name: end_departed_entries
-- A quarantined slot that left Available some other way (booked, archived)
-- is no longer the worker's business: its entry ends, keeping the status the
-- slot left for. Entries another worker is ending right now are passed over,
-- never waited for. Each active entry looks its slot up by key
-- (quarantine_slot_lookup): never a scan of availability_slots.
UPDATE slot_expiration_failures AS e
SET ended_at = %(now)s, ended_status = departed.status
FROM (
    SELECT q.slot_id, s.status
    FROM slot_expiration_failures AS q
    CROSS JOIN LATERAL (
        -- include: quarantine_slot_lookup
    ) AS s
    WHERE q.ended_at IS NULL AND s.status <> 'Available'
    FOR UPDATE OF q SKIP LOCKED
) AS departed
WHERE e.slot_id = departed.slot_id;

-- name: purge_ended_quarantine
-- Entries that ended before `cutoff` (the retention), at most `limit` per
-- transaction. Active entries, which the selection reads, are never touched.
DELETE FROM slot_expiration_failures
WHERE slot_id IN (
    SELECT slot_id FROM slot_expiration_failures
    WHERE ended_at < %(cutoff)s
    ORDER BY ended_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
);

-- name: forget_deleted_slots
-- A quarantined slot the calendar deleted leaves nothing to keep (an adopted
-- table has no foreign key to cascade, migration 0002): its entry goes.
-- Entries another worker is forgetting right now are passed over. Each entry
-- looks its slot up by key (quarantine_slot_lookup).
DELETE FROM slot_expiration_failures
WHERE slot_id IN (
    SELECT q.slot_id
    FROM slot_expiration_failures AS q
    LEFT JOIN LATERAL (
        -- include: quarantine_slot_lookup
    ) AS s ON true
    WHERE s.status IS NULL
    FOR UPDATE OF q SKIP LOCKED
);

-- name: retry_quarantined
-- Make quarantined slots due at once (after the data was fixed): the next
-- cycle tries them again. Their count of attempts is kept. Named slots are
-- unparked; --all leaves parked ones parked.
UPDATE slot_expiration_failures
SET next_attempt_at = %(now)s, parked_at = NULL
WHERE ended_at IS NULL
  AND (slot_id = ANY (%(ids)s::uuid[]) OR (%(all)s AND parked_at IS NULL))
RETURNING slot_id;

-- name: park_quarantined
-- Stop retrying these slots until `quarantine retry` names them: the
-- selection passes over a parked entry whatever its next attempt, and the
-- worker's count of quarantined slots leaves it out.
UPDATE slot_expiration_failures
SET parked_at = coalesce(parked_at, %(now)s)
WHERE ended_at IS NULL AND slot_id = ANY (%(ids)s::uuid[])
RETURNING slot_id;

-- fragment: message_excerpt_columns
-- An entry's message as the views show it: its start, at most
-- `message_chars` characters (domain/text.py, excerpt, notes the rest), and
-- its whole length. Entries stored before the bound may hold a long message.
left(q.message, %(message_chars)s) AS message, length(q.message) AS message_length

-- fragment: listing_filter
-- `quarantine list`'s filters; NULL: any.
(%(sqlstate)s::text IS NULL OR q.sqlstate = %(sqlstate)s)
AND (%(tenant_id)s::uuid IS NULL OR s.tenant_id = %(tenant_id)s)

-- name: quarantine_list
-- The quarantine, latest failure first: only slots that are still Available
-- (the others end at the next cycle and are no longer the worker's), parked
-- ones included.
SELECT q.slot_id, s.tenant_id, q.attempts, q.first_failed_at, q.last_failed_at,
       q.next_attempt_at, q.sqlstate, q.parked_at,
       -- include: message_excerpt_columns
FROM slot_expiration_failures AS q
CROSS JOIN LATERAL (
    -- include: quarantine_slot_lookup
) AS s
WHERE q.ended_at IS NULL AND s.status = 'Available'
  AND
  -- include: listing_filter
ORDER BY q.last_failed_at DESC, q.slot_id
LIMIT %(limit)s;

-- name: quarantine_total
-- How many entries are listed, how many of them are parked, and since when the
-- oldest of the others has been failing.
SELECT count(*) AS total, count(*) FILTER (WHERE q.parked_at IS NOT NULL) AS parked,
       min(q.first_failed_at) FILTER (WHERE q.parked_at IS NULL) AS waiting_since
FROM slot_expiration_failures AS q
CROSS JOIN LATERAL (
    -- include: quarantine_slot_lookup
) AS s
WHERE q.ended_at IS NULL AND s.status = 'Available'
  AND
  -- include: listing_filter
;

-- name: quarantine_ended
-- Entries that ended (kept for the retention period), the latest end first.
SELECT q.slot_id, s.tenant_id, q.attempts, q.first_failed_at, q.last_failed_at,
       q.sqlstate, q.parked_at, q.ended_at, q.ended_status,
       -- include: message_excerpt_columns
FROM slot_expiration_failures AS q
CROSS JOIN LATERAL (
    -- include: quarantine_slot_lookup
) AS s
WHERE q.ended_at IS NOT NULL
  AND
  -- include: listing_filter
ORDER BY q.ended_at DESC, q.slot_id
LIMIT %(limit)s;

-- name: measure_quarantine
-- What the worker reports after each cycle: slots in quarantine, still
-- Available and not parked (the quarantined_slots gauge), and how long the
-- oldest of them has been failing, from its first failure to `now` (the
-- quarantine_oldest_age_seconds gauge; NULL when none is). Both instants are
-- the worker's clock, the one the quarantine is kept on. The quarantine holds
-- poison rows only: a handful of key lookups.
SELECT count(*) AS quarantined,
       extract(epoch FROM %(now)s::timestamptz - min(q.first_failed_at))::float8
           AS oldest_age_seconds
FROM slot_expiration_failures AS q
CROSS JOIN LATERAL (
    -- include: quarantine_slot_lookup
) AS s
WHERE q.ended_at IS NULL AND q.parked_at IS NULL AND s.status = 'Available';
