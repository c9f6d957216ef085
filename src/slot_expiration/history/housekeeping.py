"""What the worker writes once a cycle ended: its row in the history, and, past the
retention, the purge of old history rows and of quarantine entries that ended.

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
from slot_expiration.quarantine import QuarantineStore

# The history write is a few milliseconds of work: a server that takes longer than
# the write's own bound is in trouble, and the worker moves on without the row.
LIMITS: Final = TransactionLimits(
    statement_timeout_ms=milliseconds(WRITE_TIMEOUT_SECONDS),
    lock_timeout_ms=milliseconds(DEFAULT_LOCK_TIMEOUT_SECONDS),
    idle_in_transaction_timeout_ms=milliseconds(WRITE_TIMEOUT_SECONDS),
)


@dataclass(frozen=True, slots=True)
class Housekeeping:
    """Where to write, and how long the history and ended quarantine entries are kept."""

    database_url: str
    retention: timedelta
    limits: TransactionLimits = LIMITS


@dataclass(frozen=True, slots=True)
class Purged:
    cycles: int
    quarantine_entries: int


async def record_cycle(housekeeping: Housekeeping, cycle: CycleRecord) -> Purged:
    """Write the cycle's row, then purge what ended before the retention (at most a
    small batch of each per call: one row is written per cycle, so it keeps up)."""
    cutoff = cycle.ended_at - housekeeping.retention
    async with HistoryStore.connect(housekeeping.database_url, housekeeping.limits) as history:
        async with history.transaction():
            await history.record(cycle)
        async with history.transaction():
            cycles = await history.purge(cutoff)
        quarantine = QuarantineStore(history.session)
        async with history.transaction():
            entries = await quarantine.purge_ended(cutoff)
    return Purged(cycles, entries)
