"""The deployment's pause: `--for` read strictly, the verdict on a pause judged on the clock
it is given (WARNING while it holds, CRITICAL past its end or past the limit of one given
none), what a replica exports and serves while paused."""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from slot_expiration.cli.duration import parse_duration
from slot_expiration.domain import CycleOutcome
from slot_expiration.expiry import CycleEnded, PauseChecked
from slot_expiration.history.store import CycleRecord
from slot_expiration.pause import LIMIT_WITHOUT_END, LONGEST, Pause, span_text
from slot_expiration.quarantine.store import QuarantineListing
from slot_expiration.schema.version import HEAD_REVISION
from slot_expiration.status.check import Level, Section, judge
from slot_expiration.status.report import CycleSummary, Health
from slot_expiration.status.store import SchemaState
from slot_expiration.telemetry.metrics import Metrics
from slot_expiration.telemetry.readiness import Readiness
from tests.support.history import cycle_record
from tests.support.results import AS_OF, FakeClock, cycle_result

SECOND = timedelta(seconds=1)
UNITS = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}


# -- `--for`: durations -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "lasting"),
    [
        ("90s", timedelta(seconds=90)),
        ("30m", timedelta(minutes=30)),
        ("2h", timedelta(hours=2)),
        ("1d", timedelta(days=1)),
        ("1h30m", timedelta(minutes=90)),
        ("7d", LONGEST),
    ],
)
def test_the_durations_an_operator_types_are_read(text: str, lasting: timedelta) -> None:
    assert parse_duration(text, LONGEST) == lasting


@given(st.integers(min_value=1, max_value=int(LONGEST.total_seconds())))
def test_every_duration_up_to_the_longest_reads_back_as_it_is_written(seconds: int) -> None:
    lasting = timedelta(seconds=seconds)

    assert parse_duration(span_text(lasting), LONGEST) == lasting


@given(
    st.lists(
        st.tuples(st.sampled_from("dhms"), st.integers(min_value=0, max_value=999)),
        min_size=1,
        max_size=4,
        unique_by=lambda part: part[0],
    )
)
def test_parts_in_the_order_d_h_m_s_add_up_and_any_other_order_is_refused(
    parts: list[tuple[str, int]],
) -> None:
    text = "".join(f"{count}{unit}" for unit, count in parts)
    seconds = sum(UNITS[unit] * count for unit, count in parts)
    in_order = [unit for unit, _ in parts] == [u for u in "dhms" if u in dict(parts)]
    longest = timedelta(days=10_000)

    if in_order and seconds > 0:
        assert parse_duration(text, longest) == timedelta(seconds=seconds)
    else:
        with pytest.raises(ValueError, match=r"^a duration such as 90s"):
            parse_duration(text, longest)


@given(st.text(max_size=20))
def test_any_other_text_is_refused_in_one_line_that_never_quotes_it(text: str) -> None:
    if re.fullmatch(r"(?:[0-9]{1,6}d)?(?:[0-9]{1,6}h)?(?:[0-9]{1,6}m)?(?:[0-9]{1,6}s)?", text):
        return  # a duration, read by the tests above
    with pytest.raises(ValueError, match=r"^a duration such as") as refused:
        parse_duration(text, LONGEST)

    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("a duration such as 90s, 30m, 2h or 1h30m")
    if len(text.strip()) > 2:
        assert text not in message


@pytest.mark.parametrize("text", ["0s", "0m", "0h0m0s", "7d1s", "8d", "1000000h"])
def test_nothing_and_more_than_the_longest_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="above 0 and at most 7d"):
        parse_duration(text, LONGEST)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "30",
        "m",
        "30 m",
        "-30m",
        "+30m",
        "1.5h",
        "30M",
        "30min",
        "\u0663\u0660m",
        "30m ",
        "1e3s",
    ],
)
def test_what_is_not_a_whole_number_and_a_unit_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="whole numbers of d, h, m and s"):
        parse_duration(text, LONGEST)


# -- the verdict on a pause, judged at `as_of` -----------------------------------------------

PAUSED_AT = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def _pause(until: timedelta | None = timedelta(minutes=30)) -> Pause:
    return Pause(
        paused_at=PAUSED_AT,
        paused_by="ops",
        paused_until=None if until is None else PAUSED_AT + until,
        reason="database upgrade",
    )


def _health(
    as_of: datetime,
    pause: Pause | None,
    *,
    last_success: datetime | None = None,
    backlog: int = 10,
    change: int | None = None,
) -> Health:
    """A deployment whose last success was a minute before the pause (unless told) and that
    has been paused since (each replica's latest cycle recorded `paused`)."""
    last = cycle_record(last_success or PAUSED_AT - timedelta(minutes=1), instance="a:1")
    latest = _paused_cycle(as_of - timedelta(minutes=2)) if pause is not None else last
    summary = CycleSummary(last, None, (), latest, (latest,), change)
    fields: dict[str, Any] = {
        "as_of": as_of,
        "latest_revision": HEAD_REVISION,
        "cycles": summary,
        "schema": SchemaState(HEAD_REVISION, (), ()),
        "backlog": backlog,
        "quarantine": QuarantineListing(0, 0, (), None),
        "pause": pause,
    }
    return Health(**fields)


def _paused_cycle(ended_at: datetime) -> CycleRecord:
    return replace(cycle_record(ended_at, instance="a:1"), outcome=CycleOutcome.PAUSED)


def test_a_pause_within_its_end_is_a_warning_saying_who_until_when_and_why() -> None:
    verdict = judge(_health(PAUSED_AT + timedelta(minutes=10), _pause()), 300)

    assert verdict.level is Level.WARNING
    assert verdict.summary() == (
        "WARNING: paused by ops until 2026-12-02 10:30:00 UTC, 20m 0s left: database upgrade"
    )
    assert [f.section for f in verdict.ordered()] == [Section.PAUSED]


