"""What `status`, `status --check` and the page read of the cycle history is served by its
indexes however long the history: a cycle a second for 14 days (1,209,600 rows), with no
failure at all, and with every cycle of the last three hours failed. Each statement is
EXPLAINed (ANALYZE, BUFFERS): no whole scan of the history, and a bounded number of pages read,
whatever the history holds beyond what the statement asks for."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from psycopg import sql

from slot_expiration.db.statements import query
from slot_expiration.expiry.backlog_trend import trend_window
from slot_expiration.status.report import RECENT_WINDOW, live_span
from slot_expiration.ui.snapshot import CHART_POINTS, CHART_WINDOW, RECENT_CYCLES
from tests.support.database import SlotDatabase

pytestmark = pytest.mark.integration

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
INTERVAL_SECONDS = 1.0
DAYS = 14
# Test-side SQL: a cycle a second for 14 days, written as the worker writes them: each a
# success leaving a small backlog, but those since `failing_since`, failed.
HISTORY = """
INSERT INTO slot_expiration_cycles
    (run_id, instance, as_of, started_at, ended_at, outcome, stop_reason, expired_count,
     skipped_locked_count, failed_count, batches, duration_ms, backlog, error_type, sqlstate,
     error)
SELECT gen_random_uuid(), 'worker-a:4711', t, t, t + interval '40 ms',
       CASE WHEN failed THEN 'failed' ELSE 'success' END,
       CASE WHEN failed THEN NULL ELSE 'drained' END,
       3, 0, 0, 1, 40, CASE WHEN failed THEN NULL ELSE 3 END,
       CASE WHEN failed THEN 'TransientStoreError' END, CASE WHEN failed THEN '08001' END,
       CASE WHEN failed THEN 'connection refused' END
FROM generate_series(%(now)s - %(days)s * interval '1 day', %(now)s, interval '1 second') AS t,
     LATERAL (SELECT t >= %(failing_since)s AS failed) AS f
"""
# Pages a statement may read: what it asks for (the chart's six hours: 21,600 rows) and the
# indexes' way to it, never the history's 14 days.
MAX_PAGES = 2_000


def _statements() -> dict[str, dict[str, Any]]:
    """Every statement of the history the report and the page run, with what they ask."""
    window = trend_window(INTERVAL_SECONDS)
    return {
        "history_latest_success": {},
        "history_latest_failure": {},
        "history_recent": {"limit": RECENT_CYCLES},
        "history_latest_per_instance": {"since": NOW - live_span(INTERVAL_SECONDS)},
        "history_outcomes_since": {"since": NOW - RECENT_WINDOW},
        "history_backlog_since": {
            "since": NOW - CHART_WINDOW,
            "bucket_seconds": CHART_WINDOW.total_seconds() / CHART_POINTS,
        },
        "history_backlog_samples": {"since": NOW - 2 * window},
    }


async def _pages_read(db: SlotDatabase) -> dict[str, int | str]:
    """Each statement's pages read (shared buffers hit and read); its plan when it scans the
    whole history."""
    found: dict[str, int | str] = {}
    for name, params in _statements().items():
        explain = sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ") + sql.SQL(query(name))
        cursor = await db.conn.execute(explain, params)
        (plan,) = (await cursor.fetchone()) or ([],)
        top = plan[0]["Plan"]
        text = str(plan)
        if "'Seq Scan'" in text and "slot_expiration_cycles" in text:
            found[name] = text
        else:
            found[name] = int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"])
    return found


@pytest.mark.parametrize("failing_hours", [0, 3], ids=["never failed", "failing for 3 hours"])
async def test_the_histories_reads_are_served_by_its_indexes_at_a_cycle_a_second_for_14_days(
    db: SlotDatabase, failing_hours: int
) -> None:
    failing_since = NOW - timedelta(hours=failing_hours) + timedelta(seconds=1)
    await db.conn.execute(HISTORY, {"now": NOW, "days": DAYS, "failing_since": failing_since})
    await db.execute("ANALYZE slot_expiration_cycles")

    read = await _pages_read(db)

    scanned = {name: plan for name, plan in read.items() if isinstance(plan, str)}
    assert scanned == {}
    pages = {name: count for name, count in read.items() if isinstance(count, int)}
    assert max(pages.values()) < MAX_PAGES, pages
    # The latest of each kind is one probe of its index, whatever lies between.
    assert pages["history_latest_success"] < 20, pages
    assert pages["history_latest_failure"] < 20, pages
