"""The deployment's verdict: what `status --check` prints and the page shows first, one
code for both. The health (status/report.py, Health) judged with the alerts' thresholds:
one summary line and an exit status, the monitoring plugins' convention: 0 OK,
1 WARNING, 2 CRITICAL, 3 UNKNOWN (nothing could be judged: a wrong option, a database
that cannot be read). Each finding names the runbook's section that says what to do.

The thresholds are the alert rules' own, written once here: keep them equal to
deploy/prometheus/alerts.yml (tests/unit/test_status_check.py reads both).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import IntEnum, StrEnum
from typing import Final

from slot_expiration.domain import CycleOutcome
from slot_expiration.status.report import CycleSummary, Health, Unreadable
from slot_expiration.status.wording import age_text, count_of, one_line
from slot_expiration.store.history_store import CycleRecord
from slot_expiration.store.status_store import SchemaState

# SlotExpirationNoSuccessfulCycle: `time() - last success > 1800`.
NO_SUCCESS_SECONDS: Final = 1_800
# ... unless the worker's interval is so long that three of them exceed it: a worker
# that ticks once an hour is not stuck 31 minutes after its last cycle.
NO_SUCCESS_INTERVALS: Final = 3
# SlotExpirationBacklogHigh: the backlog above 5000, and not coming down over the trend
# window as its instances' consecutive successful cycles show it (cycle/backlog_trend.py).
BACKLOG_WARNING_ABOVE: Final = 5_000
# SlotExpirationItemErrors: a slot in quarantine (parked ones apart) for over an hour,
# from its first rejection.
QUARANTINE_WARNING_AFTER: Final = timedelta(hours=1)


class Level(IntEnum):
    """The exit status of `status --check`, the monitoring plugins' convention."""

    OK = 0
    WARNING = 1
    CRITICAL = 2
    UNKNOWN = 3


class Section(StrEnum):
    """The runbook's sections (docs/runbooks/slot-expiration.md), by their anchors."""

    VERDICT = "what-the-verdict-says"
    HUNG = "worker-hung-or-backlog-growing"
    POISON = "a-poison-slot-that-never-expires"
    MISCONFIGURED = "the-worker-is-misconfigured"


@dataclass(frozen=True, slots=True)
class Finding:
    level: Level
    text: str
    section: Section  # what the on-call does about it


@dataclass(frozen=True, slots=True)
class Verdict:
    level: Level
    findings: tuple[Finding, ...]
    healthy: str  # what is said when nothing is wrong

    @classmethod
    def unknown(cls, reason: str) -> Verdict:
        """Nothing could be judged: `reason`, on one line."""
        finding = Finding(Level.UNKNOWN, one_line(reason), Section.VERDICT)
        return cls(Level.UNKNOWN, (finding,), "")

    def ordered(self) -> tuple[Finding, ...]:
        """The findings, worst first."""
        return tuple(sorted(self.findings, key=lambda f: -f.level))

    def summary(self) -> str:
        """One line: `CRITICAL: ...; WARNING: ...` problems first, worst first."""
        if not self.findings:
            return f"{Level.OK.name}: {self.healthy}"
        return f"{self.level.name}: " + "; ".join(f.text for f in self.ordered())

    def as_json(self) -> dict[str, object]:
        return {
            "level": self.level.name,
            "exit_code": int(self.level),
            "summary": self.summary(),
            "findings": [
                {"level": f.level.name, "text": f.text, "runbook_section": f.section.value}
                for f in self.ordered()
            ],
        }


def no_success_threshold(interval_seconds: float) -> timedelta:
    return timedelta(seconds=max(NO_SUCCESS_SECONDS, NO_SUCCESS_INTERVALS * interval_seconds))


def judge(health: Health, interval_seconds: float) -> Verdict:
    """What the alerts would say of this deployment now, as one verdict."""
    findings = [
        *_schema(health.schema, health.latest_revision),
        *_cycles(health, no_success_threshold(interval_seconds)),
        *_backlog(health),
        *_quarantine(health),
    ]
    level = max((finding.level for finding in findings), default=Level.OK)
    return Verdict(level, tuple(findings), _healthy(health))


def _unreadable(what: str, part: Unreadable) -> Finding:
    return Finding(Level.WARNING, f"{what}: {part}", Section.VERDICT)


def _schema(schema: SchemaState | Unreadable, latest: str | None) -> list[Finding]:
    if isinstance(schema, Unreadable):
        return [_unreadable("schema", schema)]
    if schema.contract_mismatches:
        problems = "; ".join(schema.contract_mismatches)
        text = f"schema: {problems}: restore availability_slots"
        return [Finding(Level.CRITICAL, text, Section.MISCONFIGURED)]
    if schema.worker_problems:
        problems = "; ".join(schema.worker_problems)
        return [Finding(Level.CRITICAL, f"schema: {problems}: run migrate", Section.MISCONFIGURED)]
    if schema.revision != latest:
        text = f"schema at {schema.revision}, not {latest}: run migrate"
        return [Finding(Level.CRITICAL, text, Section.MISCONFIGURED)]
    return []


