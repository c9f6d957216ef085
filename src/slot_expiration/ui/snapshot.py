"""What the page shows, read in one read-only snapshot, part by part.

A part the role may not read (or that times out) says why in its place; the rest
still shows. The read-only role of `grant --read-only` reads every part.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from slot_expiration.cycle import BACKLOG_COUNT_CAP
from slot_expiration.quarantine import QuarantineListing, QuarantineStore
from slot_expiration.status.report import (
    EXPLAINED_BATCH_SIZE,
    CycleSummary,
    Unreadable,
    read_part,
    summarize_cycles,
)
from slot_expiration.store import ApplicationName
from slot_expiration.store.history_store import BacklogPoint, CycleRecord
from slot_expiration.store.schema_version import HEAD_REVISION
from slot_expiration.store.status_store import SchemaState, SelectionIndex, StatusStore

RECENT_CYCLES: Final = 24
QUARANTINE_SHOWN: Final = 100
CHART_WINDOW: Final = timedelta(hours=6)
CHART_POINTS: Final = 120  # one per 3 minutes over the window: a cycle every 5 shows each
STATEMENT_TIMEOUT_SECONDS: Final = 5.0


@dataclass(frozen=True, slots=True)
class UiSnapshot:
    as_of: datetime
    latest_revision: str | None
    summary: CycleSummary | Unreadable
    recent: tuple[CycleRecord, ...] | Unreadable
    backlog: tuple[BacklogPoint, ...] | Unreadable
    backlog_now: int | Unreadable
    quarantine: QuarantineListing | Unreadable
    schema: SchemaState | Unreadable
    index: SelectionIndex | Unreadable


async def take_snapshot(database_url: str, as_of: datetime) -> UiSnapshot:
    """Everything the page shows, from one read-only transaction of its own."""
    async with StatusStore.connect(
        database_url, ApplicationName.UI, STATEMENT_TIMEOUT_SECONDS
    ) as store:
        bucket = CHART_WINDOW.total_seconds() / CHART_POINTS
        return UiSnapshot(
            as_of=as_of,
            latest_revision=HEAD_REVISION,
            summary=await read_part(store, lambda: summarize_cycles(store, as_of)),
            recent=await read_part(store, lambda: store.history.recent(RECENT_CYCLES)),
            backlog=await read_part(
                store, lambda: store.history.backlog_since(as_of - CHART_WINDOW, bucket)
            ),
            backlog_now=await read_part(store, lambda: store.backlog(as_of, BACKLOG_COUNT_CAP)),
            quarantine=await read_part(
                store, lambda: QuarantineStore(store.session).listing(QUARANTINE_SHOWN)
            ),
            schema=await read_part(store, store.schema_state),
            index=await read_part(
                store, lambda: store.selection_index(as_of, EXPLAINED_BATCH_SIZE)
            ),
        )
