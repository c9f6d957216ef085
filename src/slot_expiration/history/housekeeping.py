"""What the worker writes once a cycle ended: its row in the history, and, past the
retention, the purge of old history rows.

It runs on a short session of its own (application_name slot-expiration-history),
opened after the cycle's own was closed: a cycle that failed may have left no usable
connection behind. Each step is its own small transaction, so the purge never holds
anything a cycle needs, and a failed purge never loses the record.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from slot_expiration.db.session import TransactionLimits, milliseconds
from slot_expiration.history.sink import WRITE_TIMEOUT_SECONDS
from slot_expiration.history.store import CycleRecord, HistoryStore
from slot_expiration.options.settings import DEFAULT_LOCK_TIMEOUT_SECONDS

# The history write is a few milliseconds of work: a server that takes longer than
# the write's own bound is in trouble, and the worker moves on without the row.
LIMITS: Final = TransactionLimits(
    statement_timeout_ms=milliseconds(WRITE_TIMEOUT_SECONDS),
    lock_timeout_ms=milliseconds(DEFAULT_LOCK_TIMEOUT_SECONDS),
    idle_in_transaction_timeout_ms=milliseconds(WRITE_TIMEOUT_SECONDS),
)


@dataclass(frozen=True, slots=True)
class Housekeeping:
    """Where to write, and how long the history is kept."""

    database_url: str
    retention: timedelta
    limits: TransactionLimits = LIMITS


async def record_cycle(housekeeping: Housekeeping, cycle: CycleRecord) -> int:
    """Write the cycle's row, then purge the rows older than the retention (at most a small
    batch per call: one row is written per cycle, so it keeps up); how many went. (The
    quarantine's ended entries are the cycle's own to purge, at its tail.)"""
    cutoff = cycle.ended_at - housekeeping.retention
    async with HistoryStore.connect(housekeeping.database_url, housekeeping.limits) as history:
        async with history.transaction():
            await history.record(cycle)
        async with history.transaction():
            return await history.purge(cutoff)
