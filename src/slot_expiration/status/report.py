"""The status report: gathered from the database in one read-only session."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, TypeVar

from slot_expiration.cycle import BACKLOG_COUNT_CAP
from slot_expiration.domain import CycleOutcome, SlotStatus
from slot_expiration.options import CycleOptions
from slot_expiration.quarantine import QuarantineListing, QuarantineStore
from slot_expiration.store import ApplicationName, SchemaMissingError, StoreError
from slot_expiration.store.history_store import BacklogPoint, CycleRecord, OutcomeCount
from slot_expiration.store.schema_version import HEAD_REVISION, SchemaPosition, position_of
from slot_expiration.store.status_store import (
    SELECTION_INDEX,
    OverdueSlot,
    SchemaState,
    SelectionIndex,
    StatusStore,
    WorkerSession,
)

# The selection's plan is shown for the worker's default batch: `status` and `ui` read
# no worker option (each command reads only its own).
EXPLAINED_BATCH_SIZE: Final[int] = CycleOptions.model_fields["batch_size"].default
# How many quarantined slots the report lists (it always gives the total).
FAILED_SHOWN: Final = 20
# "Cycles in the last hour": the window of the alerts' own `[1h]` ranges.
RECENT_WINDOW: Final = timedelta(hours=1)
# How far back the backlog's trend is read: SlotExpirationBacklogHigh's `[30m:]`.
BACKLOG_TREND_WINDOW: Final = timedelta(minutes=30)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A part of the report the database refused to give (a role without the
    privilege, a statement timeout): said in its place; the rest still prints."""

    reason: str
    sqlstate: str | None

    def __str__(self) -> str:
        code = f" (SQLSTATE {self.sqlstate})" if self.sqlstate else ""
        return f"cannot read: {self.reason}{code}"

    def as_json(self) -> dict[str, Any]:
        return {"unreadable": self.reason, "sqlstate": self.sqlstate}


Quarantine = QuarantineListing


@dataclass(frozen=True, slots=True)
class CycleSummary:
    """What the history says: the last success and failure of any instance, and the
    cycles of the last hour, per instance and outcome, with each one's latest."""

    last_success: CycleRecord | None
    last_failure: CycleRecord | None
    recent: tuple[OutcomeCount, ...]
    latest_per_instance: tuple[CycleRecord, ...]
    # The backlog BACKLOG_TREND_WINDOW ago (or at the history's start): its trend.
    backlog_before: BacklogPoint | None = None

    def recent_total(self) -> int:
        return sum(count.cycles for count in self.recent)

    def recent_by_outcome(self) -> dict[CycleOutcome, int]:
        totals: dict[CycleOutcome, int] = {}
        for count in self.recent:
            totals[count.outcome] = totals.get(count.outcome, 0) + count.cycles
        return totals

    def recent_by_instance(self) -> dict[str, dict[CycleOutcome, int]]:
        instances: dict[str, dict[CycleOutcome, int]] = {}
        for count in self.recent:
            instances.setdefault(count.instance, {})[count.outcome] = count.cycles
        return instances

    def needing_a_person(self) -> tuple[CycleRecord, ...]:
        """Instances whose latest cycle failed on what only a person can fix."""
        return tuple(c for c in self.latest_per_instance if c.outcome.needs_a_person)


