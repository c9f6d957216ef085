-- Every statement the product sends to PostgreSQL, by name.
-- Only slot_expiration.store.slot_store uses them; parameters are bound by
-- psycopg (%(name)s), never formatted into the text.

-- name: expire_batch
-- The healthy-batch fast path, one round trip: lock up to batch_size
-- expirable rows, oldest start_at first, passing over rows another
-- transaction holds; expire them; count the rows passed over inside the
-- batch's window. The window is the whole predicate when the batch is not
-- full, else every row up to the last one taken in (start_at, id) order.
-- Locked rows are still Available in this statement's snapshot, so
-- "matching in the window but not picked" is exactly "skipped for a lock".
WITH picked AS MATERIALIZED (
    SELECT id, start_at
    FROM availability_slots
    WHERE status = 'Available' AND start_at <= %(as_of)s
    ORDER BY start_at, id
    LIMIT %(batch_size)s
    FOR UPDATE SKIP LOCKED
),
expired AS (
    UPDATE availability_slots AS s
    SET status = 'Expired', updated_at = %(as_of)s, version = s.version + 1
    FROM picked
    WHERE s.id = picked.id AND s.status = 'Available'
    RETURNING s.id, s.tenant_id, s.start_at
),
last_picked AS (
    SELECT start_at, id FROM picked ORDER BY start_at DESC, id DESC LIMIT 1
)
SELECT
    coalesce(array_agg(e.id ORDER BY e.start_at, e.id), '{}') AS ids,
    coalesce(array_agg(e.tenant_id ORDER BY e.start_at, e.id), '{}') AS tenant_ids,
    (
        SELECT count(*)
        FROM availability_slots AS a
        WHERE a.status = 'Available' AND a.start_at <= %(as_of)s
          AND a.id NOT IN (SELECT id FROM picked)
          AND (
              (SELECT count(*) FROM picked) < %(batch_size)s
              OR (a.start_at, a.id) <= (SELECT start_at, id FROM last_picked)
          )
    ) AS skipped_locked_count
FROM expired AS e;

-- name: lock_batch
-- The poison-isolation path, step one: the same selection and the same
-- skipped-row count as expire_batch, but only locking; the rows are then
-- expired one by one so that a rejected row can be left out.
WITH picked AS MATERIALIZED (
    SELECT id, tenant_id, start_at
    FROM availability_slots
    WHERE status = 'Available' AND start_at <= %(as_of)s
    ORDER BY start_at, id
    LIMIT %(batch_size)s
    FOR UPDATE SKIP LOCKED
),
last_picked AS (
    SELECT start_at, id FROM picked ORDER BY start_at DESC, id DESC LIMIT 1
)
SELECT
    coalesce((SELECT array_agg(id ORDER BY start_at, id) FROM picked), '{}') AS ids,
    coalesce((SELECT array_agg(tenant_id ORDER BY start_at, id) FROM picked), '{}')
        AS tenant_ids,
    (
        SELECT count(*)
        FROM availability_slots AS a
        WHERE a.status = 'Available' AND a.start_at <= %(as_of)s
          AND a.id NOT IN (SELECT id FROM picked)
          AND (
              (SELECT count(*) FROM picked) < %(batch_size)s
              OR (a.start_at, a.id) <= (SELECT start_at, id FROM last_picked)
          )
    ) AS skipped_locked_count;

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

-- name: schema_ready
-- Whether the migrations have created the table the worker needs.
SELECT to_regclass('availability_slots') IS NOT NULL;
