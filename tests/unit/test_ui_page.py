"""The `ui` page without a browser: the verdict first, identical failures folded, the chart's
geometry and words, escaping in the template, the answers of its server (routes, methods,
`?refresh`, basic authentication, headers)."""

from __future__ import annotations

import base64
import html
import re
from dataclasses import replace
from datetime import timedelta

import pytest

from slot_expiration.db import TransientStoreError
from slot_expiration.domain import CycleOutcome
from slot_expiration.history.store import BacklogPoint, CycleRecord
from slot_expiration.pause import Pause
from slot_expiration.quarantine.store import FailedSlot, QuarantineListing
from slot_expiration.status.check import Level, judge
from slot_expiration.status.replicas import ReplicaAnswer, Unrecorded
from slot_expiration.status.report import CycleSummary, Health, Unreadable
from slot_expiration.status.store import SchemaState
from slot_expiration.telemetry.http_messages import Request
from slot_expiration.ui.chart import backlog_chart, nice_ceiling
from slot_expiration.ui.page import PageOptions, render_page
from slot_expiration.ui.server import UiPages
from slot_expiration.ui.snapshot import UiSnapshot
from tests.support.history import cycle_record
from tests.support.results import AS_OF, slot_refs

HOSTILE = "<script>alert('x')</script>"
PAUSED = CycleOutcome.PAUSED


@pytest.mark.parametrize(
    ("value", "ceiling"),
    [(0, 10), (7, 10), (11, 20), (340, 500), (5_001, 10_000), (100_000, 100_000)],
)
def test_the_y_axis_ends_on_a_round_number_at_or_above_the_highest_point(
    value: int, ceiling: int
) -> None:
    assert nice_ceiling(value) == ceiling


def test_the_chart_places_points_in_time_and_draws_the_alert_line_when_within_scale() -> None:
    start = AS_OF - timedelta(hours=6)
    points = [
        BacklogPoint(start, 0),
        BacklogPoint(AS_OF - timedelta(hours=3), 6_000),
        BacklogPoint(AS_OF, 3),
    ]

    chart = backlog_chart(points, start, AS_OF)
    small = backlog_chart([BacklogPoint(AS_OF, 40)], start, AS_OF)

    xs = [dot.x for dot in chart.dots]
    assert xs == sorted(xs)
    assert xs[0] == chart.left
    assert xs[-1] == chart.right_x
    assert chart.dots[1].y < chart.dots[2].y < chart.dots[0].y + 0.001  # higher is up
    assert chart.top_value == 10_000
    assert chart.threshold_y is not None
    assert small.threshold_y is None  # 5,000 is far above a chart that ends at 50
    assert "at most 6000 (at 09:00 UTC)" in chart.summary
    # Whole hours, but none so close to an end (labelled apart) that labels would overlap.
    assert [tick.label for tick in chart.ticks] == ["08:00 UTC", "09:00 UTC", "10:00 UTC"]


def test_an_empty_history_draws_an_empty_chart_that_says_so() -> None:
    chart = backlog_chart([], AS_OF - timedelta(hours=6), AS_OF)

    assert chart.dots == ()
    assert chart.summary == "No cycle has run yet. No cycle recorded a backlog in the last 6 hours."


def test_the_charts_words_say_what_the_latest_cycle_left_not_its_bucket_at_most() -> None:
    """A point is the largest backlog left in its 3 minutes: the latest cycle left 5 while
    its bucket's largest was 19505 (another replica's count before the drain)."""
    latest = cycle_record(AS_OF - timedelta(seconds=20), backlog=5)
    points = [BacklogPoint(AS_OF - timedelta(hours=1), 20_000), BacklogPoint(AS_OF, 19_505)]

    chart = backlog_chart(points, AS_OF - timedelta(hours=6), AS_OF, latest)

    assert chart.summary.startswith("The latest cycle (11:59 UTC) left 5. ")
    assert "19505" not in chart.summary
    assert "at most 20000 (at 11:00 UTC)" in chart.summary


OPTIONS = PageOptions("https://runbooks.example.org/slot-expiration")


def _snapshot(
    message: str = "slot refuses to expire",
    instance: str = "a:1",
    recent: tuple[CycleRecord, ...] | None = None,
) -> UiSnapshot:
    slot = slot_refs(1)[0]
    entry = FailedSlot(slot.id, slot.tenant_id, 1, AS_OF, AS_OF, AS_OF, "P0001", message)
    failed = cycle_record(AS_OF, CycleOutcome.FAILED, instance=instance, error=message)
    cycles = recent or (failed,)
    health = Health(
        as_of=AS_OF,
        latest_revision="0007",
        schema=Unreadable("permission denied", "42501"),
        cycles=CycleSummary(None, failed, (), cycles[0], (cycles[0],)),
        backlog=0,
        quarantine=QuarantineListing(1, 0, (entry,), AS_OF),
    )
    return UiSnapshot(
        health=health,
        recent=cycles,
        backlog=(),
        index=Unreadable("permission denied", "42501"),
    )