@dataclass(frozen=True, slots=True)
class StatusReport:
    as_of: datetime
    latest_revision: str | None
    cycles: CycleSummary | Unreadable
    schema: SchemaState | Unreadable
    counts: dict[SlotStatus, int] | Unreadable
    backlog: int | Unreadable
    oldest_overdue: OverdueSlot | Unreadable | None
    worker_sessions: tuple[WorkerSession, ...] | Unreadable
    quarantine: Quarantine | Unreadable
    index: SelectionIndex | Unreadable

    @property
    def backlog_capped(self) -> bool:
        """The backlog is at least `backlog`: the count stopped at the cap."""
        return isinstance(self.backlog, int) and self.backlog >= BACKLOG_COUNT_CAP

    def overdue_seconds(self) -> float | None:
        if not isinstance(self.oldest_overdue, OverdueSlot):
            return None
        return (self.as_of - self.oldest_overdue.start_at).total_seconds()

    def as_json(self) -> dict[str, Any]:
        return {
            "as_of": self.as_of.isoformat(),
            "cycles": _part_json(self.cycles, lambda c: _cycles_json(c, self.as_of)),
            "schema": _part_json(self.schema, lambda s: _schema_json(s, self.latest_revision)),
            "counts": _part_json(self.counts, lambda c: {k.value: n for k, n in c.items()}),
            "backlog": _part_json(
                self.backlog,
                lambda n: {"count": n, "capped": self.backlog_capped, "cap": BACKLOG_COUNT_CAP},
            ),
            "oldest_overdue": _part_json(
                self.oldest_overdue, lambda slot: _overdue_json(slot, self.overdue_seconds())
            ),
            "worker_sessions": _part_json(self.worker_sessions, _sessions_json),
            "failed_slots": _part_json(
                self.quarantine,
                lambda q: {
                    "total": q.total,
                    "parked": q.parked,
                    "shown": [f.as_json() for f in q.latest],
                },
            ),
            "index": _part_json(self.index, _index_json),
        }


async def collect_status(
    database_url: str, as_of: datetime, batch_size: int, failed_shown: int = FAILED_SHOWN
) -> StatusReport:
    """The report, part by part in one snapshot; a part the role may not read says why.

    Raises SchemaMissingError when there is no slot table at all: nothing to report.
    """
    async with StatusStore.connect(database_url, ApplicationName.STATUS) as store:
        schema = await read_part(store, store.schema_state)
        if isinstance(schema, SchemaState) and schema.slot_table_missing:
            raise SchemaMissingError("table availability_slots does not exist")

        async def quarantine() -> Quarantine:
            return await QuarantineStore(store.session).listing(failed_shown)

        return StatusReport(
            as_of=as_of,
            latest_revision=HEAD_REVISION,
            cycles=await read_part(store, lambda: summarize_cycles(store, as_of, trend=True)),
            schema=schema,
            counts=await read_part(store, store.counts_by_status),
            backlog=await read_part(store, lambda: store.backlog(as_of, BACKLOG_COUNT_CAP)),
            oldest_overdue=await read_part(store, lambda: store.oldest_overdue(as_of)),
            worker_sessions=await read_part(store, store.worker_sessions),
            quarantine=await read_part(store, quarantine),
            index=await read_part(store, lambda: store.selection_index(as_of, batch_size)),
        )


async def summarize_cycles(
    store: StatusStore, as_of: datetime, *, trend: bool = False
) -> CycleSummary:
    """The history's summary; with `trend`, also the backlog's point BACKLOG_TREND_WINDOW
    ago (what `status --check` judges the backlog by; the page has its own chart)."""
    since = as_of - RECENT_WINDOW
    before = await store.history.backlog_before(as_of - BACKLOG_TREND_WINDOW) if trend else None
    return CycleSummary(
        last_success=await store.history.latest([CycleOutcome.SUCCESS]),
        last_failure=await store.history.latest(
            [outcome for outcome in CycleOutcome if outcome is not CycleOutcome.SUCCESS]
        ),
        recent=await store.history.outcomes_since(since),
        latest_per_instance=await store.history.latest_per_instance(since),
        backlog_before=before,
    )


async def read_part(store: StatusStore, read: Callable[[], Awaitable[T]]) -> T | Unreadable:
    try:
        async with store.part():
            return await read()
    except StoreError as exc:
        return Unreadable(str(exc), exc.sqlstate)


def _part_json(part: T | Unreadable, render: Callable[[T], Any]) -> Any:
    return part.as_json() if isinstance(part, Unreadable) else render(part)


