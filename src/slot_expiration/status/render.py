"""The status report as lines for a person at a terminal."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from slot_expiration.cycle import BACKLOG_COUNT_CAP
from slot_expiration.domain import SlotStatus
from slot_expiration.status.report import Quarantine, StatusReport, Unreadable
from slot_expiration.store import ApplicationName, FailedSlot
from slot_expiration.store.schema_version import (
    SchemaPosition,
    ahead_of_release,
    position_of,
    unknown_revision,
)
from slot_expiration.store.status_store import (
    SELECTION_INDEX,
    OverdueSlot,
    SchemaState,
    SelectionIndex,
    WorkerSession,
)

T = TypeVar("T")

_WIDTH = 15


def render_text(report: StatusReport) -> str:
    lines = [
        f"slot-expiration status at {report.as_of.isoformat()}",
        _row("schema", _part(report.schema, lambda s: _schema(s, report.latest_revision))),
        _row("slots", _part(report.counts, _counts)),
        _row("backlog", _part(report.backlog, lambda n: _backlog(n, report.backlog_capped))),
        _row("oldest overdue", _part(report.oldest_overdue, lambda s: _oldest(report))),
        _row("worker", _part(report.worker_sessions, _sessions_header)),
        *_details(report.worker_sessions, _session),
        _row("failed slots", _part(report.quarantine, _failed_header)),
        *_details(report.quarantine, lambda q: q.latest, _failed),
        _row("index", _part(report.index, _index)),
    ]
    return "\n".join(lines)


def _row(label: str, value: str) -> str:
    return f"{label:<{_WIDTH}}{value}"


def _part(part: T | Unreadable, render: Callable[[T], str]) -> str:
    return str(part) if isinstance(part, Unreadable) else render(part)


def _details(part: Any, *steps: Callable[[Any], Any]) -> list[str]:
    """Indented lines under a part: `steps` pick the items, the last renders one."""
    if isinstance(part, Unreadable):
        return []
    *pick, render = steps
    items = pick[0](part) if pick else part
    return [f"  {render(item)}" for item in items]


def _schema(schema: SchemaState, latest: str | None) -> str:
    problems = [
        *schema.contract_mismatches,
        *(f"table {t} is missing" for t in schema.missing_tables),
    ]
    if problems:
        return (
            f"{schema.revision or 'none'}, but {'; '.join(problems)}: run `slot-expiration migrate`"
        )
    position = position_of(schema.revision, latest or "")
    if position is SchemaPosition.CURRENT:
        return f"{schema.revision} (the newest)"
    if position is SchemaPosition.AHEAD and schema.revision is not None:
        ahead = ahead_of_release(schema.revision, str(latest))
        return f"{schema.revision}: {ahead}; migrations only add, so this release runs on it"
    if position is SchemaPosition.UNKNOWN and schema.revision is not None:
        return unknown_revision(schema.revision)
    return f"{schema.revision or 'none'}, the newest is {latest}: run `slot-expiration migrate`"


def _counts(counts: dict[SlotStatus, int]) -> str:
    return ", ".join(f"{status.value} {n}" for status, n in counts.items())


def _backlog(count: int, capped: bool) -> str:
    shown = f"at least {count}" if capped else str(count)
    return f"{shown} Available slots have started (counted up to {BACKLOG_COUNT_CAP})"


def _oldest(report: StatusReport) -> str:
    slot, age = report.oldest_overdue, report.overdue_seconds()
    if not isinstance(slot, OverdueSlot) or age is None:
        return "none: no Available slot has started"
    quarantined = ", in quarantine" if slot.quarantined else ""
    return (
        f"{age_text(age)} ago: slot {slot.id} of tenant {slot.tenant_id}, "
        f"started {slot.start_at.isoformat()}{quarantined}"
    )


def _sessions_header(sessions: tuple[WorkerSession, ...]) -> str:
    return f"{len(sessions)} sessions connected now (application_name {ApplicationName.WORKER})"


def _session(session: WorkerSession) -> str:
    state = session.state or "state hidden (needs pg_read_all_stats)"
    since = f" since {_iso(session.state_change)}" if session.state_change else ""
    waiting = (
        f", waiting on {session.wait_event_type}/{session.wait_event}"
        if session.wait_event_type
        else ""
    )
    xact = f", transaction open since {_iso(session.xact_start)}" if session.xact_start else ""
    return f"pid {session.pid}: {state}{since}{xact}{waiting}"


def _failed_header(quarantine: Quarantine) -> str:
    if quarantine.total == 0:
        return "none in quarantine"
    shown = f" (the latest {len(quarantine.latest)} below)" if quarantine.latest else ""
    return f"{quarantine.total} in quarantine, still Available{shown}"


def _failed(failed: FailedSlot) -> str:
    return (
        f"slot {failed.slot_id} of tenant {failed.tenant_id}: {failed.attempts} attempts, "
        f"last {_iso(failed.last_failed_at)}, next {_iso(failed.next_attempt_at)}, "
        f"SQLSTATE {failed.sqlstate}: {failed.message}"
    )


def _index(index: SelectionIndex) -> str:
    if not index.exists:
        return f"{SELECTION_INDEX} is MISSING; the selection reads: {index.scan}"
    valid = "valid" if index.valid else "INVALID (rebuild it)"
    serves = "serves the selection" if index.serves_selection else "does NOT serve the selection"
    return f"{SELECTION_INDEX}: present, {valid}, {serves} ({index.scan})"


def age_text(seconds: float) -> str:
    """3d 4h 5m, 4h 5m, 5m 6s or 6s."""
    whole = int(seconds)
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h {minutes}m"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {secs}s" if minutes else f"{secs}s"


def _iso(moment: datetime | None) -> str:
    return moment.isoformat(timespec="seconds") if moment is not None else "?"