def _render(snapshot: UiSnapshot, options: PageOptions = OPTIONS) -> str:
    return render_page(snapshot, judge(snapshot.health, 300), options)


def test_the_page_escapes_what_the_database_holds_and_keeps_its_structure() -> None:
    html = _render(_snapshot(HOSTILE, instance="<i>x</i>"))

    assert HOSTILE not in html
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in html
    assert "&lt;i&gt;x&lt;/i&gt;" in html
    assert '<html lang="en">' in html
    assert html.count("<h1>") == 1
    assert '<th scope="col">' in html
    assert "<script" not in html
    assert "cannot read: permission denied (SQLSTATE 42501)" in html


def test_the_first_section_is_the_verdict_status_check_gives_with_the_runbooks_sections() -> None:
    snapshot = _snapshot()
    verdict = judge(snapshot.health, 300)

    html = _render(snapshot)

    first = html.index("<section")
    assert html.index('id="verdict"') < html.index("<section", first + 1)
    assert f'<p id="verdict-summary" class="summary">{verdict.summary()}</p>' in html
    assert verdict.level is Level.CRITICAL  # no success in the history
    assert f'class="verdict {verdict.level.name.lower()}"' in html
    assert f'href="{OPTIONS.runbook_url}#worker-hung-or-backlog-growing"' in html
    assert f'href="{OPTIONS.runbook_url}#what-the-verdict-says"' in html
    assert "<title>CRITICAL · slot-expiration</title>" in html


def test_identical_failures_in_a_row_are_one_row_that_says_how_many_since_when() -> None:
    refused = "connection to server at 127.0.0.1, port 5432 failed: Connection refused"
    failures = tuple(
        cycle_record(
            AS_OF - timedelta(minutes=5 * n),
            CycleOutcome.FAILED,
            instance="a:1" if n % 2 else "b:2",
            sqlstate="08001",
            error=refused,
        )
        for n in range(24)
    )
    success = cycle_record(AS_OF - timedelta(hours=2, minutes=5), instance="a:1", backlog=3)

    html = _render(_snapshot(recent=(*failures, success)))

    assert html.count('<tr class="folded">') == 1
    assert "failed 24\u00d7 since 10:05 UTC" in html
    assert html.count(refused) == 1
    assert '<span class="replica">b:2</span>, <span class="replica">a:1</span>' in html
    assert html.count('<td class="outcome ok">success</td>') == 1


def test_the_replicas_section_says_what_each_said_or_that_none_was_asked() -> None:
    lost = Unrecorded("misconfigured", AS_OF - timedelta(seconds=8), "password refused (28P01)")
    answers = (
        ReplicaAnswer("10.0.0.5:9464", False, False, "Connection refused"),
        ReplicaAnswer("10.0.0.6:9464", True, False, "the last cycle failed", True, lost),
        ReplicaAnswer("10.0.0.7:9464", True, True, "database answers, schema up to date"),
    )
    snapshot = _snapshot()
    asked = replace(snapshot, health=replace(snapshot.health, replicas=answers))

    none = _text(_render(snapshot))
    shown = _text(_render(asked))

    assert "Replicas Not asked. Given the replicas' endpoints (--replicas" in none
    assert "it shows only as silence (no cycle recorded)" in none
    assert "10.0.0.5:9464 no answer Connection refused" in shown
    assert (
        "10.0.0.6:9464 not ready: a person must act the last cycle failed 8s ago, "
        "misconfigured, not in the history: password refused (28P01)"
    ) in shown
    assert "10.0.0.7:9464 ready database answers, schema up to date" in shown


def test_counts_and_their_words_agree_in_number() -> None:
    slot = slot_refs(1)[0]
    entry = FailedSlot(slot.id, slot.tenant_id, 1, AS_OF, AS_OF, AS_OF, "P0001", "no")
    one = _snapshot()
    one = replace(
        one,
        health=replace(one.health, backlog=1, quarantine=QuarantineListing(1, 0, (entry,), AS_OF)),
    )
    two = replace(
        one,
        health=replace(
            one.health, backlog=2, quarantine=QuarantineListing(2, 0, (entry, entry), AS_OF)
        ),
    )

    single, plural = _render(one), _render(two)

    assert "<dd>1 Available slot has started;" in single
    assert "<dd>1 slot retried on its backoff;" in single
    assert "<dd>2 Available slots have started;" in plural
    assert "<dd>2 slots retried on their backoff;" in plural


