-- The slot context's statements: publish, book-slot, archive, the showcase and
-- the agent's list. Only slot_expiration.slots.store runs them.
-- Statuses come from the state machine (slot_expiration.domain.lifecycle) as
-- parameters; every transition sets updated_at and moves version up by one.

-- name: lock_consultant_publication
-- Serializes publications for one consultant of one tenant until COMMIT, so two
-- of them can never both pass the overlap check with an overlapping pair. The
-- two-key form keeps these locks apart from any single-key advisory lock.
SELECT pg_advisory_xact_lock(%(lock_class)s, hashtext(%(tenant_id)s::text || '/' || %(consultant_id)s::text));

-- name: occupying_slots_in_window
-- The consultant's slots that take time (Available, Booked) and touch the
-- window of a new batch, in no particular order; served by
-- ix_availability_slots_consultant_occupied_end: the batch starts in the
-- future, so only slots ending after now are read, however long the history.
SELECT id, tenant_id, consultant_id, start_at, end_at, status, version, created_at, updated_at
FROM availability_slots
WHERE tenant_id = %(tenant_id)s
  AND consultant_id = %(consultant_id)s
  AND status = ANY (%(occupying)s::text[])
  AND end_at > %(window_start)s
  AND start_at < %(window_end)s;

-- name: insert_published_slots
-- One publication, all or nothing: the rows in the order of the batch.
INSERT INTO availability_slots
    (id, tenant_id, consultant_id, start_at, end_at, status, version, created_at, updated_at)
SELECT b.id, %(tenant_id)s, %(consultant_id)s, b.start_at, b.end_at, %(status)s, 1,
       %(now)s, %(now)s
FROM unnest(%(ids)s::uuid[], %(starts)s::timestamptz[], %(ends)s::timestamptz[])
    WITH ORDINALITY AS b (id, start_at, end_at, position)
ORDER BY b.position
RETURNING id, tenant_id, consultant_id, start_at, end_at, status, version, created_at, updated_at;

-- name: book_slot
-- Book-slot in one conditional UPDATE: the tenant's slot, in a status book-slot
-- may start from, starting at earliest_start or later. A row the worker holds
-- makes this wait for the worker's COMMIT; PostgreSQL then re-checks the
-- conditions on the row as the worker left it (Expired: no row is updated).
UPDATE availability_slots
SET status = %(target)s, updated_at = %(now)s, version = version + 1
WHERE id = %(id)s
  AND tenant_id = %(tenant_id)s
  AND status = ANY (%(sources)s::text[])
  AND start_at >= %(earliest_start)s
RETURNING id, tenant_id, consultant_id, start_at, end_at, status, version, created_at, updated_at;

-- name: transition_slot
-- Any other transition an agent asks for (archive): the tenant's slot, in one of
-- the transition's source statuses.
UPDATE availability_slots
SET status = %(target)s, updated_at = %(now)s, version = version + 1
WHERE id = %(id)s
  AND tenant_id = %(tenant_id)s
  AND status = ANY (%(sources)s::text[])
RETURNING id, tenant_id, consultant_id, start_at, end_at, status, version, created_at, updated_at;

-- name: tenant_slot
-- Why a transition updated nothing. A statement of its own, so (in READ
-- COMMITTED) it sees the row as the transaction that made the UPDATE wait left it.
SELECT id, tenant_id, consultant_id, start_at, end_at, status, version, created_at, updated_at
FROM availability_slots
WHERE id = %(id)s AND tenant_id = %(tenant_id)s;

-- name: showcase_page
-- The public showcase: a tenant's bookable slots starting at earliest_start or
-- later (and before start_before), after the cursor, in (start_at, id) order;
-- served by the partial index ix_availability_slots_showcase.
SELECT id, tenant_id, consultant_id, start_at, end_at, status, version, created_at, updated_at
FROM availability_slots
WHERE tenant_id = %(tenant_id)s
  -- include: showcase_rest
;

-- name: showcase_page_for_consultant
-- The same, for one consultant; served by ix_availability_slots_consultant_start.
SELECT id, tenant_id, consultant_id, start_at, end_at, status, version, created_at, updated_at
FROM availability_slots
WHERE tenant_id = %(tenant_id)s AND consultant_id = %(consultant_id)s
  -- include: showcase_rest
;

-- fragment: showcase_rest
-- A showcase page after the tenant (and consultant): bookable, in the window,
-- after the cursor, in (start_at, id) order. Two statements, not one with an
-- optional consultant: each is planned for its own index.
  AND status = ANY (%(bookable)s::text[])
  AND start_at >= %(earliest_start)s
  AND start_at < %(start_before)s
  AND (start_at, id) > (%(after_start)s, %(after_id)s)
ORDER BY start_at, id
LIMIT %(limit)s

-- name: consultant_slots
-- The agent's list: one consultant's slots in the given statuses starting in
-- [start_from, start_before); served by ix_availability_slots_consultant_start.
SELECT id, tenant_id, consultant_id, start_at, end_at, status, version, created_at, updated_at
FROM availability_slots
WHERE tenant_id = %(tenant_id)s
  AND consultant_id = %(consultant_id)s
  AND status = ANY (%(statuses)s::text[])
  AND start_at >= %(start_from)s
  AND start_at < %(start_before)s
ORDER BY start_at, id
LIMIT %(limit)s;
