"""`migrate` on a partitioned calendar: by month of start_at with pg_partman (primary key
(id, start_at)), or by hash on id. The worker's index is built partition by partition
(ON ONLY the parent, CONCURRENTLY on each partition, then attached), partitions made
later get it, a cycle expires across them; what adoption could not finish is refused
before anything changes, naming why."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest
from psycopg import sql

from slot_expiration.db.errors import ContractMismatchError
from slot_expiration.db.statements import query
from slot_expiration.embedded import EmbeddedPostgres
from slot_expiration.expiry.store import Selection
from slot_expiration.schema.migrate import head_revision, upgrade
from slot_expiration.status import collect_status
from slot_expiration.status.render import index_text
from slot_expiration.status.store import SelectionIndex
from tests.support.calendar import calendar_snapshot, worker_relations
from tests.support.cycles import run_cycle
from tests.support.partitions import (
    BY_HASH,
    BY_MONTH,
    SELECTION_INDEX,
    Months,
    create_hash_calendar,
    create_monthly_calendar,
    partition_indexes,
    run_partman_maintenance,
)
from tests.support.roles import password_role

pytestmark = pytest.mark.integration

ROWS = 6_000
# Fixed months, so pg_partman's partitions are the same on every run: July 2026 to
# February 2027 (premake: two months ahead of its current month).
FIRST_MONTH = datetime(2026, 7, 1, tzinfo=UTC)
AS_OF = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
LAST = datetime(2027, 1, 31, tzinfo=UTC)
MONTHS = Months(first=FIRST_MONTH, premake=2)
WORKER_SHAPE = "USING btree (start_at, id) WHERE (status = 'Available'::text)"


def _monthly(url: str) -> None:
    create_monthly_calendar(url, ROWS, MONTHS, AS_OF, LAST)


def _due(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM availability_slots WHERE status = 'Available' AND start_at <= %s",
            [AS_OF],
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_calendar_partitioned_by_month_with_pg_partman_is_adopted_partition_by_partition(
    empty_database_url: str,
) -> None:
    _monthly(empty_database_url)
    before = calendar_snapshot(empty_database_url)

    outcome = upgrade(empty_database_url)

    indexes = partition_indexes(empty_database_url)
    assert (outcome.before, outcome.after, outcome.adopted) == (None, head_revision(), True)
    assert indexes.valid is True
    assert indexes.every_partition_indexed, indexes.partitions
    assert len(indexes.partitions) >= 8  # July to February, and pg_partman's default
    assert calendar_snapshot(empty_database_url).without_index(SELECTION_INDEX) == before
    assert any(
        note.startswith(f"built {SELECTION_INDEX}") and "partitions concurrently" in note
        for note in outcome.notes
    ), outcome.notes


def test_partitions_pg_partman_or_a_person_creates_later_get_the_workers_index(
    empty_database_url: str,
) -> None:
    _monthly(empty_database_url)
    upgrade(empty_database_url)
    made = set(partition_indexes(empty_database_url).partitions)

    run_partman_maintenance(empty_database_url, premake=6)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE availability_slots_by_hand PARTITION OF availability_slots "
            "FOR VALUES FROM ('2030-01-01') TO ('2030-02-01')"
        )

    after = partition_indexes(empty_database_url)
    assert len(set(after.partitions) - made) >= 5, after.partitions  # premake, and by hand
    assert after.every_partition_indexed, after.partitions
    assert after.valid is True


async def test_a_cycle_expires_the_due_slots_across_the_partitions(
    empty_database_url: str,
) -> None:
    _monthly(empty_database_url)
    upgrade(empty_database_url)
    due = _due(empty_database_url)

    result = await run_cycle(empty_database_url, batch_size=100, as_of=AS_OF, max_batches=0)

    assert due > 100  # more than one batch, spread over five months
    assert (result.expired_count, _due(empty_database_url)) == (due, 0)


def test_a_batch_on_a_calendar_partitioned_by_month_updates_only_its_own_partitions(
    empty_database_url: str,
) -> None:
    _monthly(empty_database_url)
    upgrade(empty_database_url)
    explain = sql.SQL("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ") + sql.SQL(query("expire_batch"))

    with psycopg.connect(empty_database_url) as conn:
        months = conn.execute(
            "SELECT DISTINCT tableoid::regclass::text FROM (SELECT tableoid FROM "
            "availability_slots WHERE status = 'Available' AND start_at <= %s "
            "ORDER BY start_at, id LIMIT 100) AS batch",
            [AS_OF],
        ).fetchall()
        rows = conn.execute(explain, Selection(AS_OF, AS_OF, 100).parameters()).fetchall()
        conn.rollback()
    plan = [str(row[0]) for row in rows]
    batch_partitions = {str(month[0]) for month in months}

    # The update's scans, one per partition (the lines under it, indented deeper): run in
    # the batch's month, pruned elsewhere.
    start = next(i for i, line in enumerate(plan) if "->  Update on" in line)
    depth = len(plan[start]) - len(plan[start].lstrip())
    update = []
    for line in plan[start + 1 :]:
        if len(line) - len(line.lstrip()) <= depth:
            break
        update.append(line)
    scans = [line for line in update if "Scan" in line and "on availability_slots_" in line]
    run = {line.split(" on ")[-1].split()[0] for line in scans if "never executed" not in line}
    assert len(scans) >= 8, "\n".join(plan)  # July to February, and the default partition
    assert run == batch_partitions, "\n".join(plan)
    assert len(run) < len(scans) / 2  # the oldest due slots: a few months of eight


async def test_status_on_a_partitioned_calendar_sees_the_index_serve_and_counts_every_partition(
    empty_database_url: str,
) -> None:
    _monthly(empty_database_url)
    upgrade(empty_database_url)

    report = await collect_status(empty_database_url, batch_size=500)

    index = report.index
    assert isinstance(index, SelectionIndex)
    assert (index.exists, index.valid, index.serves_selection) == (True, True, True)
    assert f"using {SELECTION_INDEX}" in index.scan
    assert "_start_at_id_idx" not in index.scan  # its partitions' parts go by its name
    assert index.size.rows_estimate == ROWS
    assert index.size.total_bytes > 0
    assert "serves the selection" in index_text(index)


async def test_a_calendar_partitioned_by_hash_on_id_is_adopted_and_expired(
    empty_database_url: str,
) -> None:
    create_hash_calendar(empty_database_url, ROWS, partitions=4, as_of=AS_OF)
    before = calendar_snapshot(empty_database_url)

    outcome = upgrade(empty_database_url)
    after = calendar_snapshot(empty_database_url)
    due = _due(empty_database_url)
    result = await run_cycle(empty_database_url, batch_size=100, as_of=AS_OF, max_batches=0)

    indexes = partition_indexes(empty_database_url)
    assert outcome.adopted
    assert (indexes.valid, indexes.every_partition_indexed) == (True, True)
    assert len(indexes.partitions) == 4
    assert after.without_index(SELECTION_INDEX) == before
    assert due > 100
    assert (result.expired_count, _due(empty_database_url)) == (due, 0)


def test_an_adoption_cut_short_between_partitions_is_finished_by_the_next_migrate(
    empty_database_url: str,
) -> None:
    """As a migrate stopped half-way leaves it: the index on the parent alone, one
    partition's built and attached, one built (valid, not attached), one left INVALID
    by a cancelled CREATE INDEX CONCURRENTLY, the others without."""
    create_hash_calendar(empty_database_url, ROWS, partitions=4, as_of=AS_OF)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        where = "(start_at, id) WHERE status = 'Available'"
        conn.execute(f"CREATE INDEX {SELECTION_INDEX} ON ONLY availability_slots {where}")
        conn.execute(f"CREATE INDEX h0_done ON availability_slots_h0 {where}")
        conn.execute(f"ALTER INDEX {SELECTION_INDEX} ATTACH PARTITION h0_done")
        conn.execute(f"CREATE INDEX h1_built ON availability_slots_h1 {where}")
        conn.execute(f"CREATE INDEX h2_cancelled ON availability_slots_h2 {where}")
        # What a cancelled build leaves (the server's own flag; a test cannot time the
        # cancellation of a build this small).
        conn.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'h2_cancelled'::regclass"
        )

    upgrade(empty_database_url)

    indexes = partition_indexes(empty_database_url)
    assert indexes.valid is True
    assert indexes.partitions["availability_slots_h0"] == "h0_done"
    assert indexes.partitions["availability_slots_h1"] == "h1_built"
    assert indexes.every_partition_indexed, indexes.partitions
    with psycopg.connect(empty_database_url) as conn:
        left = conn.execute("SELECT to_regclass('h2_cancelled')").fetchone()
    assert left == (None,)


REFUSED = [
    pytest.param(
        BY_MONTH.replace("PARTITION BY RANGE (start_at)", "PARTITION BY RANGE (end_at)").replace(
            "PRIMARY KEY (id, start_at)", "PRIMARY KEY (id, end_at)"
        ),
        "availability_slots is partitioned by RANGE (end_at): the worker adopts a table "
        "partitioned by range on start_at or by hash on id",
        id="range on another column",
    ),
    pytest.param(
        BY_HASH.replace("PRIMARY KEY (id)) PARTITION BY HASH (id)", "PRIMARY KEY (id, tenant_id))")
        + " PARTITION BY LIST (tenant_id)",
        "availability_slots is partitioned by LIST (tenant_id): the worker adopts a table "
        "partitioned by range on start_at or by hash on id",
        id="list on tenant",
    ),
    pytest.param(
        BY_MONTH.replace(", PRIMARY KEY (id, start_at)", ""),
        "availability_slots is partitioned by range on start_at: its primary key must be "
        "(id, start_at)",
        id="range on start_at without a primary key",
    ),
    pytest.param(
        BY_HASH + "; CREATE TABLE availability_slots_h0 PARTITION OF availability_slots "
        "FOR VALUES WITH (modulus 2, remainder 0) PARTITION BY HASH (id)",
        "partition availability_slots_h0 is itself partitioned: the worker indexes one level "
        "of partitions",
        id="partitions partitioned again",
    ),
]


@pytest.mark.parametrize(("table", "problem"), REFUSED)
def test_a_partitioned_table_adoption_could_not_finish_is_refused_before_any_change(
    empty_database_url: str, table: str, problem: str
) -> None:
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        conn.execute(table)

    with pytest.raises(ContractMismatchError) as refused:
        upgrade(empty_database_url)

    assert refused.value.problems == (problem,)
    assert worker_relations(empty_database_url) == set()
    assert partition_indexes(empty_database_url).valid is None  # no index on the parent


def test_a_partition_migrate_may_not_index_is_refused_before_any_change(
    empty_database_url: str, pg_server: EmbeddedPostgres
) -> None:
    create_hash_calendar(empty_database_url, 100, partitions=2, as_of=AS_OF)
    with password_role(pg_server) as owner, password_role(pg_server) as other:
        with psycopg.connect(empty_database_url, autocommit=True) as conn:
            for table, role in (
                ("availability_slots", owner),
                ("availability_slots_h0", owner),
                ("availability_slots_h1", other),
            ):
                conn.execute(
                    sql.SQL("ALTER TABLE {} OWNER TO {}").format(
                        sql.Identifier(table), sql.Identifier(role.name)
                    )
                )
            conn.execute(
                sql.SQL("GRANT CREATE ON SCHEMA public TO {}").format(sql.Identifier(owner.name))
            )

        with pytest.raises(ContractMismatchError) as refused:
            upgrade(owner.url_for(empty_database_url))

        assert refused.value.problems == (
            f"migrate runs as {owner.name}, which does not act as the owner of partition "
            f"availability_slots_h1 ({other.name}): run it as that role",
        )
    assert worker_relations(empty_database_url) == set()