def test_a_pause_at_its_end_is_still_a_warning_and_a_second_later_critical() -> None:
    at_end = judge(_health(PAUSED_AT + timedelta(minutes=30), _pause()), 300)
    past = judge(_health(PAUSED_AT + timedelta(minutes=30) + SECOND, _pause()), 300)
    long_past = judge(_health(PAUSED_AT + timedelta(hours=2), _pause()), 300)

    assert at_end.level is Level.WARNING
    assert past.level is Level.CRITICAL
    assert long_past.summary() == (
        "CRITICAL: paused by ops until 2026-12-02 10:30:00 UTC, 1h 30m past its end: "
        "database upgrade"
    )


def test_a_pause_given_no_end_is_a_warning_until_its_limit_then_critical() -> None:
    within = judge(_health(PAUSED_AT + timedelta(hours=1), _pause(None)), 300)
    at_limit = judge(_health(PAUSED_AT + LIMIT_WITHOUT_END, _pause(None)), 300)
    past = judge(_health(PAUSED_AT + LIMIT_WITHOUT_END + timedelta(minutes=5), _pause(None)), 300)

    assert within.summary() == (
        "WARNING: paused by ops since 2026-12-02 10:00:00 UTC, no end given, for 1h 0m "
        "(limit 4h 0m): database upgrade"
    )
    assert at_limit.level is Level.WARNING
    assert past.level is Level.CRITICAL
    assert past.summary() == (
        "CRITICAL: paused by ops since 2026-12-02 10:00:00 UTC, no end given, for 4h 5m, past "
        "the limit of 4h 0m: database upgrade"
    )


def test_while_paused_no_success_and_a_growing_backlog_are_not_held_against_the_replicas() -> None:
    """An hour into a 2-hour pause: without it, both would be findings."""
    as_of = PAUSED_AT + timedelta(hours=1)
    paused = judge(_health(as_of, _pause(timedelta(hours=2)), backlog=9_000, change=500), 300)
    unpaused = judge(_health(as_of, None, backlog=9_000, change=500), 300)

    assert paused.level is Level.WARNING
    assert [f.section for f in paused.ordered()] == [Section.PAUSED]
    assert unpaused.level is Level.CRITICAL
    assert {f.section for f in unpaused.ordered()} == {Section.HUNG}


def test_replicas_stuck_before_the_pause_are_still_critical() -> None:
    as_of = PAUSED_AT + timedelta(minutes=10)
    stuck = _health(as_of, _pause(), last_success=PAUSED_AT - timedelta(hours=1))

    verdict = judge(stuck, 300)

    assert verdict.level is Level.CRITICAL
    assert "no successful cycle for 1h 10m, since before the pause" in verdict.summary()
    assert verdict.ordered()[-1].section is Section.PAUSED


def test_resumed_the_verdict_says_nothing_of_the_pause() -> None:
    verdict = judge(_health(PAUSED_AT + timedelta(minutes=10), None), 300)

    assert verdict.level is Level.OK
    assert "paused" not in verdict.summary()


# -- what a paused replica exports and serves -------------------------------------------------


def _gauges(metrics: Metrics) -> dict[str, float]:
    families = text_string_to_metric_families(metrics.exposition().decode())
    return {
        s.name: s.value
        for f in families
        for s in f.samples
        if s.name.startswith("calendar_slot_expiration_pause")
        or s.name == "calendar_slot_expiration_last_success_timestamp_seconds"
    }


def test_a_paused_cycle_exports_the_pause_its_age_and_limit_and_no_success() -> None:
    metrics = Metrics(wall_clock=FakeClock(1_796_000_000.0))
    run_id = uuid4()

    metrics(PauseChecked(run_id, _pause(), PAUSED_AT + timedelta(minutes=35)))
    metrics(CycleEnded(cycle_result(run_id, outcome=CycleOutcome.PAUSED)))

    assert _gauges(metrics) == {
        "calendar_slot_expiration_paused": 1.0,
        "calendar_slot_expiration_pause_age_seconds": 2_100.0,
        "calendar_slot_expiration_pause_limit_seconds": 1_800.0,
        "calendar_slot_expiration_last_success_timestamp_seconds": 0.0,
    }
    metrics(PauseChecked(run_id, None, PAUSED_AT + timedelta(minutes=40)))
    assert _gauges(metrics)["calendar_slot_expiration_paused"] == 0.0
    assert _gauges(metrics)["calendar_slot_expiration_pause_age_seconds"] == 0.0
    assert _gauges(metrics)["calendar_slot_expiration_pause_limit_seconds"] == 0.0


def test_a_paused_cycle_is_logged_as_information_not_as_an_error() -> None:
    assert CycleOutcome.PAUSED.log_level == logging.INFO
    assert not CycleOutcome.PAUSED.is_failure
    assert not CycleOutcome.PAUSED.needs_a_person


async def test_a_paused_replica_stays_ready_and_says_who_paused_it_until_when_and_why() -> None:
    async def revision() -> str | None:
        return HEAD_REVISION

    readiness = Readiness(revision, HEAD_REVISION)
    readiness(PauseChecked(uuid4(), _pause(), AS_OF))
    readiness(CycleEnded(cycle_result(outcome=CycleOutcome.PAUSED)))

    report = await readiness.report()

    assert report.ready
    assert report.detail == (
        "database answers, schema up to date; paused by ops until 2026-12-02 10:30:00 UTC: "
        "database upgrade"
    )
    assert report.as_json()["pause"]["reason"] == "database upgrade"
