"""The page, rendered by Jinja2 with autoescape on: every value from the database (an
instance name, a message, a SQLSTATE) reaches the HTML escaped, whatever it holds.

The template (templates/page.html) only lays out; what to say is decided here. First the
deployment's verdict, judged by the code `status --check` runs (status/check.py), with the
runbook's section for each finding; then what the on-call reads next: the last success,
the pause in force, the backlog and its trend, the quarantine, the recent cycles (identical
failures in a row, and paused cycles, folded into one row), the chart, the schema and the
index.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any, Final

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from slot_expiration.domain import CycleOutcome
from slot_expiration.history.store import CycleRecord
from slot_expiration.status.check import Finding, Section, Verdict
from slot_expiration.status.render import drain_text, index_text, pause_text, schema_text
from slot_expiration.status.replicas import ReplicaAnswer
from slot_expiration.status.report import CycleSummary, Health, Quarantine, Unreadable
from slot_expiration.status.wording import age_text, count_of, due_text, one_line
from slot_expiration.ui.chart import BacklogChart, backlog_chart
from slot_expiration.ui.snapshot import CHART_POINTS, CHART_WINDOW, RECENT_CYCLES, UiSnapshot

TEMPLATE: Final = "page.html"
STYLESHEET: Final = "page.css"
# Rows of the recent cycles' table, once identical failures in a row are folded.
CYCLE_ROWS: Final = 24
# "failed 24\u00d7 since 19:40 UTC": the multiplication sign, as a person writes it.
TIMES: Final = "\u00d7"


@cache
def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("slot_expiration.ui", "templates"),
        # Every template of this package is HTML: escape always, not by file name.
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.tests["unreadable"] = lambda value: isinstance(value, Unreadable)
    return env


@cache
def stylesheet() -> str:
    """The page's CSS, inlined in a <style> element."""
    loader = environment().loader
    assert loader is not None
    source, _, _ = loader.get_source(environment(), STYLESHEET)
    return source


@cache
def style_hash() -> str:
    """The CSP hash of the inline stylesheet: the page allows that style and nothing else."""
    digest = hashlib.sha256(stylesheet().encode()).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


@dataclass(frozen=True, slots=True)
class PageOptions:
    """How the page is served: where the runbook is published (its sections are linked by
    anchor), and, when asked for (`?refresh=SECONDS`), how often the browser reloads it."""

    runbook_url: str
    refresh_seconds: int | None = None


@dataclass(frozen=True, slots=True)
class VerdictView:
    level: str  # OK, WARNING, CRITICAL or UNKNOWN: the text and the colour
    summary: str  # the line `status --check` prints
    findings: tuple[tuple[Finding, str], ...]  # worst first, each with its runbook link
    link: str  # the runbook's section on what each verdict asks of the on-call


@dataclass(frozen=True, slots=True)
class CycleRow:
    """One cycle, or identical failures in a row folded into one: `count` of them, the
    latest ended `ended`, the first `since`."""

    ended: datetime
    since: str
    count: int
    instances: tuple[str, ...]  # each replica once, newest first
    outcome: str
    ok: bool
    paused: bool  # neither ok nor bad: the replicas obeyed a pause
    expired: int
    skipped: int
    failed: int
    batches: int
    duration: str
    backlog: str
    error: str

    @property
    def folded(self) -> bool:
        return self.count > 1


def render_page(snapshot: UiSnapshot, verdict: Verdict, options: PageOptions) -> str:
    return environment().get_template(TEMPLATE).render(context(snapshot, verdict, options))


def render_unjudged(verdict: Verdict, options: PageOptions) -> str:
    """The page when the database cannot be read at all (unreachable, refused): the verdict
    alone, UNKNOWN, as `status --check` says it."""
    return (
        environment()
        .get_template(TEMPLATE)
        .render(
            as_of=None,
            verdict=_verdict(verdict, options.runbook_url),
            refresh=options.refresh_seconds,
            stylesheet=stylesheet(),
        )
    )


