"""The `ui` page without a browser: the chart's geometry, escaping in the template, the
answers of its server (routes, methods, basic authentication, headers)."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest

from slot_expiration.domain import CycleOutcome
from slot_expiration.quarantine.store import FailedSlot, QuarantineListing
from slot_expiration.status.report import CycleSummary, Unreadable
from slot_expiration.store import TransientStoreError
from slot_expiration.store.history_store import BacklogPoint
from slot_expiration.telemetry.http_server import Request
from slot_expiration.ui.chart import backlog_chart, nice_ceiling
from slot_expiration.ui.page import render_page
from slot_expiration.ui.server import UiPages
from slot_expiration.ui.snapshot import UiSnapshot
from tests.support.history import cycle_record
from tests.support.results import AS_OF, slot_refs

HOSTILE = "<script>alert('x')</script>"


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
    assert "at most 6000" in chart.summary
    # Whole hours, but none so close to an end (labelled apart) that labels would overlap.
    assert [tick.label for tick in chart.ticks] == ["08:00 UTC", "09:00 UTC", "10:00 UTC"]


def test_an_empty_history_draws_an_empty_chart_that_says_so() -> None:
    chart = backlog_chart([], AS_OF - timedelta(hours=6), AS_OF)

    assert chart.dots == ()
    assert chart.summary == "No cycle recorded a backlog in the last 6 hours."


def _snapshot(message: str = "slot refuses to expire", instance: str = "a:1") -> UiSnapshot:
    slot = slot_refs(1)[0]
    entry = FailedSlot(slot.id, slot.tenant_id, 1, AS_OF, AS_OF, AS_OF, "P0001", message)
    failed = cycle_record(AS_OF, CycleOutcome.FAILED, instance=instance, error=message)
    return UiSnapshot(
        as_of=AS_OF,
        latest_revision="0006",
        summary=CycleSummary(None, failed, (), (failed,)),
        recent=(failed,),
        backlog=(),
        backlog_now=0,
        quarantine=QuarantineListing(1, 0, (entry,), AS_OF),
        schema=Unreadable("permission denied", "42501"),
        index=Unreadable("permission denied", "42501"),
    )


def test_the_page_escapes_what_the_database_holds_and_keeps_its_structure() -> None:
    html = render_page(_snapshot(HOSTILE, instance="<i>x</i>"))

    assert HOSTILE not in html
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in html
    assert "&lt;i&gt;x&lt;/i&gt;" in html
    assert '<html lang="en">' in html
    assert html.count("<h1>") == 1
    assert '<th scope="col">' in html
    assert "<script" not in html
    assert "cannot read: permission denied (SQLSTATE 42501)" in html


def _request(path: str = "/", method: str = "GET", authorization: str | None = None) -> Request:
    headers = {} if authorization is None else {"authorization": authorization}
    return Request(method, path, headers)


def _pages(credentials: tuple[str, str] | None = None) -> UiPages:
    async def snapshot() -> UiSnapshot:
        return _snapshot()

    return UiPages(snapshot, credentials, str)


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


async def test_a_database_that_cannot_be_read_is_a_503_page_that_says_why() -> None:
    async def unreachable() -> UiSnapshot:
        raise TransientStoreError("connection refused", "08001")

    reply = await UiPages(unreachable, None, lambda exc: f"cannot connect: {exc}").answer(
        _request()
    )

    assert reply.status == 503
    assert b"cannot connect: connection refused" in reply.body
