-- Every statement the product sends to PostgreSQL, by name.
-- Only slot_expiration.store.slot_store uses them; parameters are bound by
-- psycopg (%(name)s), never formatted into the text.

-- name: expire_batch
-- The healthy-batch fast path, one round trip: lock up to batch_size
-- expirable rows, oldest start_at first, passing over rows another
-- transaction holds and rows in quarantine until their next attempt; expire
-- them (Available -> Expired, the state machine's EXPIRE); drop the
-- quarantine entries of the rows that now expired; and count the rows
-- passed over inside the batch's window. The window is the whole predicate
-- when the batch is not full, else every row up to the last one taken, in
-- (start_at, id) order. Rows passed over are still Available in this
-- statement's snapshot: they were locked by another transaction when the
-- worker reached them, or (rarely) changed by one that committed in between.
-- ix_availability_slots_status_start is (start_at, id) WHERE status =
-- 'Available': the pick reads exactly its rows in order, the count's window
-- bound is an index condition, and the update finds each row by primary key.
WITH picked AS MATERIALIZED (
    SELECT s.id, s.start_at
    FROM availability_slots AS s
    WHERE s.status = 'Available' AND s.start_at <= %(as_of)s
      AND NOT EXISTS (
          SELECT FROM slot_expiration_failures AS q
          WHERE q.slot_id = s.id AND q.next_attempt_at > %(now)s
      )
    ORDER BY s.start_at, s.id
    LIMIT %(batch_size)s
    FOR UPDATE OF s SKIP LOCKED
),
expired AS (
    UPDATE availability_slots AS s
    SET status = 'Expired', updated_at = %(as_of)s, version = s.version + 1
    WHERE s.id = ANY (ARRAY(SELECT id FROM picked)) AND s.status = 'Available'
    RETURNING s.id, s.tenant_id, s.start_at
),
released AS (
    DELETE FROM slot_expiration_failures AS q
    USING expired AS e
    WHERE q.slot_id = e.id
),
window_end AS (
    -- The last row taken when the batch is full; else the whole predicate.
    SELECT coalesce(full_batch.start_at, %(as_of)s) AS start_at,
           coalesce(full_batch.id, 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid) AS id
    FROM (SELECT 1) AS one
    LEFT JOIN (
        SELECT start_at, id FROM picked
        WHERE (SELECT count(*) FROM picked) = %(batch_size)s
        ORDER BY start_at DESC, id DESC
        LIMIT 1
    ) AS full_batch ON true
)
SELECT
    coalesce(array_agg(e.id ORDER BY e.start_at, e.id), '{}') AS ids,
    coalesce(array_agg(e.tenant_id ORDER BY e.start_at, e.id), '{}') AS tenant_ids,
    (
        SELECT count(*)
        FROM availability_slots AS a
        WHERE a.status = 'Available'
          AND a.start_at <= %(as_of)s
          AND (a.start_at, a.id) <= ((SELECT start_at FROM window_end), (SELECT id FROM window_end))
          AND a.id NOT IN (SELECT id FROM picked)
          AND NOT EXISTS (
              SELECT FROM slot_expiration_failures AS q
              WHERE q.slot_id = a.id AND q.next_attempt_at > %(now)s
          )
    ) AS skipped_locked_count
FROM expired AS e;

-- name: lock_batch
-- The poison-isolation path: the same selection and skipped-row count as
-- expire_batch, but only locking, leaving out the rows this transaction
-- already tried (exclude_ids), and returning how often each row failed
-- before; the rows are then expired one by one.
WITH picked AS MATERIALIZED (
    SELECT s.id, s.tenant_id, s.start_at
    FROM availability_slots AS s
    WHERE s.status = 'Available' AND s.start_at <= %(as_of)s
      AND s.id <> ALL (%(exclude_ids)s::uuid[])
      AND NOT EXISTS (
          SELECT FROM slot_expiration_failures AS q
          WHERE q.slot_id = s.id AND q.next_attempt_at > %(now)s
      )
    ORDER BY s.start_at, s.id
    LIMIT %(batch_size)s
    FOR UPDATE OF s SKIP LOCKED
),
window_end AS (
    SELECT coalesce(full_batch.start_at, %(as_of)s) AS start_at,
           coalesce(full_batch.id, 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid) AS id
    FROM (SELECT 1) AS one
    LEFT JOIN (
        SELECT start_at, id FROM picked
        WHERE (SELECT count(*) FROM picked) = %(batch_size)s
        ORDER BY start_at DESC, id DESC
        LIMIT 1
    ) AS full_batch ON true
)
SELECT
    coalesce((SELECT array_agg(id ORDER BY start_at, id) FROM picked), '{}') AS ids,
    coalesce((SELECT array_agg(tenant_id ORDER BY start_at, id) FROM picked), '{}')
        AS tenant_ids,
    coalesce(
        (
            SELECT array_agg(coalesce(q.attempts, 0) ORDER BY p.start_at, p.id)
            FROM picked AS p
            LEFT JOIN slot_expiration_failures AS q ON q.slot_id = p.id
        ),
        '{}'
    ) AS previous_attempts,
    (
        SELECT count(*)
        FROM availability_slots AS a
        WHERE a.status = 'Available'
          AND a.start_at <= %(as_of)s
          AND (a.start_at, a.id) <= ((SELECT start_at FROM window_end), (SELECT id FROM window_end))
          AND a.id NOT IN (SELECT id FROM picked)
          AND a.id <> ALL (%(exclude_ids)s::uuid[])
          AND NOT EXISTS (
              SELECT FROM slot_expiration_failures AS q
              WHERE q.slot_id = a.id AND q.next_attempt_at > %(now)s
          )
    ) AS skipped_locked_count;

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

-- name: check_constraints_immediately
-- Deferred constraints and constraint triggers would only fire at COMMIT,
-- where a rejected row can no longer be told apart; checked per statement,
-- they fail inside that row's savepoint instead.
SET CONSTRAINTS ALL IMMEDIATE;

-- name: transaction_limits
-- The first statement of every transaction: local settings, so they hold on
-- whichever server session a pooler in transaction mode hands out, and they are
-- set after connecting, so the URL's own `options` are kept.
SELECT
    set_config('statement_timeout', %(statement_timeout)s, true),
    set_config('idle_in_transaction_session_timeout', %(idle_timeout)s, true),
    set_config('lock_timeout', %(lock_timeout)s, true);

-- name: expire_slot
-- The poison-isolation path, step two: one already-locked row.
UPDATE availability_slots
SET status = 'Expired', updated_at = %(as_of)s, version = version + 1
WHERE id = %(id)s AND status = 'Available'
RETURNING id, tenant_id;

-- name: insert_slot
INSERT INTO availability_slots
    (id, tenant_id, consultant_id, start_at, end_at, status, version, created_at, updated_at)
VALUES
    (%(id)s, %(tenant_id)s, %(consultant_id)s, %(start_at)s, %(end_at)s, %(status)s,
     %(version)s, %(created_at)s, %(updated_at)s);

-- name: count_by_status
SELECT status, count(*) AS slots FROM availability_slots GROUP BY status;

-- name: count_backlog
-- Available slots whose start has passed: what the worker still has to do.
SELECT count(*) FROM availability_slots
WHERE status = 'Available' AND start_at <= %(as_of)s;

-- name: count_backlog_capped
-- What is still due after a cycle, counted cheaply: an index-only walk that
-- stops at `cap` rows (the cap sits far above the alert threshold).
SELECT count(*) FROM (
    SELECT FROM availability_slots
    WHERE status = 'Available' AND start_at <= %(as_of)s
    LIMIT %(cap)s
) AS due;

-- name: schema_ready
-- Whether the migrations have created the tables the worker needs.
SELECT to_regclass('availability_slots') IS NOT NULL
   AND to_regclass('slot_expiration_failures') IS NOT NULL;

-- name: role_exists
SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = %(role)s);

