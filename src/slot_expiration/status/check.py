"""The deployment's verdict: what `status --check` prints and the page shows first, one
code for both. The health (status/report.py, Health) judged with the alerts' thresholds:
one summary line and an exit status, the monitoring plugins' convention: 0 OK,
1 WARNING, 2 CRITICAL, 3 UNKNOWN (nothing could be judged: a wrong option, a database
that cannot be read). Each finding names the runbook's section that says what to do.

The thresholds are the alert rules' own, written once here: keep them equal to
deploy/prometheus/alerts.yml (tests/unit/test_status_check.py reads both).

A pause in force is a finding of its own (WARNING, CRITICAL once it outlived its end or,
with no end given, LIMIT_WITHOUT_END, as the alert SlotExpirationPausedTooLong): the
replicas obey it, so neither their lack of success since it began nor the backlog growing
meanwhile is held against them.

What it can see: the history, which each replica writes as it can, and, given their
addresses (`--replicas`), the replicas' own /readyz. A replica that cannot log in or write
to the database leaves nothing in the history, not even its failures: without its
/readyz, its trouble shows only as silence, a WARNING after about three intervals, and
CRITICAL at the no-success limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import IntEnum, StrEnum
from typing import Final

from slot_expiration.domain import CycleOutcome
from slot_expiration.history.store import CycleRecord
from slot_expiration.pause import Pause
from slot_expiration.schema.version import (
    SchemaPosition,
    ahead_of_release,
    position_of,
    unknown_revision,
)
from slot_expiration.status.replicas import ReplicaAnswer
from slot_expiration.status.report import LIVE_SLACK, CycleSummary, Health, Unreadable
from slot_expiration.status.store import SchemaState
from slot_expiration.status.wording import age_text, count_of, one_line

# SlotExpirationNoSuccessfulCycle: `time() - last success > 1800`.
NO_SUCCESS_SECONDS: Final = 1_800
# ... unless the worker's interval is so long that three of them exceed it: a worker
# that ticks once an hour is not stuck 31 minutes after its last cycle.
NO_SUCCESS_INTERVALS: Final = 3
# No cycle of any outcome recorded for three intervals and a minute (a cycle's budget, a
# late tick, the history's write): no replica is running, or none can log in or write to
# the database (a password changed under them, a grant revoked): their failures cannot be
# recorded either. A WARNING, long before the no-success limit at the default interval.
SILENCE_INTERVALS: Final = 3
SILENCE_SLACK: Final = LIVE_SLACK
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
    PAUSED = "the-worker-is-paused"


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


def silence_threshold(interval_seconds: float) -> timedelta:
    return SILENCE_INTERVALS * timedelta(seconds=interval_seconds) + SILENCE_SLACK


def judge(health: Health, interval_seconds: float) -> Verdict:
    """What the alerts would say of this deployment now, as one verdict."""
    if isinstance(health.schema, SchemaState) and health.schema.never_migrated:
        # Nothing of the worker's is there to read before its first migration: the
        # schema's finding says it all, and the replicas say theirs.
        return _verdict([*_schema(health.schema, None), *_replicas(health)], health)
    findings = [
        *_schema(health.schema, health.latest_revision),
        *_pause(health),
        *_cycles(health, no_success_threshold(interval_seconds)),
        *_silence(
            health, silence_threshold(interval_seconds), no_success_threshold(interval_seconds)
        ),
        *_backlog(health),
        *_quarantine(health),
        *_replicas(health),
    ]
    return _verdict(findings, health)


def _verdict(findings: list[Finding], health: Health) -> Verdict:
    level = max((finding.level for finding in findings), default=Level.OK)
    return Verdict(level, tuple(findings), _healthy(health))


def _unreadable(what: str, part: Unreadable) -> Finding:
    return Finding(Level.WARNING, f"{what}: {part}", Section.VERDICT)


def _schema(schema: SchemaState | Unreadable, latest: str | None) -> list[Finding]:
    if isinstance(schema, Unreadable):
        return [_unreadable("schema", schema)]
    if schema.never_migrated:
        return _never_migrated(schema)
    if schema.contract_mismatches:
        problems = "; ".join(schema.contract_mismatches)
        text = f"schema: {problems}: restore availability_slots"
        return [Finding(Level.CRITICAL, text, Section.MISCONFIGURED)]
    if schema.worker_problems:
        problems = "; ".join(schema.worker_problems)
        return [Finding(Level.CRITICAL, f"schema: {problems}: run migrate", Section.MISCONFIGURED)]
    return _revision(schema.revision, latest)


def _revision(revision: str | None, latest: str | None) -> list[Finding]:
    position = position_of(revision, latest or "")
    if position is SchemaPosition.AHEAD and revision is not None and latest is not None:
        # A rollback, or a rolling deploy under way: this release runs on it unchanged.
        text = (
            f"{ahead_of_release(revision, latest)}: a newer release migrated this database; "
            "roll forward, or keep this release: it works on the newer schema (migrations "
            "only add)"
        )
        return [Finding(Level.WARNING, text, Section.VERDICT)]
    if position is SchemaPosition.UNKNOWN and revision is not None:
        return [Finding(Level.CRITICAL, unknown_revision(revision), Section.MISCONFIGURED)]
    if revision != latest:
        text = f"schema at {revision}, not {latest}: run migrate"
        return [Finding(Level.CRITICAL, text, Section.MISCONFIGURED)]
    return []


def _never_migrated(schema: SchemaState) -> list[Finding]:
    """No `migrate` has run: it creates the worker's tables (and availability_slots when
    there is none yet), or adopts the calendar's, unless that one misfits the contract."""
    creates = (
        "it creates availability_slots and the worker's tables"
        if schema.slot_table_missing
        else "it adopts availability_slots and creates the worker's tables"
    )
    text = f"the database was never migrated: run `slot-expiration migrate` ({creates})"
    findings = [Finding(Level.CRITICAL, text, Section.MISCONFIGURED)]
    if schema.contract_mismatches and not schema.slot_table_missing:
        problems = "; ".join(schema.contract_mismatches)
        text = f"schema: {problems}: restore availability_slots first (migrate cannot adopt it)"
        findings.append(Finding(Level.CRITICAL, text, Section.MISCONFIGURED))
    return findings


