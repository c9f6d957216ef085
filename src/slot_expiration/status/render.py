"""The status report as lines for a person at a terminal."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Final, TypeVar

from slot_expiration.db import ApplicationName
from slot_expiration.domain import CycleOutcome, SlotStatus
from slot_expiration.expiry import BACKLOG_COUNT_CAP, ThrottleReason
from slot_expiration.history.store import CycleRecord
from slot_expiration.pause import Pause
from slot_expiration.quarantine import FailedSlot
from slot_expiration.schema.version import (
    SchemaPosition,
    ahead_of_release,
    position_of,
    unknown_revision,
)
from slot_expiration.status.report import (
    PACE_WINDOW,
    CycleSummary,
    Health,
    Quarantine,
    StatusReport,
    Unreadable,
)
from slot_expiration.status.store import (
    SELECTION_INDEX,
    SLOT_TABLE,
    OverdueSlot,
    SchemaState,
    SelectionIndex,
    TableSize,
    WorkerSession,
)
from slot_expiration.status.wording import (
    age_text,
    count_of,
    due_text,
    left_text,
    one_line,
    rate_text,
    size_text,
)

T = TypeVar("T")

_WIDTH = 15


def render_text(report: StatusReport) -> str:
    lines = [
        f"slot-expiration status at {report.as_of.isoformat()}",
        _row("pause", pause_text(report.health.pause, report.as_of)),
        _row("last success", _part(report.cycles, lambda c: _last(c.last_success, report))),
        _row("last failure", _part(report.cycles, lambda c: _last(c.last_failure, report))),
        _row("last hour", _part(report.cycles, _recent_header)),
        *_details(report.cycles, lambda c: c.recent_by_instance().items(), _instance),
        _row("schema", _part(report.schema, lambda s: schema_text(s, report.latest_revision))),
        _row("slots", _part(report.counts, _counts)),
        _row("backlog", _part(report.backlog, lambda n: _backlog(n, report.backlog_capped))),
        _row("drain", drain_text(report.health)),
        _row("oldest overdue", _part(report.oldest_overdue, lambda s: _oldest(report))),
        _row("worker", _part(report.worker_sessions, _sessions_header)),
        *_details(report.worker_sessions, _session),
        _row("failed slots", _part(report.quarantine, _failed_header)),
        *_details(report.quarantine, lambda q: q.latest, _failed),
        _row("index", _part(report.index, index_text)),
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


def schema_text(schema: SchemaState, latest: str | None) -> str:
    """The schema's revision and what differs: the calendar's table from its contract
    (restored by hand: migrate never changes it), the worker's own (migrate repairs it)."""
    problems = []
    if schema.contract_mismatches:
        problems.append(
            f"{'; '.join(schema.contract_mismatches)}: availability_slots no longer fits the "
            "table contract, restore it (migrate cannot)"
        )
    if schema.worker_problems:
        problems.append(f"{'; '.join(schema.worker_problems)}: run `slot-expiration migrate`")
    if schema.never_migrated:
        creates = (
            "it creates availability_slots and the worker's tables"
            if schema.slot_table_missing
            else "it adopts availability_slots"
        )
        return f"none: the database was never migrated: run `slot-expiration migrate` ({creates})"
    if problems:
        return f"{schema.revision or 'none'}, but {'; and '.join(problems)}"
    position = position_of(schema.revision, latest or "")
    if position is SchemaPosition.CURRENT:
        return f"{schema.revision} (the newest)"
    if position is SchemaPosition.AHEAD and schema.revision is not None:
        ahead = ahead_of_release(schema.revision, str(latest))
        return f"{schema.revision}: {ahead}; migrations only add, so this release runs on it"
    if position is SchemaPosition.UNKNOWN and schema.revision is not None:
        return unknown_revision(schema.revision)
    return f"{schema.revision or 'none'}, the newest is {latest}: run `slot-expiration migrate`"


def pause_text(pause: Pause | Unreadable | None, as_of: datetime) -> str:
    """The pause in force as `status` and the page show it: none, or who, until when (or
    since when), how long so far, and why."""
    if isinstance(pause, Unreadable):
        return str(pause)
    if pause is None:
        return "none: every replica expires at each tick"
    lasted = f"for {age_text(pause.age(as_of).total_seconds())} so far"
    if pause.outlived(as_of):
        lasted += ", past its limit"
    return pause.text(lasted)


def _counts(counts: dict[SlotStatus, int]) -> str:
    return ", ".join(f"{status.value} {n}" for status, n in counts.items())


def _backlog(count: int, capped: bool) -> str:
    return f"{due_text(count, capped)} (counted up to {BACKLOG_COUNT_CAP})"


