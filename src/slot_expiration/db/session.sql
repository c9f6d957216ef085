-- What every session of the product sends, whatever it does. Run only by
-- slot_expiration.db.session.

-- name: begin_transaction
-- READ COMMITTED whatever the role's or the database's default: the worker's
-- FOR UPDATE SKIP LOCKED and the slot context's guarded updates re-check a row
-- another transaction changed, where a stricter level would fail them instead.
BEGIN ISOLATION LEVEL READ COMMITTED;

-- name: commit_transaction
-- The end of a transaction of one statement, sent in its pipeline
-- (Session.committed_record).
COMMIT;

-- name: transaction_settings
-- The first statement of every transaction: what the product's statements rely
-- on, set for this transaction alone (local: a pooler in transaction mode hands
-- each transaction any server session, on which the URL's `options` may never
-- have arrived: pgbouncer's ignore_startup_parameters drops them), whatever the
-- role, the database or the URL set for the session:
-- - TimeZone, DateStyle and IntervalStyle: how times are compared and read back
--   (a role's TimeZone must never move which slots are due);
-- - the search_path the URL's options ask for (--schema), or the session's own;
-- - the limits, a backstop to the client's own budget (a timeout of '0' means
--   none; NULL keeps the session's own), the read-only mode (only ever set 'on':
--   asking a standby for read-write mode is itself an error), and whether COMMIT
--   waits for the WAL flush (the worker's transactions: options.SynchronousCommit;
--   NULL keeps the server's setting, for every other session). A lost expiry
--   is redone by the next cycle, so the batches need not pay a flush each, nor
--   make the calendar's own commits queue behind theirs. Measured
--   (docs/benchmarks.md, b): a drain of 200,000 in 4.08 s against 4.49 s waiting
--   for each flush, faster in each of five rounds by 0.6-1.3 ms a batch.
-- - client_connection_check_interval (PostgreSQL 14 and later): a statement
--   whose client is gone (a worker killed mid-batch) is aborted within a second,
--   not run to its end; a healthy batch sends its COMMIT with its statement, in
--   one round trip, so without this check the server would still commit it.
-- Set after connecting, so the URL's other `options` are kept.
SELECT
    set_config('TimeZone', 'UTC', true),
    set_config('DateStyle', 'ISO, MDY', true),
    set_config('IntervalStyle', 'postgres', true),
    set_config('search_path', coalesce(%(search_path)s, current_setting('search_path')), true),
    set_config('statement_timeout',
               coalesce(%(statement_timeout)s, current_setting('statement_timeout')), true),
    set_config('idle_in_transaction_session_timeout',
               coalesce(%(idle_timeout)s,
                        current_setting('idle_in_transaction_session_timeout')), true),
    set_config('lock_timeout', coalesce(%(lock_timeout)s, current_setting('lock_timeout')), true),
    set_config('synchronous_commit',
               coalesce(%(synchronous_commit)s, current_setting('synchronous_commit')), true),
    CASE WHEN %(read_only)s THEN set_config('transaction_read_only', 'on', true) END,
    CASE WHEN current_setting('server_version_num')::int >= 140000
         THEN set_config('client_connection_check_interval', '1000', true) END;
