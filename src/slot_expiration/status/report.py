"""The status report: gathered from the database in one read-only session."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, TypeVar

from slot_expiration.cycle import BACKLOG_COUNT_CAP
from slot_expiration.domain import SlotStatus
from slot_expiration.store import ApplicationName, FailedSlot, SchemaMissingError, SlotStoreError
from slot_expiration.store.schema_version import HEAD_REVISION, SchemaPosition, position_of
from slot_expiration.store.status_store import (
    SELECTION_INDEX,
    OverdueSlot,
    SchemaState,
    SelectionIndex,
    StatusStore,
    WorkerSession,
)

# How many quarantined slots the report lists (it always gives the total).
FAILED_SHOWN: Final = 20
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


@dataclass(frozen=True, slots=True)
class Quarantine:
    total: int
    latest: tuple[FailedSlot, ...]


@dataclass(frozen=True, slots=True)
class StatusReport:
    as_of: datetime
    latest_revision: str | None
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
                lambda q: {"total": q.total, "shown": [_failed_json(f) for f in q.latest]},
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
        schema = await _read(store, store.schema_state)
        if isinstance(schema, SchemaState) and schema.slot_table_missing:
            raise SchemaMissingError("table availability_slots does not exist")

        async def quarantine() -> Quarantine:
            return Quarantine(*await store.quarantine.listing(failed_shown))

        return StatusReport(
            as_of=as_of,
            latest_revision=HEAD_REVISION,
            schema=schema,
            counts=await _read(store, store.counts_by_status),
            backlog=await _read(store, lambda: store.backlog(as_of, BACKLOG_COUNT_CAP)),
            oldest_overdue=await _read(store, lambda: store.oldest_overdue(as_of)),
            worker_sessions=await _read(store, store.worker_sessions),
            quarantine=await _read(store, quarantine),
            index=await _read(store, lambda: store.selection_index(as_of, batch_size)),
        )


async def _read(store: StatusStore, read: Callable[[], Awaitable[T]]) -> T | Unreadable:
    try:
        async with store.part():
            return await read()
    except SlotStoreError as exc:
        return Unreadable(str(exc), exc.sqlstate)


def _part_json(part: T | Unreadable, render: Callable[[T], Any]) -> Any:
    return part.as_json() if isinstance(part, Unreadable) else render(part)


def _schema_json(schema: SchemaState, latest: str | None) -> dict[str, Any]:
    return {
        "revision": schema.revision,
        "latest": latest,
        "up_to_date": schema.revision == latest,
        # A newer release migrated it: this one runs on it (migrations only add).
        "ahead": position_of(schema.revision, latest or "") is SchemaPosition.AHEAD,
        "contract_mismatches": list(schema.contract_mismatches),
        "missing_tables": list(schema.missing_tables),
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


def _failed_json(failed: FailedSlot) -> dict[str, Any]:
    return {
        "slot_id": str(failed.slot_id),
        "tenant_id": str(failed.tenant_id),
        "attempts": failed.attempts,
        "first_failed_at": failed.first_failed_at.isoformat(),
        "last_failed_at": failed.last_failed_at.isoformat(),
        "next_attempt_at": failed.next_attempt_at.isoformat(),
        "sqlstate": failed.sqlstate,
        "message": failed.message,
    }