def context(snapshot: UiSnapshot, verdict: Verdict, options: PageOptions) -> dict[str, Any]:
    health = snapshot.health
    as_of = health.as_of
    cycles = health.cycles
    latest = cycles.latest if isinstance(cycles, CycleSummary) else None
    return {
        "as_of": _iso(as_of),
        "refresh": options.refresh_seconds,
        "stylesheet": stylesheet(),
        "verdict": _verdict(verdict, options.runbook_url),
        "last_success": _part(cycles, lambda c: _last_success(c, as_of)),
        "latest_cycle": _part(cycles, lambda c: _latest_cycle(c, as_of)),
        "pause": pause_text(health.pause, as_of),
        "pause_unreadable": isinstance(health.pause, Unreadable),
        "backlog": _part(health.backlog, lambda n: _backlog(n, health)),
        "drain": _part(health.drain(), lambda _: drain_text(health)),
        "quarantine_now": _part(health.quarantine, lambda q: _quarantine_now(q, health)),
        "cycles": _part(snapshot.recent, _cycle_rows),
        "cycles_read": RECENT_CYCLES,
        "chart": _part(snapshot.backlog, lambda points: _chart(points, as_of, latest)),
        "quarantine": health.quarantine,
        "replicas": [_replica(answer, as_of) for answer in health.replicas],
        "schema": _part(health.schema, lambda s: schema_text(s, health.latest_revision)),
        "index": _part(snapshot.index, index_text),
        "count_of": count_of,
        "when": when,
        "one_line": one_line,
    }


def _part(part: Any, shape: Any) -> Any:
    return part if isinstance(part, Unreadable) else shape(part)


def _verdict(verdict: Verdict, runbook_url: str) -> VerdictView:
    return VerdictView(
        level=verdict.level.name,
        summary=verdict.summary(),
        findings=tuple((f, f"{runbook_url}#{f.section.value}") for f in verdict.ordered()),
        link=f"{runbook_url}#{Section.VERDICT.value}",
    )


def _chart(points: Any, as_of: datetime, latest: CycleRecord | None) -> BacklogChart:
    return backlog_chart(points, as_of - CHART_WINDOW, as_of, latest, CHART_WINDOW / CHART_POINTS)


def _last_success(cycles: CycleSummary, as_of: datetime) -> str:
    last = cycles.last_success
    if last is None:
        return "none in the history" if cycles.latest else "none: no cycle has run yet"
    ago = age_text((as_of - last.ended_at).total_seconds())
    return f"{ago} ago ({_iso(last.ended_at)}) by {last.instance}"


def _latest_cycle(cycles: CycleSummary, as_of: datetime) -> str:
    """The latest cycle of any outcome: how long the history has been silent."""
    latest = cycles.latest
    if latest is None:
        return "none: no cycle has run yet"
    ago = age_text((as_of - latest.ended_at).total_seconds())
    return f"{ago} ago ({_iso(latest.ended_at)}) by {latest.instance}: {latest.outcome.value}"


@dataclass(frozen=True, slots=True)
class ReplicaRow:
    """What one replica said of itself at /readyz."""

    address: str
    state: str  # ready, not ready, a person must act, no answer
    ok: bool
    detail: str
    unrecorded: str  # its latest cycle the history lacks, or ""


def _replica(answer: ReplicaAnswer, as_of: datetime) -> ReplicaRow:
    if not answer.answered:
        state = "no answer"
    elif answer.needs_a_person:
        state = "not ready: a person must act"
    else:
        state = "ready" if answer.ready else "not ready"
    lost = answer.unrecorded
    unrecorded = (
        ""
        if lost is None
        else f"{age_text(max((as_of - lost.ended_at).total_seconds(), 0.0))} ago, "
        f"{lost.outcome}, not in the history: {one_line(lost.error)}"
    )
    return ReplicaRow(
        answer.address, state, answer.ready and lost is None, one_line(answer.detail), unrecorded
    )


