-- The deployment's pause (slot_expiration_pauses, migration 0009): one row per
-- pause, the one in force without resumed_at (a unique index allows one). Each
-- cycle reads it in its first transaction; `status` and `ui` read it too;
-- `slot-expiration pause` and `resume` write it, as the operator's role (the
-- worker's role may read it, not write it). Only slot_expiration.pause.store
-- runs them.

-- fragment: pause_columns
paused_at, paused_by, paused_until, reason

-- name: current_pause
-- The pause in force, if any: a probe of ux_slot_expiration_pauses_current.
SELECT
    -- include: pause_columns
FROM slot_expiration_pauses
WHERE resumed_at IS NULL;

-- name: start_pause
-- A pause from now (the database's clock), by the role that runs it, for
-- `for` (NULL: no end given). Nothing when a pause is in force already (the
-- unique index on the one in force): two operators never overwrite each
-- other's reason by accident.
INSERT INTO slot_expiration_pauses (paused_at, paused_by, paused_until, reason)
VALUES (now(), current_user, now() + %(for)s::interval, %(reason)s)
ON CONFLICT ((true)) WHERE resumed_at IS NULL DO NOTHING
RETURNING
    -- include: pause_columns
;

-- name: end_pause
-- The pause in force ends now, by the role that runs it (`resume`, or the
-- first half of `pause --replace`, in its transaction); nothing when none is.
UPDATE slot_expiration_pauses
SET resumed_at = now(), resumed_by = current_user
WHERE resumed_at IS NULL
RETURNING
    -- include: pause_columns
    , resumed_at, resumed_by;

-- name: latest_ended_pause
-- The pause that ended last, if any: what `resume` says when none is in force.
SELECT
    -- include: pause_columns
    , resumed_at, resumed_by
FROM slot_expiration_pauses
WHERE resumed_at IS NOT NULL
ORDER BY resumed_at DESC
LIMIT 1;
