"""slot_expiration_standbys(): where each streaming standby's replay is, for a drain's
throttle (expiry/throttle.py), readable by the worker without pg_read_all_stats; and how long
each cycle waited on that throttle, in its history row (throttled_seconds, throttled_by), for
`status` and the page.

pg_stat_replication shows the standbys to any role, but their positions and lags only to
superusers and members of pg_read_all_stats, a role that also reads every session's
query text (pg_stat_activity). This function, owned by the role that runs migrate and
SECURITY DEFINER, returns the positions and nothing else: a name for each standby, the
primary's WAL position and the standby's replay position in bytes, and its replay_lag.
EXECUTE is revoked from PUBLIC; `grant` gives it to the worker's role. Where the owner
itself cannot see the positions (not a superuser, not in pg_read_all_stats), they come
back NULL and the worker says so (drain.standbys_unseen).

`search_path` is pinned on the function (pg_catalog, then pg_temp last) so that no
caller's objects can stand in for the catalog's.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-07
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

FUNCTION = "slot_expiration_standbys()"


def upgrade() -> None:
    # CREATE OR REPLACE: the same function whatever ran before; the schema is the one
    # migrate runs in (the product's tables' own).
    op.execute(
        """
        CREATE OR REPLACE FUNCTION slot_expiration_standbys()
        RETURNS TABLE (name text, wal_bytes bigint, replay_bytes bigint,
                       replay_lag_seconds double precision)
        LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, pg_temp
        AS $$
            SELECT concat_ws('@', r.application_name, coalesce(host(r.client_addr), 'local'),
                             r.pid),
                   pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint,
                   pg_wal_lsn_diff(r.replay_lsn, '0/0')::bigint,
                   extract(epoch FROM r.replay_lag)::double precision
            FROM pg_stat_replication AS r
            WHERE r.state = 'streaming'
        $$
        """
    )
    op.execute(f"REVOKE ALL ON FUNCTION {FUNCTION} FROM PUBLIC")
    # A constant default: PostgreSQL adds the column without rewriting the table.
    op.execute(
        "ALTER TABLE slot_expiration_cycles"
        " ADD COLUMN IF NOT EXISTS throttled_seconds double precision NOT NULL DEFAULT 0,"
        " ADD COLUMN IF NOT EXISTS throttled_by text"
    )


def downgrade() -> None:
    op.execute(
        "ALTER TABLE slot_expiration_cycles"
        " DROP COLUMN IF EXISTS throttled_by, DROP COLUMN IF EXISTS throttled_seconds"
    )
    op.execute(f"DROP FUNCTION IF EXISTS {FUNCTION}")