def _cycles(health: Health, threshold: timedelta) -> list[Finding]:
    cycles = health.cycles
    if isinstance(cycles, Unreadable):
        return [_unreadable("cycle history", cycles)]
    findings = [
        Finding(
            Level.CRITICAL,
            f"{cycle.instance} is {cycle.outcome.value}: {one_line(cycle.error or '')}",
            Section.MISCONFIGURED,
        )
        for cycle in cycles.needing_a_person()
    ]
    findings += [
        Finding(
            Level.WARNING,
            f"the last cycle of {cycle.instance} expired nothing: the database rejected every "
            f"slot it picked ({count_of(cycle.failed_count, 'slot')}, quarantined: "
            "`slot-expiration quarantine list`)",
            Section.POISON,
        )
        for cycle in cycles.live
        if cycle.outcome is CycleOutcome.SUCCESS and rejected_every_slot(cycle)
    ]
    stale = _stale(cycles, health, threshold)
    return [*findings, *([stale] if stale else [])]


def rejected_every_slot(cycle: CycleRecord) -> bool:
    """A cycle that picked slots and expired none: the database refused each of them (a
    check or trigger that refuses every expiry, say). It succeeded, and did nothing."""
    return cycle.expired_count == 0 and cycle.failed_count > 0


def _stale(cycles: CycleSummary, health: Health, threshold: timedelta) -> Finding | None:
    limit = age_text(threshold.total_seconds())
    if cycles.latest is None:
        text = f"no cycle in the history: no worker has run here yet (limit {limit})"
        return Finding(Level.CRITICAL, text, Section.HUNG)
    last = cycles.last_success
    if last is None:
        text = f"no successful cycle in the history (limit {limit})"
        return Finding(Level.CRITICAL, text, Section.HUNG)
    age = health.as_of - last.ended_at
    if age <= threshold:
        return None
    return Finding(
        Level.CRITICAL,
        f"no successful cycle for {age_text(age.total_seconds())} (limit {limit}; "
        f"the last by {last.instance})",
        Section.HUNG,
    )


def _backlog(health: Health) -> list[Finding]:
    backlog = health.backlog
    if isinstance(backlog, Unreadable):
        return [_unreadable("backlog", backlog)]
    if backlog <= BACKLOG_WARNING_ABOVE or not isinstance(health.cycles, CycleSummary):
        return []
    change = health.cycles.backlog_change
    if change is None or change < 0:  # no trend yet, or coming down: no warning
        return []
    shown = f"at least {backlog}" if health.backlog_capped else str(backlog)
    window = age_text(health.cycles.trend_window.total_seconds())
    trend = "not down" if change == 0 else f"up {change}"
    text = f"backlog {shown} > {BACKLOG_WARNING_ABOVE}, {trend} over {window}"
    return [Finding(Level.WARNING, text, Section.HUNG)]


def _quarantine(health: Health) -> list[Finding]:
    quarantine = health.quarantine
    if isinstance(quarantine, Unreadable):
        return [_unreadable("quarantine", quarantine)]
    since = quarantine.waiting_since
    if not quarantine.waiting or since is None:
        return []
    if health.as_of - since <= QUARANTINE_WARNING_AFTER:
        return []
    age = age_text((health.as_of - since).total_seconds())
    text = f"{count_of(quarantine.waiting, 'slot')} in quarantine, the oldest for {age}"
    return [Finding(Level.WARNING, text, Section.POISON)]


def _healthy(health: Health) -> str:
    parts = []
    cycles = health.cycles
    if isinstance(cycles, CycleSummary) and cycles.last_success is not None:
        last = cycles.last_success
        age = age_text((health.as_of - last.ended_at).total_seconds())
        parts.append(f"last success {age} ago by {last.instance}")
    if isinstance(health.backlog, int):
        parts.append(f"backlog {health.backlog}")
    if not isinstance(health.quarantine, Unreadable):
        parts.append(quarantine_text(health.quarantine.waiting, health.quarantine.parked))
    return "; ".join(parts)


def quarantine_text(waiting: int, parked: int) -> str:
    """`quarantine empty`, `quarantine: 5 (none over an hour)`, `..., 2 parked`: what a
    verdict with no finding on the quarantine says of it."""
    if not waiting and not parked:
        return "quarantine empty"
    counted = [f"{waiting} (none over an hour)"] if waiting else []
    counted += [f"{parked} parked"] if parked else []
    return "quarantine: " + ", ".join(counted)