def _schema_json(schema: SchemaState, latest: str | None) -> dict[str, Any]:
    return {
        "revision": schema.revision,
        "latest": latest,
        "up_to_date": schema.revision == latest and schema.fits,
        # A newer release migrated it: this one runs on it (migrations only add).
        "ahead": position_of(schema.revision, latest or "") is SchemaPosition.AHEAD,
        "contract_mismatches": list(schema.contract_mismatches),
        "missing_tables": list(schema.missing_tables),
        "worker_mismatches": list(schema.worker_mismatches),
    }


def _sessions_json(sessions: tuple[WorkerSession, ...]) -> dict[str, Any]:
    return {
        "application_name": ApplicationName.WORKER,
        "count": len(sessions),
        "sessions": [_session_json(session) for session in sessions],
    }


def _index_json(index: SelectionIndex) -> dict[str, Any]:
    return {
        "name": SELECTION_INDEX,
        "exists": index.exists,
        "valid": index.valid,
        "table": index.table,
        "definition": index.definition,
        "selection_scan": index.scan,
        "serves_selection": index.serves_selection,
        "too_small_to_judge": index.too_small_to_judge,
        "table_rows_counted": index.size.counted,
        "table_rows_count_cap": index.size.cap,
        "table_rows_estimate": index.size.rows_estimate,
        "table_bytes": index.size.total_bytes,
    }


def _cycles_json(cycles: CycleSummary, as_of: datetime) -> dict[str, Any]:
    return {
        "last_success": cycle_json(cycles.last_success, as_of),
        "last_failure": cycle_json(cycles.last_failure, as_of),
        "last_hour": {
            "total": cycles.recent_total(),
            "by_outcome": {o.value: n for o, n in cycles.recent_by_outcome().items()},
            "by_instance": {
                instance: {o.value: n for o, n in outcomes.items()}
                for instance, outcomes in cycles.recent_by_instance().items()
            },
        },
        "needing_a_person": [c.instance for c in cycles.needing_a_person()],
        "backlog_before": _backlog_point_json(cycles.backlog_before),
    }


def _backlog_point_json(point: BacklogPoint | None) -> dict[str, Any] | None:
    return None if point is None else {"ended_at": point.at.isoformat(), "backlog": point.backlog}


def cycle_json(cycle: CycleRecord | None, as_of: datetime) -> dict[str, Any] | None:
    if cycle is None:
        return None
    return {
        "run_id": str(cycle.run_id),
        "instance": cycle.instance,
        "outcome": cycle.outcome.value,
        "ended_at": cycle.ended_at.isoformat(),
        "age_seconds": round((as_of - cycle.ended_at).total_seconds(), 3),
        "duration_ms": round(cycle.duration_ms, 3),
        "expired_count": cycle.expired_count,
        "failed_count": cycle.failed_count,
        "batches": cycle.batches,
        "backlog": cycle.backlog,
        "stop_reason": cycle.stop_reason,
        "error_type": cycle.error_type,
        "sqlstate": cycle.sqlstate,
        "error": cycle.error,
    }


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _overdue_json(slot: OverdueSlot | None, age_seconds: float | None) -> dict[str, Any] | None:
    if slot is None or age_seconds is None:
        return None
    return {
        "slot_id": str(slot.id),
        "tenant_id": str(slot.tenant_id),
        "start_at": slot.start_at.isoformat(),
        "age_seconds": round(age_seconds, 3),
        "quarantined": slot.quarantined,
    }


def _session_json(session: WorkerSession) -> dict[str, Any]:
    return {
        "pid": session.pid,
        "state": session.state,
        "backend_start": _iso(session.backend_start),
        "xact_start": _iso(session.xact_start),
        "state_change": _iso(session.state_change),
        "wait_event_type": session.wait_event_type,
        "wait_event": session.wait_event,
    }
