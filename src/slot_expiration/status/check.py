"""`status --check`: the report judged with the alerts' thresholds, for cron jobs and
probes: one summary line, and exit 0 (OK), 1 (WARNING) or 2 (CRITICAL), the Nagios
plugins' convention.

The thresholds are the alert rules' own, written once here: keep them equal to
deploy/prometheus/alerts.yml (tests/unit/test_status_check.py reads both).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import IntEnum
from typing import Final

from slot_expiration.status.report import CycleSummary, StatusReport, Unreadable
from slot_expiration.status.wording import age_text, count_of, one_line
from slot_expiration.store.status_store import SchemaState

# SlotExpirationNoSuccessfulCycle: `time() - max(last_success) > 1800`.
NO_SUCCESS_SECONDS: Final = 1_800
# ... unless the worker's interval is so long that three of them exceed it: a worker
# that ticks once an hour is not stuck 31 minutes after its last cycle.
NO_SUCCESS_INTERVALS: Final = 3
# SlotExpirationBacklogHigh: `max(calendar_slot_expiration_backlog) > 5000` and not
# coming down over report.BACKLOG_TREND_WINDOW: a backlog draining at full rate is no warning.
BACKLOG_WARNING_ABOVE: Final = 5_000
# SlotExpirationItemErrors: any slot in quarantine (parked ones excluded) `for: 1h`,
# judged here by the first failure of the oldest one still waiting.
QUARANTINE_WARNING_ABOVE: Final = 0
QUARANTINE_WARNING_AFTER: Final = timedelta(hours=1)


class Level(IntEnum):
    """The exit status of `status --check`."""

    OK = 0
    WARNING = 1
    CRITICAL = 2


@dataclass(frozen=True, slots=True)
class Finding:
    level: Level
    text: str


@dataclass(frozen=True, slots=True)
class Verdict:
    level: Level
    findings: tuple[Finding, ...]
    healthy: str  # what is said when nothing is wrong

    def summary(self) -> str:
        """One line: `CRITICAL: ...; WARNING: ...` problems first, worst first."""
        if not self.findings:
            return f"{Level.OK.name}: {self.healthy}"
        ordered = sorted(self.findings, key=lambda f: -f.level)
        return f"{self.level.name}: " + "; ".join(f.text for f in ordered)

    def as_json(self) -> dict[str, object]:
        return {
            "level": self.level.name,
            "exit_code": int(self.level),
            "summary": self.summary(),
            "findings": [{"level": f.level.name, "text": f.text} for f in self.findings],
        }


def no_success_threshold(interval_seconds: float) -> timedelta:
    return timedelta(seconds=max(NO_SUCCESS_SECONDS, NO_SUCCESS_INTERVALS * interval_seconds))


def judge(report: StatusReport, interval_seconds: float) -> Verdict:
    """What the alerts would say of this report, as one verdict."""
    findings = [
        *_schema(report.schema, report.latest_revision),
        *_cycles(report, no_success_threshold(interval_seconds)),
        *_backlog(report),
        *_quarantine(report),
    ]
    level = max((finding.level for finding in findings), default=Level.OK)
    return Verdict(level, tuple(findings), _healthy(report))


def _schema(schema: SchemaState | Unreadable, latest: str | None) -> list[Finding]:
    if isinstance(schema, Unreadable):
        return [Finding(Level.WARNING, f"schema: {schema}")]
    if schema.contract_mismatches:
        problems = "; ".join(schema.contract_mismatches)
        return [Finding(Level.CRITICAL, f"schema: {problems}: restore availability_slots")]
    if schema.worker_problems:
        problems = "; ".join(schema.worker_problems)
        return [Finding(Level.CRITICAL, f"schema: {problems}: run migrate")]
    if schema.revision != latest:
        return [Finding(Level.CRITICAL, f"schema at {schema.revision}, not {latest}: run migrate")]
    return []


def _cycles(report: StatusReport, threshold: timedelta) -> list[Finding]:
    cycles = report.cycles
    if isinstance(cycles, Unreadable):
        return [Finding(Level.WARNING, f"cycle history: {cycles}")]
    findings = [
        Finding(
            Level.CRITICAL,
            f"{cycle.instance} is {cycle.outcome.value}: {one_line(cycle.error or '')}",
        )
        for cycle in cycles.needing_a_person()
    ]
    stale = _stale(cycles, report, threshold)
    return [*findings, *([stale] if stale else [])]


def _stale(cycles: CycleSummary, report: StatusReport, threshold: timedelta) -> Finding | None:
    limit = age_text(threshold.total_seconds())
    last = cycles.last_success
    if last is None:
        return Finding(Level.CRITICAL, f"no successful cycle in the history (limit {limit})")
    age = report.as_of - last.ended_at
    if age <= threshold:
        return None
    return Finding(
        Level.CRITICAL,
        f"no successful cycle for {age_text(age.total_seconds())} (limit {limit}; "
        f"the last by {last.instance})",
    )


def _backlog(report: StatusReport) -> list[Finding]:
    backlog = report.backlog
    if isinstance(backlog, Unreadable):
        return [Finding(Level.WARNING, f"backlog: {backlog}")]
    if backlog <= BACKLOG_WARNING_ABOVE:
        return []
    shown = f"at least {backlog}" if report.backlog_capped else str(backlog)
    text = f"backlog {shown} > {BACKLOG_WARNING_ABOVE}"
    before = report.cycles.backlog_before if isinstance(report.cycles, CycleSummary) else None
    if before is None:  # no cycle recorded to show it coming down
        return [Finding(Level.WARNING, text)]
    if backlog < before.backlog:
        return []
    age = age_text((report.as_of - before.at).total_seconds())
    return [Finding(Level.WARNING, f"{text}, not down from {before.backlog} {age} ago")]


def _quarantine(report: StatusReport) -> list[Finding]:
    quarantine = report.quarantine
    if isinstance(quarantine, Unreadable):
        return [Finding(Level.WARNING, f"quarantine: {quarantine}")]
    waiting = quarantine.total - quarantine.parked
    since = quarantine.waiting_since
    if waiting <= QUARANTINE_WARNING_ABOVE or since is None:
        return []
    if report.as_of - since < QUARANTINE_WARNING_AFTER:
        return []
    age = age_text((report.as_of - since).total_seconds())
    return [Finding(Level.WARNING, f"{count_of(waiting, 'slot')} in quarantine, for {age}")]


def _healthy(report: StatusReport) -> str:
    parts = []
    if isinstance(report.cycles, CycleSummary) and report.cycles.last_success is not None:
        last = report.cycles.last_success
        age = age_text((report.as_of - last.ended_at).total_seconds())
        parts.append(f"last success {age} ago by {last.instance}")
    if isinstance(report.backlog, int):
        parts.append(f"backlog {report.backlog}")
    if not isinstance(report.quarantine, Unreadable):
        parked = report.quarantine.parked
        parts.append(f"quarantine: {parked} parked" if parked else "quarantine empty")
    return "; ".join(parts)
