"""The status report: gathered from the database in one read-only session."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from slot_expiration.cycle import BACKLOG_COUNT_CAP
from slot_expiration.domain import SlotStatus
from slot_expiration.store.schema_version import HEAD_REVISION
from slot_expiration.store.slot_store import APPLICATION_NAME
from slot_expiration.store.status_store import (
    SELECTION_INDEX,
    FailedSlot,
    OverdueSlot,
    SelectionIndex,
    StatusStore,
    WorkerSession,
)

# The status command's own session, never counted among the worker's.
STATUS_APPLICATION_NAME: Final = "slot-expiration-status"
# How many quarantined slots the report lists (it always gives the total).
FAILED_SHOWN: Final = 20


@dataclass(frozen=True, slots=True)
class StatusReport:
    as_of: datetime
    schema_revision: str | None
    latest_revision: str | None
    counts: dict[SlotStatus, int]
    backlog: int
    oldest_overdue: OverdueSlot | None
    worker_sessions: tuple[WorkerSession, ...]
    failed_total: int
    failed: tuple[FailedSlot, ...]
    index: SelectionIndex

    @property
    def backlog_capped(self) -> bool:
        """The backlog is at least `backlog`: the count stopped at the cap."""
        return self.backlog >= BACKLOG_COUNT_CAP

    def overdue_seconds(self) -> float | None:
        if self.oldest_overdue is None:
            return None
        return (self.as_of - self.oldest_overdue.start_at).total_seconds()

    def as_json(self) -> dict[str, Any]:
        return {
            "as_of": self.as_of.isoformat(),
            "schema": {
                "revision": self.schema_revision,
                "latest": self.latest_revision,
                "up_to_date": self.schema_revision == self.latest_revision,
            },
            "counts": {status.value: count for status, count in self.counts.items()},
            "backlog": {
                "count": self.backlog,
                "capped": self.backlog_capped,
                "cap": BACKLOG_COUNT_CAP,
            },
            "oldest_overdue": _overdue_json(self.oldest_overdue, self.overdue_seconds()),
            "worker_sessions": {
                "application_name": APPLICATION_NAME,
                "count": len(self.worker_sessions),
                "sessions": [_session_json(session) for session in self.worker_sessions],
            },
            "failed_slots": {
                "total": self.failed_total,
                "shown": [_failed_json(failed) for failed in self.failed],
            },
            "index": {
                "name": SELECTION_INDEX,
                "exists": self.index.exists,
                "valid": self.index.valid,
                "table": self.index.table,
                "definition": self.index.definition,
                "selection_scan": self.index.scan,
                "serves_selection": self.index.serves_selection,
            },
        }


async def collect_status(
    database_url: str, as_of: datetime, batch_size: int, failed_shown: int = FAILED_SHOWN
) -> StatusReport:
    async with StatusStore.connect(database_url, STATUS_APPLICATION_NAME) as store:
        revision = await store.schema_revision()
        failed_total, failed = await store.failed_slots(failed_shown)
        return StatusReport(
            as_of=as_of,
            schema_revision=revision,
            latest_revision=HEAD_REVISION,
            counts=await store.counts_by_status(),
            backlog=await store.backlog(as_of, BACKLOG_COUNT_CAP),
            oldest_overdue=await store.oldest_overdue(as_of),
            worker_sessions=await store.worker_sessions(),
            failed_total=failed_total,
            failed=failed,
            index=await store.selection_index(as_of, batch_size),
        )


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