def paused(health: Health) -> Pause | None:
    """The pause in force, when it could be read."""
    return health.pause if isinstance(health.pause, Pause) else None


def _pause(health: Health) -> list[Finding]:
    """The pause in force: a WARNING while it holds within its end (or, with no end
    given, within LIMIT_WITHOUT_END), CRITICAL once it has outlived that."""
    if isinstance(health.pause, Unreadable):
        return [_unreadable("pause", health.pause)]
    pause = paused(health)
    if pause is None:
        return []
    age, limit = pause.age(health.as_of), pause.limit
    if not pause.outlived(health.as_of):
        detail = (
            f"{age_text((limit - age).total_seconds())} left"
            if pause.paused_until is not None
            else f"for {age_text(age.total_seconds())} (limit {age_text(limit.total_seconds())})"
        )
        return [Finding(Level.WARNING, pause.text(detail), Section.PAUSED)]
    detail = (
        f"{age_text((age - limit).total_seconds())} past its end"
        if pause.paused_until is not None
        else f"for {age_text(age.total_seconds())}, past the limit of "
        f"{age_text(limit.total_seconds())}"
    )
    return [Finding(Level.CRITICAL, pause.text(detail), Section.PAUSED)]


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
    # While paused, the replicas obey: judged as the pause began (stuck before it, still said).
    pause = paused(health)
    if age <= threshold or (pause is not None and pause.paused_at - last.ended_at <= threshold):
        return None
    before = "" if pause is None else ", since before the pause"
    return Finding(
        Level.CRITICAL,
        f"no successful cycle for {age_text(age.total_seconds())}{before} (limit {limit}; "
        f"the last by {last.instance})",
        Section.HUNG,
    )


def _silence(health: Health, limit: timedelta, no_success: timedelta) -> list[Finding]:
    """No cycle of any outcome recorded for longer than `limit`. (No history at all, or
    one that cannot be read, is _cycles' to say; past the `no_success` limit, what it
    says of the last success is not said again.)"""
    cycles = health.cycles
    if not isinstance(cycles, CycleSummary) or cycles.latest is None:
        return []
    latest = cycles.latest
    age = health.as_of - latest.ended_at
    if age <= limit:
        return []
    cause = (
        "no replica is running, or none can log in or write to the database: their "
        "/readyz says which"
    )
    last = cycles.last_success
    if last is not None and last.run_id == latest.run_id and age > no_success:
        # The no-success finding names that cycle and its age already.
        return [Finding(Level.WARNING, f"nor any other cycle since: {cause}", Section.HUNG)]
    text = (
        f"no cycle recorded for {age_text(age.total_seconds())} (limit "
        f"{age_text(limit.total_seconds())}; the last, {latest.outcome.value}, by "
        f"{latest.instance}): {cause}"
    )
    return [Finding(Level.WARNING, text, Section.HUNG)]


def _replicas(health: Health) -> list[Finding]:
    """What each replica asked (`--replicas`) says of itself, one finding each at most."""
    return [finding for answer in health.replicas if (finding := _replica(answer, health))]


def _replica(answer: ReplicaAnswer, health: Health) -> Finding | None:
    """A replica not answering, not ready, or whose latest cycle the history lacks."""
    name = f"replica {answer.address}"
    state = _replica_state(name, answer)
    lost = answer.unrecorded
    if lost is None:
        return state
    age = age_text(max((health.as_of - lost.ended_at).total_seconds(), 0.0))
    unrecorded = (
        f"its cycle of {age} ago ({lost.outcome}) is not in the history: {one_line(lost.error)}"
    )
    if state is None:
        return Finding(Level.WARNING, f"{name}: {unrecorded}", Section.HUNG)
    return Finding(state.level, f"{state.text}; {unrecorded}", state.section)


def _replica_state(name: str, answer: ReplicaAnswer) -> Finding | None:
    if not answer.answered:
        return Finding(
            Level.WARNING, f"{name} does not answer /readyz: {answer.detail}", Section.HUNG
        )
    if answer.needs_a_person:
        text = f"{name} cannot work until a person acts: {one_line(answer.detail)}"
        return Finding(Level.CRITICAL, text, Section.MISCONFIGURED)
    if not answer.ready:
        text = f"{name} is not ready: {one_line(answer.detail)}"
        return Finding(Level.WARNING, text, Section.HUNG)
    return None


def _backlog(health: Health) -> list[Finding]:
    backlog = health.backlog
    if isinstance(backlog, Unreadable):
        return [_unreadable("backlog", backlog)]
    if backlog <= BACKLOG_WARNING_ABOVE or not isinstance(health.cycles, CycleSummary):
        return []
    if paused(health) is not None:  # it grows while paused: the pause's finding says why
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