def drain_text(health: Health) -> str:
    """The drain in progress as `status` and the page say it: `8,812 rows/s over the last
    10m, 51,500 left, ETA 6s`, or why there is none."""
    drain = health.drain()
    if isinstance(drain, Unreadable):
        return str(drain)
    if drain is None:
        if health.backlog == 0:
            return "none: no Available slot has started"
        window = (
            health.cycles.pace_window if isinstance(health.cycles, CycleSummary) else PACE_WINDOW
        )
        return f"none: no cycle expired a slot in the last {age_text(window.total_seconds())}"
    rate, eta = drain.rows_per_second, drain.eta_seconds
    over = age_text(drain.window.total_seconds())
    parts = [
        f"{rate_text(rate or 0.0)} over the last {over}",
        left_text(drain.left, drain.capped),
    ]
    if not drain.coming_down:
        parts.append("no ETA: the backlog is not coming down (slots fall due as fast)")
    elif eta is not None:
        parts.append(f"ETA {'at least ' if drain.capped else ''}{age_text(eta)}")
    if drain.throttle is not None:
        # A reason a newer release wrote in the history is shown as it is.
        why = THROTTLE_WORDS.get(drain.throttle.reason, drain.throttle.reason)
        parts.append(f"throttled {drain.throttle.share:.0%} by {why}")
    return ", ".join(parts)


# How status and the page name a throttle's reason (the metric's label, the history's
# throttled_by).
THROTTLE_WORDS: Final[dict[str, str]] = {
    ThrottleReason.REPLICA_LAG: "replica lag",
    ThrottleReason.NICE: "the nice ratio",
    ThrottleReason.LOAD: "the database's load",
}


def _oldest(report: StatusReport) -> str:
    slot, age = report.oldest_overdue, report.overdue_seconds()
    if not isinstance(slot, OverdueSlot) or age is None:
        return "none: no Available slot has started"
    quarantined = ", in quarantine" if slot.quarantined else ""
    return (
        f"{age_text(age)} ago: slot {slot.id} of tenant {slot.tenant_id}, "
        f"started {slot.start_at.isoformat()}{quarantined}"
    )


def _last(cycle: CycleRecord | None, report: StatusReport) -> str:
    if cycle is None:
        return "none in the history"
    age = age_text((report.as_of - cycle.ended_at).total_seconds())
    what = (
        f"expired {cycle.expired_count}, backlog {_maybe(cycle.backlog)}"
        if cycle.outcome is CycleOutcome.SUCCESS
        else f"{cycle.outcome.value}: {cycle.error_type}{_sqlstate(cycle.sqlstate)}: "
        f"{one_line(cycle.error or '')}"
    )
    return f"{age} ago ({_iso(cycle.ended_at)}) by {cycle.instance}: {what}"


def _recent_header(cycles: CycleSummary) -> str:
    total = cycles.recent_total()
    if total == 0:
        return "no cycle ended in the last hour"
    return f"{count_of(total, 'cycle')}: {_outcomes(cycles.recent_by_outcome())}"


def _instance(item: tuple[str, dict[CycleOutcome, int]]) -> str:
    instance, outcomes = item
    return f"{instance}: {_outcomes(outcomes)}"


def _outcomes(outcomes: dict[CycleOutcome, int]) -> str:
    return ", ".join(f"{outcome.value} {n}" for outcome, n in sorted(outcomes.items()))


def _sqlstate(sqlstate: str | None) -> str:
    return f" (SQLSTATE {sqlstate})" if sqlstate else ""


def _maybe(value: int | None) -> str:
    return "not counted" if value is None else str(value)


def _sessions_header(sessions: tuple[WorkerSession, ...]) -> str:
    between = " (normal between cycles)" if not sessions else ""
    return (
        f"{count_of(len(sessions), 'session')} connected now{between} "
        f"(application_name {ApplicationName.WORKER})"
    )


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
    parked = f", {quarantine.parked} of them parked" if quarantine.parked else ""
    shown = f" (the latest {len(quarantine.latest)} below)" if quarantine.latest else ""
    return f"{quarantine.total} in quarantine, still Available{parked}{shown}"


def _failed(failed: FailedSlot) -> str:
    when = (
        f"parked since {_iso(failed.parked_at)}"
        if failed.parked_at is not None
        else f"next {_iso(failed.next_attempt_at)}"
    )
    return (
        f"slot {failed.slot_id} of tenant {failed.tenant_id}: "
        f"{count_of(failed.attempts, 'attempt')}, last {_iso(failed.last_failed_at)}, {when}, "
        f"SQLSTATE {failed.sqlstate}: {one_line(failed.message)}"
    )


def index_text(index: SelectionIndex) -> str:
    size = _table_size(index.size)
    if not index.exists:
        return f"{SELECTION_INDEX} is MISSING; the selection reads: {index.scan}; {size}"
    valid = "valid" if index.valid else "INVALID (rebuild it)"
    if index.too_small_to_judge:
        serves = (
            f"too small to judge ({count_of(index.size.counted, 'row')}: under "
            f"{index.size.cap} the planner rightly reads the whole table)"
        )
    elif index.serves_selection:
        serves = f"serves the selection ({index.scan})"
    else:
        serves = f"does NOT serve the selection ({index.scan})"
    return f"{SELECTION_INDEX}: present, {valid}, {serves}; {size}"


def _table_size(size: TableSize) -> str:
    rows = (
        "never analyzed"
        if size.rows_estimate is None
        else f"about {count_of(size.rows_estimate, 'row')}"
    )
    return f"table {SLOT_TABLE}: {rows}, {size_text(size.total_bytes)}"


def _iso(moment: datetime | None) -> str:
    return moment.isoformat(timespec="seconds") if moment is not None else "?"