def _backlog(count: int, health: Health) -> str:
    now = due_text(count, health.backlog_capped)
    if not isinstance(health.cycles, CycleSummary):
        return now
    change, window = health.cycles.backlog_change, health.cycles.trend_window
    over = age_text(window.total_seconds())
    if change is None:
        trend = "no trend: no two successful cycles in a row to read it from"
    elif change < 0:
        trend = f"coming down: {change} over {over}"
    elif change == 0:
        trend = f"not coming down over {over}"
    else:
        trend = f"growing: +{change} over {over}"
    return f"{now}; {trend}"


def _quarantine_now(quarantine: Quarantine, health: Health) -> str:
    if quarantine.total == 0:
        return "empty"
    parts = []
    if quarantine.waiting:
        their = "its" if quarantine.waiting == 1 else "their"
        parts.append(f"{count_of(quarantine.waiting, 'slot')} retried on {their} backoff")
    if quarantine.parked:
        parts.append(f"{quarantine.parked} parked (not retried until someone retries them)")
    text = ", ".join(parts)
    since = quarantine.waiting_since
    if since is not None:
        age = age_text((health.as_of - since).total_seconds())
        text += f"; the oldest in quarantine since {_iso(since)} ({age})"
    return text


def _cycle_rows(recent: tuple[CycleRecord, ...]) -> list[CycleRow]:
    """The cycles, newest first; identical failures in a row (the same outcome, error and
    SQLSTATE, from any instance), and paused cycles in a row, folded into one row."""
    groups: list[list[CycleRecord]] = []
    for cycle in recent:
        previous = groups[-1][-1] if groups else None
        if previous is not None and _same_failure(previous, cycle):
            groups[-1].append(cycle)
        elif len(groups) == CYCLE_ROWS:
            break
        else:
            groups.append([cycle])
    return [_row(group) for group in groups]


def _same_failure(one: CycleRecord, other: CycleRecord) -> bool:
    failed = one.outcome is not CycleOutcome.SUCCESS
    key = (one.outcome, one.error_type, one.sqlstate, one.error)
    return failed and key == (other.outcome, other.error_type, other.sqlstate, other.error)


def _row(group: list[CycleRecord]) -> CycleRow:
    latest, first = group[0], group[-1]
    count = len(group)
    outcome = latest.outcome.value
    return CycleRow(
        ended=latest.ended_at,
        since=_iso(first.ended_at),
        count=count,
        instances=tuple(dict.fromkeys(c.instance for c in group)),
        outcome=f"{outcome} {count}{TIMES} since {_hm(first.ended_at)}" if count > 1 else outcome,
        ok=latest.outcome is CycleOutcome.SUCCESS,
        paused=latest.outcome is CycleOutcome.PAUSED,
        expired=sum(c.expired_count for c in group),
        skipped=sum(c.skipped_locked_count for c in group),
        failed=sum(c.failed_count for c in group),
        batches=sum(c.batches for c in group),
        duration=f"{latest.duration_ms:.0f} ms",
        backlog="" if latest.backlog is None else str(latest.backlog),
        error=_error(latest) if latest.error_type else "",
    )


def _error(cycle: CycleRecord) -> str:
    code = f" (SQLSTATE {cycle.sqlstate})" if cycle.sqlstate else ""
    return f"{cycle.error_type}{code}: {one_line(cycle.error or '')}"


def when(moment: datetime | None) -> tuple[str, str]:
    """A moment as a table's cell shows it: its date and its time (the template keeps each
    whole, so that a narrow column breaks between the two, never inside either)."""
    if moment is None:
        return "", ""
    utc = moment.astimezone(UTC)
    return f"{utc:%Y-%m-%d}", f"{utc:%H:%M:%S} UTC"


def _iso(moment: datetime | None) -> str:
    return "" if moment is None else f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def _hm(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%H:%M} UTC"