-- name: slot_table_owner
-- The schema the worker's tables live in (the one the search path finds), their
-- owner, and whether we act as that owner: a GRANT by anyone else only warns.
SELECT n.nspname, pg_get_userbyid(c.relowner), pg_has_role(current_user, c.relowner, 'MEMBER')
FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.oid = to_regclass('availability_slots');

-- The worker role's privileges, exactly. {role} and {schema} are identifiers
-- that psycopg.sql quotes; nothing else is ever put into these statements.
-- Everything is revoked first, so a second run leaves exactly the same grants.

-- name: revoke_worker_privileges
REVOKE ALL ON TABLE availability_slots, slot_expiration_failures,
    slot_expiration_alembic_version FROM {role};

-- name: grant_schema_usage
GRANT USAGE ON SCHEMA {schema} TO {role};

-- name: grant_slot_read
-- Read the slot table: the selection, the skipped count, the backlog.
GRANT SELECT ON TABLE availability_slots TO {role};

-- name: grant_slot_transition
-- The expiry itself writes these three columns and no other; FOR UPDATE needs
-- UPDATE on at least one column, which this gives.
GRANT UPDATE (status, updated_at, version) ON TABLE availability_slots TO {role};

-- name: grant_quarantine
-- The product's own quarantine of poison rows.
GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE slot_expiration_failures TO {role};

-- name: grant_schema_version_read
-- Health checks compare the schema's revision with the worker's.
GRANT SELECT ON TABLE slot_expiration_alembic_version TO {role};

-- name: retry_quarantined
-- Make quarantined slots due at once (after the data was fixed): the next
-- cycle tries them again. Their count of attempts is kept.
UPDATE slot_expiration_failures
SET next_attempt_at = %(now)s
WHERE %(all)s OR slot_id = ANY (%(ids)s::uuid[])
RETURNING slot_id;
