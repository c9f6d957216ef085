-- The cycle history (slot_expiration_cycles): one row per cycle, written by
-- the worker once the cycle ended, purged past the retention; read by
-- `status` and `ui`. Only slot_expiration.history.store runs them.

-- name: record_cycle
INSERT INTO slot_expiration_cycles
    (run_id, instance, as_of, started_at, ended_at, outcome, stop_reason, expired_count,
     skipped_locked_count, failed_count, batches, duration_ms, backlog, clock_skew_seconds,
     error_type, sqlstate, error, throttled_seconds, throttled_by)
VALUES
    (%(run_id)s, %(instance)s, %(as_of)s, %(started_at)s, %(ended_at)s, %(outcome)s,
     %(stop_reason)s, %(expired_count)s, %(skipped_locked_count)s, %(failed_count)s,
     %(batches)s, %(duration_ms)s, %(backlog)s, %(clock_skew_seconds)s, %(error_type)s,
     %(sqlstate)s, %(error)s, %(throttled_seconds)s, %(throttled_by)s);

-- name: purge_cycle_history
-- At most `limit` rows older than `cutoff`, by their physical address: a
-- plain delete, so the worker needs no UPDATE on the history (a FOR UPDATE
-- would). Two instances purging at once: the second waits for the first's
-- few rows to commit (milliseconds), then finds them gone. Nothing a cycle
-- reads or locks is touched.
DELETE FROM slot_expiration_cycles
WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM slot_expiration_cycles
    WHERE ended_at < %(cutoff)s
    ORDER BY ended_at
    LIMIT %(limit)s
))
AND ended_at < %(cutoff)s;

-- fragment: cycle_columns
-- A row's as_of reads back only where a date-time can hold it (releases before
-- --as-of was bounded accepted any): NULL otherwise, so one such row never
-- hides the rest of the history, nor the verdict read from it.
h.run_id, h.instance,
CASE WHEN h.as_of BETWEEN '0001-01-02 00:00:00+00' AND '9999-12-30 23:59:59+00'
     THEN h.as_of END AS as_of,
h.started_at, h.ended_at, h.outcome, h.stop_reason,
h.expired_count, h.skipped_locked_count, h.failed_count, h.batches, h.duration_ms, h.backlog,
h.clock_skew_seconds, h.error_type, h.sqlstate, h.error, h.throttled_seconds, h.throttled_by

-- name: history_latest_success
-- The latest successful cycle: one probe of
-- ix_slot_expiration_cycles_success_ended_at (migration 0007), whose
-- predicate this WHERE repeats, however long every cycle since has failed.
SELECT
    -- include: cycle_columns
FROM slot_expiration_cycles AS h
WHERE h.outcome = 'success'
ORDER BY h.ended_at DESC
LIMIT 1;

-- name: history_latest_failure
-- The latest cycle that failed (neither a success nor a pause obeyed): one
-- probe of ix_slot_expiration_cycles_fault_ended_at (migration 0009), whose
-- predicate this WHERE repeats, however long every cycle since has succeeded
-- or been paused.
SELECT
    -- include: cycle_columns
FROM slot_expiration_cycles AS h
WHERE h.outcome NOT IN ('success', 'paused')
ORDER BY h.ended_at DESC
LIMIT 1;

-- name: history_recent
-- The latest cycles of every instance, newest first.
SELECT
    -- include: cycle_columns
FROM slot_expiration_cycles AS h
ORDER BY h.ended_at DESC, h.run_id
LIMIT %(limit)s;

-- name: history_latest_per_instance
-- Each instance's latest cycle that ended since `since`.
SELECT DISTINCT ON (h.instance)
    -- include: cycle_columns
FROM slot_expiration_cycles AS h
WHERE h.ended_at >= %(since)s
ORDER BY h.instance, h.ended_at DESC, h.run_id;

-- name: history_outcomes_since
-- Cycles that ended since `since`, counted per instance and outcome.
SELECT h.instance, h.outcome, count(*) AS cycles
FROM slot_expiration_cycles AS h
WHERE h.ended_at >= %(since)s
GROUP BY h.instance, h.outcome
ORDER BY h.instance, h.outcome;

-- name: history_backlog_since
-- The backlog cycles left, per bucket of `bucket_seconds` the largest in it
-- (every instance counts the same backlog), at the time the cycle that left it
-- ended (not its bucket's start: the chart's words name that cycle's time),
-- oldest first: a chart's points, however many cycles ran.
SELECT DISTINCT ON (floor(extract(epoch FROM h.ended_at) / %(bucket_seconds)s))
       h.ended_at AS at, h.backlog
FROM slot_expiration_cycles AS h
WHERE h.ended_at >= %(since)s AND h.backlog IS NOT NULL
ORDER BY floor(extract(epoch FROM h.ended_at) / %(bucket_seconds)s), h.backlog DESC,
         h.ended_at DESC;

-- name: history_backlog_samples
-- What the backlog's trend is read from (cycle/backlog_trend.py): each
-- cycle that ended since `since`, oldest first, with how it ended, the
-- backlog it left, how many it expired and in how long, and how long its
-- drain waited on the throttle and why (a drain's pace, status/report.py). A range of ix_slot_expiration_cycles_ended_at.
SELECT h.instance, h.ended_at, h.outcome, h.backlog, h.expired_count, h.duration_ms,
       h.throttled_seconds, h.throttled_by
FROM slot_expiration_cycles AS h
WHERE h.ended_at >= %(since)s
ORDER BY h.ended_at, h.run_id;
