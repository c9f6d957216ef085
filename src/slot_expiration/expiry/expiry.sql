-- The cycle's statements, by name: one cycle's selection, expiry and counts.
-- Only slot_expiration.store.cycle_store runs them; parameters are bound by
-- psycopg (%(name)s), never formatted into the text.

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

-- fragment: expire_batch_steps
-- The healthy-batch fast path, one statement: lock up to batch_size due
-- rows, expire them (Available -> Expired, the state machine's EXPIRE), end
-- the quarantine entries of the rows that now expired (as release_rows), and
-- count the rows passed over inside the batch's window. The update finds each
-- row by key, within the start_at range of the rows picked (they are locked:
-- none moves): on a calendar partitioned by start_at that bound prunes the
-- update to the partitions the batch lies in, where the key alone would
-- search every partition. Measured on 1,000,000 rows, 500-row batches rolled
-- back, the two forms taking turns: 14.3 ms against 26.3 ms without the bound
-- on 28 monthly partitions; 5.8 against 5.6 ms on a plain table.
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
    RETURNING s.id, s.tenant_id, s.start_at
),
released AS (
    UPDATE slot_expiration_failures AS q
    SET ended_at = %(now)s, ended_status = 'Expired'
    FROM expired AS e
    WHERE q.slot_id = e.id AND q.ended_at IS NULL
),
window_end AS (
    -- include: batch_window_end
)

-- name: expire_batch
-- The fast path, returning the slots it expired and their tenants (for a
-- batch's trace span: the tenant of each slot).
-- include: expire_batch_steps
SELECT
    coalesce(array_agg(e.id ORDER BY e.start_at, e.id), '{}') AS ids,
    coalesce(array_agg(e.tenant_id ORDER BY e.start_at, e.id), '{}') AS tenant_ids,
    (
        -- include: skipped_locked_count
    ) AS skipped_locked_count,
    (SELECT start_at FROM window_end) AS window_end_start_at,
    (SELECT id FROM window_end) AS window_end_id
FROM expired AS e;

-- name: expire_batch_counted
-- The same, returning only how many it expired: what logs and metrics need
-- when no trace is recorded (building the arrays costs a batch ~0.7 ms).
-- include: expire_batch_steps
SELECT
    count(*) AS expired_count,
    (
        -- include: skipped_locked_count
    ) AS skipped_locked_count,
    (SELECT start_at FROM window_end) AS window_end_start_at,
    (SELECT id FROM window_end) AS window_end_id
FROM expired AS e;

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

-- name: cycle_preflight
-- The first statement of every cycle: the server's clock (to compare with
-- the worker's), what this role lacks to run a cycle, one line each (see
-- worker_requirements in schema.sql), how availability_slots now differs
-- from the table contract (the catalog only: a column retyped after adoption,
-- a check added that refuses 'Expired'; a cycle never runs on a table whose
-- types its statements rely on changed), and, when the search_path finds no
-- availability_slots, the schemas that hold one and the search_path.
-- Measured on an empty calendar: 2.0 ms (median of 300) against 0.6 ms without
-- the contract and the policies, once per cycle (a drain runs it once too).
SELECT clock_timestamp() AS server_clock,
       current_user::text AS role,
       coalesce(array_agg(r.problem ORDER BY r.ordinal), '{}') AS problems,
       coalesce(array_agg(r.kind ORDER BY r.ordinal), '{}') AS problem_kinds,
       coalesce((
           -- include: slot_table_schemas_elsewhere
       ), '{}') AS slot_table_schemas,
       current_setting('search_path') AS search_path
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

-- name: insert_slot
INSERT INTO availability_slots
    (id, tenant_id, consultant_id, start_at, end_at, status, version, created_at, updated_at)
VALUES
    (%(id)s, %(tenant_id)s, %(consultant_id)s, %(start_at)s, %(end_at)s, %(status)s,
     %(version)s, %(created_at)s, %(updated_at)s);
