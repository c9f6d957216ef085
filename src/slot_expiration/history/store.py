"""The cycle history: one row per cycle, written by the worker, read by `status` and `ui`.

Statements: history.sql. The worker writes on a short session of its own once a
cycle ended (telemetry/history.py); the readers use the status session.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import asdict, dataclass
from dataclasses import fields as dataclass_fields
from datetime import datetime, timedelta
from typing import Any, Final, Self
from uuid import UUID

from slot_expiration.db.errors import StoreError
from slot_expiration.db.session import (
    ApplicationName,
    Session,
    SessionSettings,
    Transaction,
    TransactionLimits,
)
from slot_expiration.domain import CycleOutcome
from slot_expiration.expiry.result import CycleResult

# A purge deletes at most this many rows per transaction: one row per cycle per
# instance is written, so one purge per cycle keeps up with any number of them.
PURGE_BATCH: Final = 500


@dataclass(frozen=True, slots=True)
class CycleRecord:
    """One cycle of one worker instance. Counts cover the batches that committed."""

    run_id: UUID
    instance: str
    as_of: datetime | None  # None: read back out of a date-time's range (history.sql)
    started_at: datetime
    ended_at: datetime
    outcome: CycleOutcome
    stop_reason: str | None
    expired_count: int
    skipped_locked_count: int
    failed_count: int
    batches: int
    duration_ms: float
    backlog: int | None
    clock_skew_seconds: float | None = None
    error_type: str | None = None
    sqlstate: str | None = None
    error: str | None = None
    # How long the cycle's drain waited on its throttle, and for what mostly (throttle.py).
    throttled_seconds: float = 0.0
    throttled_by: str | None = None

    @classmethod
    def from_columns(cls, *, outcome: str, **columns: Any) -> Self:
        """A row of the statements that include cycle_columns, by column name."""
        return cls(outcome=CycleOutcome(outcome), **columns)

    @classmethod
    def of(  # noqa: PLR0913 - the result, and the five facts only the writer knows
        cls,
        result: CycleResult,
        *,
        instance: str,
        ended_at: datetime,
        shift: timedelta,
        error: BaseException | None,
        error_text: str | None,
    ) -> Self:
        """The history's row of a cycle: every field the result shares with the row, as
        the result has it (its start moved by `shift`, onto the database's clock), and
        who ran it, when it ended and why it failed."""
        shared = {
            field.name: getattr(result, field.name)
            for field in dataclass_fields(cls)
            if hasattr(result, field.name)
        }
        return cls(
            **shared
            | {
                "started_at": result.started_at - shift,
                "stop_reason": result.stop_reason.value if result.stop_reason else None,
                "throttled_by": result.throttled_by.value if result.throttled_by else None,
                "instance": instance,
                "ended_at": ended_at,
                "error_type": None if error is None else type(error).__name__,
                "sqlstate": error.sqlstate if isinstance(error, StoreError) else None,
                "error": error_text,
            }
        )

    def parameters(self) -> dict[str, Any]:
        return asdict(self) | {"outcome": self.outcome.value}


@dataclass(frozen=True, slots=True)
class OutcomeCount:
    instance: str
    outcome: CycleOutcome
    cycles: int

    @classmethod
    def from_columns(cls, *, instance: str, outcome: str, cycles: int) -> Self:
        return cls(instance, CycleOutcome(outcome), cycles)


@dataclass(frozen=True, slots=True)
class BacklogPoint:
    """The largest backlog cycles left within a bucket of time, and when the cycle that
    left it ended (`at`)."""

    at: datetime
    backlog: int


@dataclass(frozen=True, slots=True)
class BacklogRow:
    """A cycle as the backlog's trend and the drain's pace read it: whose, when, how it
    ended, what it left (None: not counted), how many it expired and in how long, and what
    its drain waited on the throttle."""

    instance: str
    ended_at: datetime
    outcome: CycleOutcome
    backlog: int | None
    expired_count: int
    duration_ms: float
    throttled_seconds: float = 0.0  # what its drain waited on the throttle
    throttled_by: str | None = None  # the reason it waited longest for

    @property
    def started_at(self) -> datetime:
        return self.ended_at - timedelta(milliseconds=self.duration_ms)

    @classmethod
    def from_columns(cls, *, outcome: str, **columns: Any) -> Self:
        return cls(outcome=CycleOutcome(outcome), **columns)


class HistoryStore:
    """slot_expiration_cycles, on the session (and in the transaction) it is given."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @classmethod
    @asynccontextmanager
    async def connect(cls, database_url: str, limits: TransactionLimits) -> AsyncIterator[Self]:
        """The worker's session for writing the history, autocommit: the record and
        the purge are transactions of their own (see `transaction`)."""
        settings = SessionSettings(
            ApplicationName.HISTORY,
            limits=limits,
            connect_timeout_seconds=max(1, round(limits.statement_timeout_ms / 1000)),
            autocommit=True,
        )
        async with Session.open(database_url, settings) as session:
            yield cls(session)

    def transaction(self) -> AbstractAsyncContextManager[Transaction]:
        return self.session.transaction()

    async def record(self, cycle: CycleRecord) -> None:
        await self.session.execute("record_cycle", cycle.parameters())

    async def purge(self, cutoff: datetime, limit: int = PURGE_BATCH) -> int:
        """Delete up to `limit` cycles that ended before `cutoff`; returns how many."""
        params = {"cutoff": cutoff, "limit": limit}
        return await self.session.execute("purge_cycle_history", params)

    async def latest_success(self) -> CycleRecord | None:
        found = await self._cycles("history_latest_success", {})
        return found[0] if found else None

    async def latest_failure(self) -> CycleRecord | None:
        """The latest cycle that failed, however it failed (a paused one did not)."""
        found = await self._cycles("history_latest_failure", {})
        return found[0] if found else None

    async def latest(self) -> CycleRecord | None:
        """The latest cycle of any instance, however it ended."""
        found = await self.recent(1)
        return found[0] if found else None

    async def recent(self, limit: int) -> tuple[CycleRecord, ...]:
        return await self._cycles("history_recent", {"limit": limit})

    async def latest_per_instance(self, since: datetime) -> tuple[CycleRecord, ...]:
        return await self._cycles("history_latest_per_instance", {"since": since})

    async def _cycles(self, name: str, params: dict[str, Any]) -> tuple[CycleRecord, ...]:
        return tuple(await self.session.records(name, CycleRecord.from_columns, params))

    async def outcomes_since(self, since: datetime) -> tuple[OutcomeCount, ...]:
        params = {"since": since}
        return tuple(
            await self.session.records("history_outcomes_since", OutcomeCount.from_columns, params)
        )

    async def backlog_since(
        self, since: datetime, bucket_seconds: float
    ) -> tuple[BacklogPoint, ...]:
        params = {"since": since, "bucket_seconds": bucket_seconds}
        return tuple(await self.session.records("history_backlog_since", BacklogPoint, params))

    async def backlog_samples(self, since: datetime) -> tuple[BacklogRow, ...]:
        """Every cycle that ended since `since`, oldest first, as the backlog's trend reads it."""
        params = {"since": since}
        return tuple(
            await self.session.records("history_backlog_samples", BacklogRow.from_columns, params)
        )
