-- What every session of the product sends, whatever it does. Run only by
-- slot_expiration.store.session.

-- name: begin_transaction
BEGIN;

-- name: transaction_limits
-- The first statement of a bounded transaction: local settings, so they hold
-- on whichever server session a pooler in transaction mode hands out and
-- never outlive the transaction; set after connecting, so the URL's own
-- `options` are kept. A timeout of '0' means none.
SELECT
    set_config('statement_timeout', %(statement_timeout)s, true),
    set_config('idle_in_transaction_session_timeout', %(idle_timeout)s, true),
    set_config('lock_timeout', %(lock_timeout)s, true);

-- name: read_only_transaction_limits
-- The same for a transaction that only reads (status, probes). Only ever set
-- 'on': asking a standby for read-write mode is itself an error.
SELECT
    set_config('transaction_read_only', 'on', true),
    set_config('statement_timeout', %(statement_timeout)s, true),
    set_config('idle_in_transaction_session_timeout', %(idle_timeout)s, true),
    set_config('lock_timeout', %(lock_timeout)s, true);

-- name: transaction_limits_and_commit
-- The worker's own transactions: the same limits, and whether COMMIT waits for
-- the WAL flush (`off` by default, options.SynchronousCommit). A lost expiry is
-- redone by the next cycle, so the batches need not pay a flush each, nor make
-- the calendar's own commits queue behind theirs; set locally, the calendar's
-- transactions and every other session keep the server's setting.
-- Measured (docs/benchmarks.md, b): a drain of 200,000 in 4.08 s against 4.49 s
-- waiting for each flush, faster in each of five rounds by 0.6-1.3 ms a batch;
-- the bookings' p99 beside it 5.29 against 5.55 ms (d): a little, not the most.
SELECT
    set_config('statement_timeout', %(statement_timeout)s, true),
    set_config('idle_in_transaction_session_timeout', %(idle_timeout)s, true),
    set_config('lock_timeout', %(lock_timeout)s, true),
    set_config('synchronous_commit', %(synchronous_commit)s, true);
