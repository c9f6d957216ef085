"""The status report as lines for a person at a terminal."""

from __future__ import annotations

from datetime import datetime

from slot_expiration.cycle import BACKLOG_COUNT_CAP
from slot_expiration.status.report import StatusReport
from slot_expiration.store.slot_store import APPLICATION_NAME
from slot_expiration.store.status_store import SELECTION_INDEX, FailedSlot, WorkerSession

_WIDTH = 15


def render_text(report: StatusReport) -> str:
    lines = [
        f"slot-expiration status at {report.as_of.isoformat()}",
        _row("schema", _schema(report)),
        _row("slots", ", ".join(f"{s.value} {n}" for s, n in report.counts.items())),
        _row("backlog", _backlog(report)),
        _row("oldest overdue", _oldest(report)),
        _row("worker", _sessions_header(report)),
        *(f"  {_session(session)}" for session in report.worker_sessions),
        _row("failed slots", _failed_header(report)),
        *(f"  {_failed(failed)}" for failed in report.failed),
        _row("index", _index(report)),
    ]
    return "\n".join(lines)


def _row(label: str, value: str) -> str:
    return f"{label:<{_WIDTH}}{value}"


def _schema(report: StatusReport) -> str:
    if report.schema_revision == report.latest_revision:
        return f"{report.schema_revision} (the newest)"
    return (
        f"{report.schema_revision or 'none'}, the newest is {report.latest_revision}: "
        "run `slot-expiration migrate`"
    )


def _backlog(report: StatusReport) -> str:
    count = f"at least {report.backlog}" if report.backlog_capped else str(report.backlog)
    return f"{count} Available slots have started (counted up to {BACKLOG_COUNT_CAP})"


def _oldest(report: StatusReport) -> str:
    slot, age = report.oldest_overdue, report.overdue_seconds()
    if slot is None or age is None:
        return "none: no Available slot has started"
    quarantined = ", in quarantine" if slot.quarantined else ""
    return (
        f"{age_text(age)} ago: slot {slot.id} of tenant {slot.tenant_id}, "
        f"started {slot.start_at.isoformat()}{quarantined}"
    )


def _sessions_header(report: StatusReport) -> str:
    count = len(report.worker_sessions)
    return f"{count} sessions connected now (application_name {APPLICATION_NAME})"


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


def _failed_header(report: StatusReport) -> str:
    if report.failed_total == 0:
        return "none in quarantine"
    shown = f" (the latest {len(report.failed)} below)" if report.failed else ""
    return f"{report.failed_total} in quarantine, still Available{shown}"


def _failed(failed: FailedSlot) -> str:
    return (
        f"slot {failed.slot_id} of tenant {failed.tenant_id}: {failed.attempts} attempts, "
        f"last {_iso(failed.last_failed_at)}, next {_iso(failed.next_attempt_at)}, "
        f"SQLSTATE {failed.sqlstate}: {failed.message}"
    )


def _index(report: StatusReport) -> str:
    index = report.index
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
