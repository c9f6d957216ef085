"""What the page shows, read in one read-only snapshot, part by part.

The health the page judges first is read by status.report.read_health, as `status --check`
reads it: the same parts on the database's clock, so the page's verdict is the check's. A
part the role may not read (or that times out) says why in its place; the rest still
shows. The read-only role of `grant --read-only` reads every part. Every read is a probe or
a short range of an index, however long the history (tests/integration/test_page_plans.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Final

from slot_expiration.db import ApplicationName
from slot_expiration.history.store import BacklogPoint, CycleRecord
from slot_expiration.options.listen_address import ListenAddress
from slot_expiration.status.report import (
    EXPLAINED_BATCH_SIZE,
    Health,
    Unreadable,
    asking_replicas,
    read_health,
    read_part,
    refuse_a_slot_table_elsewhere,
)
from slot_expiration.status.store import SelectionIndex, StatusStore

# The latest cycles read for the table, newest first; identical failures in a row fold into
# one row (page.py), so a long outage is one row and the rows before it still show.
RECENT_CYCLES: Final = 500
QUARANTINE_SHOWN: Final = 100
CHART_WINDOW: Final = timedelta(hours=6)
CHART_POINTS: Final = 120  # one per 3 minutes over the window: a cycle every 5 shows each
STATEMENT_TIMEOUT_SECONDS: Final = 5.0


@dataclass(frozen=True, slots=True)
class UiSnapshot:
    health: Health
    recent: tuple[CycleRecord, ...] | Unreadable
    backlog: tuple[BacklogPoint, ...] | Unreadable
    index: SelectionIndex | Unreadable


async def take_snapshot(
    database_url: str, interval_seconds: float, replicas: Sequence[ListenAddress] = ()
) -> UiSnapshot:
    """Everything the page shows, from one read-only transaction of its own, and what the
    `replicas` say of themselves (their /readyz), asked meanwhile."""
    snapshot, answers = await asking_replicas(
        replicas, lambda: _read(database_url, interval_seconds)
    )
    return replace(snapshot, health=replace(snapshot.health, replicas=answers))


async def _read(database_url: str, interval_seconds: float) -> UiSnapshot:
    async with StatusStore.connect(
        database_url, ApplicationName.UI, STATEMENT_TIMEOUT_SECONDS
    ) as store:
        health = await read_health(store, interval_seconds, QUARANTINE_SHOWN)
        await refuse_a_slot_table_elsewhere(health, database_url)
        as_of = health.as_of
        bucket = CHART_WINDOW.total_seconds() / CHART_POINTS
        return UiSnapshot(
            health=health,
            recent=await read_part(store, lambda: store.history.recent(RECENT_CYCLES)),
            backlog=await read_part(
                store, lambda: store.history.backlog_since(as_of - CHART_WINDOW, bucket)
            ),
            index=await read_part(
                store, lambda: store.selection_index(as_of, EXPLAINED_BATCH_SIZE)
            ),
        )