def _text(page: str) -> str:
    """The page's words, tags left out, runs of blanks as one space."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", page)).split())


def test_the_page_reloads_itself_only_when_asked_for_without_a_script() -> None:
    plain = _render(_snapshot())
    reloading = _render(_snapshot(), PageOptions(OPTIONS.runbook_url, refresh_seconds=30))

    assert 'http-equiv="refresh"' not in plain
    assert '<meta http-equiv="refresh" content="30">' in reloading
    assert "<script" not in reloading


def _request(path: str = "/", method: str = "GET", authorization: str | None = None) -> Request:
    headers = {} if authorization is None else {"authorization": authorization}
    return Request(method, path, headers)


def _pages(credentials: tuple[str, str] | None = None) -> UiPages:
    async def snapshot() -> UiSnapshot:
        return _snapshot()

    return UiPages(snapshot, credentials, str, 300, OPTIONS)


def _basic(text: str) -> str:
    return "Basic " + base64.b64encode(text.encode()).decode()


async def test_the_page_is_served_at_the_root_with_strict_headers_and_nowhere_else() -> None:
    pages = _pages()

    page = await pages.answer(_request())
    other = await pages.answer(_request("/metrics"))
    posted = await pages.answer(_request(method="POST"))

    assert (page.status, page.content_type) == (200, "text/html; charset=utf-8")
    headers = dict(page.headers)
    assert "script-src" not in headers["content-security-policy"]  # default-src 'none' rules
    assert headers["content-security-policy"].startswith("default-src 'none'; style-src 'sha256-")
    assert headers["x-frame-options"] == "DENY"
    assert (other.status, posted.status) == (404, 405)


@pytest.mark.parametrize(
    "authorization",
    [None, _basic("oncall:wrong"), _basic("oncall"), "Basic !!!", "Bearer abc", _basic("x:ui-pw")],
)
async def test_without_the_right_credentials_the_answer_is_401(authorization: str | None) -> None:
    reply = await _pages(("oncall", "ui-pw")).answer(_request(authorization=authorization))

    assert reply.status == 401
    assert dict(reply.headers)["www-authenticate"].startswith('Basic realm="slot-expiration"')


async def test_with_the_right_credentials_the_page_is_served() -> None:
    reply = await _pages(("oncall", "ui-pw")).answer(_request(authorization=_basic("oncall:ui-pw")))

    assert reply.status == 200


async def test_an_unreadable_database_is_a_503_page_whose_verdict_is_unknown() -> None:
    async def unreachable() -> UiSnapshot:
        raise TransientStoreError("connection refused", "08001")

    pages = UiPages(unreachable, None, lambda exc: f"cannot connect: {exc}", 300, OPTIONS)
    reply = await pages.answer(_request())

    assert reply.status == 503
    assert b"UNKNOWN: cannot connect: connection refused" in reply.body
    assert b'class="verdict unknown"' in reply.body


@pytest.mark.parametrize(
    ("query", "refused"),
    [
        ("refresh=30", None),
        ("refresh=4", "refresh: a whole number of seconds from 5 to 3600, once"),
        ("refresh=abc", "refresh: a whole number of seconds from 5 to 3600, once"),
        ("refresh=30&refresh=40", "refresh: a whole number of seconds from 5 to 3600, once"),
        ("theme=dark", "unknown parameter 'theme': the page takes ?refresh=SECONDS"),
        ("refresh", "the query is not name=value pairs: give ?refresh=SECONDS"),
    ],
)
async def test_the_page_takes_refresh_and_refuses_any_other_query_in_one_line(
    query: str, refused: str | None
) -> None:
    reply = await _pages().answer(Request("GET", "/", {}, query))

    if refused is None:
        assert reply.status == 200
        assert b'<meta http-equiv="refresh" content="30">' in reply.body
    else:
        assert (reply.status, reply.body) == (400, f"{refused}\n".encode())


def test_a_pause_is_shown_escaped_judged_with_its_runbook_section_and_its_cycles_folded() -> None:
    paused_at = AS_OF - timedelta(hours=1)
    pause = Pause(paused_at, "ops", paused_at + timedelta(hours=2), HOSTILE)
    last_success = cycle_record(paused_at - timedelta(minutes=1), instance="a:1", backlog=3)
    paused = tuple(
        replace(cycle_record(AS_OF - timedelta(minutes=5 * n), instance="a:1"), outcome=PAUSED)
        for n in range(12)
    )
    snapshot = _snapshot(recent=(*paused, last_success))
    cycles = CycleSummary(last_success, None, (), paused[0], (paused[0],), None)
    snapshot = replace(
        snapshot,
        health=replace(
            snapshot.health,
            cycles=cycles,
            schema=SchemaState("0007", (), ()),
            quarantine=QuarantineListing(0, 0, (), None),
            pause=pause,
        ),
    )

    html = _render(snapshot)

    assert HOSTILE not in html
    escaped = "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"
    assert (
        f'<dd id="pause">paused by ops until 2026-12-02 13:00:00 UTC, for 1h 0m so far: '
        f"{escaped}</dd>"
    ) in html
    assert "<title>WARNING · slot-expiration</title>" in html
    assert f'href="{OPTIONS.runbook_url}#the-worker-is-paused"' in html
    assert html.count('<td class="outcome paused">') == 1
    assert "paused 12\u00d7 since 11:05 UTC" in html
