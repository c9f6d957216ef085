"""The page, rendered by Jinja2 with autoescape on: every value from the database (an
instance name, a message, a SQLSTATE) reaches the HTML escaped, whatever it holds.

The template (templates/page.html) only lays out; what to say is decided here.
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
from slot_expiration.status.render import index_text, schema_text
from slot_expiration.status.report import CycleSummary, Unreadable
from slot_expiration.status.wording import age_text, count_of, one_line
from slot_expiration.store.history_store import CycleRecord
from slot_expiration.ui.chart import BacklogChart, backlog_chart
from slot_expiration.ui.snapshot import CHART_WINDOW, UiSnapshot

TEMPLATE: Final = "page.html"
STYLESHEET: Final = "page.css"


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
class CycleRow:
    ended: str
    instance: str
    outcome: str
    ok: bool
    expired: int
    skipped: int
    failed: int
    batches: int
    duration: str
    backlog: str
    error: str


def render_page(snapshot: UiSnapshot) -> str:
    return environment().get_template(TEMPLATE).render(context(snapshot))


def render_error(message: str) -> str:
    """The page when the database cannot be read at all (unreachable, refused)."""
    return (
        environment()
        .get_template(TEMPLATE)
        .render(as_of=None, error=message, stylesheet=stylesheet())
    )


def context(snapshot: UiSnapshot) -> dict[str, Any]:
    as_of = snapshot.as_of
    return {
        "as_of": _iso(as_of),
        "error": None,
        "stylesheet": stylesheet(),
        "summary": _part(snapshot.summary, lambda s: _summary(s, as_of)),
        "cycles": _part(snapshot.recent, lambda rows: [_cycle_row(c) for c in rows]),
        "chart": _part(snapshot.backlog, lambda points: _chart(points, as_of)),
        "backlog_now": _part(snapshot.backlog_now, str),
        "quarantine": _part(snapshot.quarantine, lambda q: q),
        "schema": _part(snapshot.schema, lambda s: schema_text(s, snapshot.latest_revision)),
        "index": _part(snapshot.index, index_text),
        "count_of": count_of,
        "iso": _iso,
        "one_line": one_line,
    }


def _part(part: Any, shape: Any) -> Any:
    return part if isinstance(part, Unreadable) else shape(part)


def _chart(points: Any, as_of: datetime) -> BacklogChart:
    return backlog_chart(points, as_of - CHART_WINDOW, as_of)


def _summary(cycles: CycleSummary, as_of: datetime) -> dict[str, Any]:
    return {
        "last_success": _last(cycles.last_success, as_of, "no successful cycle in the history"),
        "last_failure": _last(cycles.last_failure, as_of, "no failed cycle in the history"),
        "last_hour": [
            f"{instance}: {', '.join(f'{o.value} {n}' for o, n in sorted(outcomes.items()))}"
            for instance, outcomes in cycles.recent_by_instance().items()
        ],
    }


def _last(cycle: CycleRecord | None, as_of: datetime, none: str) -> str:
    if cycle is None:
        return none
    ago = age_text((as_of - cycle.ended_at).total_seconds())
    why = "" if cycle.outcome is CycleOutcome.SUCCESS else f": {_error(cycle)}"
    return f"{ago} ago by {cycle.instance} ({cycle.outcome.value}){why}"


def _cycle_row(cycle: CycleRecord) -> CycleRow:
    return CycleRow(
        ended=_iso(cycle.ended_at),
        instance=cycle.instance,
        outcome=cycle.outcome.value,
        ok=cycle.outcome is CycleOutcome.SUCCESS,
        expired=cycle.expired_count,
        skipped=cycle.skipped_locked_count,
        failed=cycle.failed_count,
        batches=cycle.batches,
        duration=f"{cycle.duration_ms:.0f} ms",
        backlog="" if cycle.backlog is None else str(cycle.backlog),
        error=_error(cycle) if cycle.error_type else "",
    )


def _error(cycle: CycleRecord) -> str:
    code = f" (SQLSTATE {cycle.sqlstate})" if cycle.sqlstate else ""
    return f"{cycle.error_type}{code}: {one_line(cycle.error or '')}"


def _iso(moment: datetime | None) -> str:
    return "" if moment is None else f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
