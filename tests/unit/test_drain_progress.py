"""A drain's progress: its rate and ETA on its own clock (the bar's and the logs'), the
deployment's read from the history (status's and the page's), and the line `once` ends
with: why the cycle stopped and what it left."""

from __future__ import annotations

import io
from dataclasses import replace
from datetime import timedelta
from uuid import uuid4

import pytest
from structlog.testing import capture_logs

from slot_expiration.cli.progress import ERASE_LINE, DrainBar, DrainSeen, drain_bar, pace_text
from slot_expiration.cli.worker_commands import stop_line
from slot_expiration.domain import CycleOutcome
from slot_expiration.expiry import (
    BatchCommitted,
    CycleEnded,
    DrainProgress,
    DrainStarted,
    StopReason,
)
from slot_expiration.expiry.drain import DRAIN_COUNT_CAP, DrainWatch, Pace
from slot_expiration.history.store import BacklogRow
from slot_expiration.options import CycleOptions, load_settings
from slot_expiration.status.render import drain_text
from slot_expiration.status.report import (
    CycleSummary,
    Health,
    Throttle,
    Unreadable,
    recent_pace,
    recent_throttle,
)
from slot_expiration.telemetry import LogEvent, LogSink
from tests.support.results import AS_OF, batch, cycle_result


class ManualClock:
    """A monotonic clock that moves only when told."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _settings(**given: object) -> CycleOptions:
    return load_settings(
        CycleOptions, environment=False, database_url="postgresql://w:pw@127.0.0.1/c", **given
    )


# -- a drain's own rate and ETA, on its clock -------------------------------------------------


def test_a_drains_rate_and_eta_are_read_on_its_clock_from_the_count_at_its_start() -> None:
    clock = ManualClock()
    watch = DrainWatch(300_000, clock)

    clock.now += 10.0
    progress = watch.progress(50_000)

    assert progress.rows_per_second == 5_000.0
    assert progress.left == 250_000
    assert progress.eta_seconds == 50.0
    assert not progress.capped

    clock.now += 40.0  # slower now: 10,000 more in 40 s, 60,000 in 50 s all told
    later = watch.progress(60_000)
    assert later.rows_per_second == 1_200.0
    assert later.eta_seconds == pytest.approx(240_000 / 1_200.0)


def test_no_rate_before_time_passes_and_no_eta_before_a_row_is_expired() -> None:
    clock = ManualClock()
    watch = DrainWatch(1_000, clock)

    assert watch.progress(0).rows_per_second is None
    clock.now += 2.0
    assert watch.progress(0).rows_per_second == 0.0
    assert watch.progress(0).eta_seconds is None


def test_nothing_left_is_an_eta_of_zero_and_more_expired_than_counted_leaves_none() -> None:
    done = DrainProgress(backlog_at_start=1_000, expired=1_200, seconds=4.0)

    assert (done.left, done.eta_seconds) == (0, 0.0)


def test_a_count_stopped_at_its_cap_is_said_to_be_at_least_that() -> None:
    capped = DrainProgress(DRAIN_COUNT_CAP, 100_000, 10.0)

    assert capped.capped
    assert pace_text(capped) == "10,000 rows/s, ETA >1m 30s"
    assert DrainStarted(uuid4(), DRAIN_COUNT_CAP).capped
    assert not DrainStarted(uuid4(), DRAIN_COUNT_CAP - 1).capped


def test_the_bars_figures_say_the_rate_and_eta_and_starting_before_any_rate() -> None:
    assert pace_text(DrainProgress(300_000, 248_500, 28.2)) == "8,812 rows/s, ETA 5s"
    assert pace_text(DrainProgress(100, 3, 7.5)) == "0.4 rows/s, ETA 4m 2s"
    assert pace_text(DrainProgress(100, 0, 0.0)) == "starting"


# -- the logs -------------------------------------------------------------------------------


def test_a_drains_batch_line_carries_its_rate_eta_and_what_is_left() -> None:
    run_id = uuid4()
    with capture_logs() as logs:
        sink = LogSink()
        sink(DrainStarted(run_id, 300_000))
        sink(BatchCommitted(run_id, batch(expired=2_000), DrainProgress(300_000, 2_000, 0.25)))

    started, line = logs
    assert (started["event"], started["backlog"], started["backlog_capped"]) == (
        LogEvent.DRAIN_STARTED,
        300_000,
        False,
    )
    assert line["event"] == LogEvent.BATCH_SELECTED
    assert (line["drain_expired"], line["rows_per_second"], line["left"]) == (
        2_000,
        8_000.0,
        298_000,
    )
    assert line["eta_seconds"] == 37.2


def test_a_drain_with_nothing_due_logs_no_drain_line() -> None:
    with capture_logs() as logs:
        LogSink()(DrainStarted(uuid4(), 0))

    assert logs == []


def test_a_batch_of_a_cycle_of_one_batch_carries_no_drain_figures() -> None:
    with capture_logs() as logs:
        LogSink()(BatchCommitted(uuid4(), batch(expired=5)))

    assert "rows_per_second" not in logs[0]
    assert "eta_seconds" not in logs[0]


# -- the terminal's bar -------------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_bar_off_a_terminal_nor_for_a_cycle_of_one_batch() -> None:
    assert drain_bar(_settings(max_batches_per_cycle=0), io.StringIO()) is None
    assert drain_bar(_settings(max_batches_per_cycle=1), Terminal()) is None
    assert isinstance(drain_bar(_settings(max_batches_per_cycle=0), Terminal()), DrainBar)


def test_on_a_terminal_the_bar_moves_with_each_batch_and_log_lines_go_above_it() -> None:
    terminal = Terminal()
    bar = drain_bar(_settings(max_batches_per_cycle=0), terminal)
    assert bar is not None
    run_id = uuid4()

    bar(DrainStarted(run_id, 4_000))
    bar.lines.write("a log line\n")
    bar(BatchCommitted(run_id, batch(expired=2_000), DrainProgress(4_000, 2_000, 1.0)))
    bar(CycleEnded(cycle_result(expired=2_000, duration_ms=1_500.0)))

    shown = terminal.getvalue()
    assert "draining 4,000 due" in shown
    assert "starting" in shown
    assert f"{ERASE_LINE}a log line\n" in shown  # the bar's line erased before the log's
    assert "2000/4000" in shown
    assert "50%" in shown
    assert "2,000 rows/s, ETA 1s" in shown
    # Its last state stays, the cursor shown again and the line ended.
    assert shown.endswith("2,000 rows/s, ETA 1s, ended in 1s\x1b[?25h\n")


# -- the deployment's pace, from the history ---------------------------------------------------


def _row(minutes: float, expired: int, duration_s: float = 30.0, instance: str = "a") -> BacklogRow:
    ended = AS_OF + timedelta(minutes=minutes)
    return BacklogRow(instance, ended, CycleOutcome.SUCCESS, 10_000, expired, duration_s * 1_000.0)


def test_the_deployments_pace_is_what_recent_cycles_expired_from_first_start_to_last_end() -> None:
    rows = [_row(-30, 99_999), _row(-9, 3_000), _row(-4, 3_000), _row(0, 3_000, instance="b")]

    pace = recent_pace(rows, AS_OF - timedelta(minutes=10))

    # The cycle 30 minutes ago is out; the first of the rest started at -9 min 30 s.
    assert pace == Pace(9_000, 9.5 * 60)


def test_a_worker_that_stopped_has_no_pace_whatever_it_did_before() -> None:
    rows = [_row(-30, 3_000), _row(-25, 3_000)]

    assert recent_pace(rows, AS_OF - timedelta(minutes=10)) is None
    assert recent_pace([], AS_OF - timedelta(minutes=10)) is None


def _health(backlog: int | Unreadable, pace: Pace | None, change: int | None = None) -> Health:
    cycles = CycleSummary(
        None, None, (), backlog_change=change, pace=pace, pace_window=timedelta(minutes=10)
    )
    return Health(AS_OF, "0007", Unreadable("x", None), cycles, backlog, Unreadable("x", None))


def test_status_and_the_page_say_the_drains_rate_left_and_eta() -> None:
    health = _health(51_500, Pace(60_000, 600.0))

    assert drain_text(health) == "100 rows/s over the last 10m 0s, 51,500 left, ETA 8m 35s"


def _waited(minutes: float, seconds: float, reason: str | None) -> BacklogRow:
    return replace(_row(minutes, 3_000), throttled_seconds=seconds, throttled_by=reason)


def test_the_drains_throttle_is_their_waits_share_of_the_pace_time_by_the_main_reason() -> None:
    rows = [
        _waited(-30, 500.0, "nice"),  # out of the window
        _waited(-9, 120.0, "replica_lag"),
        _waited(-4, 60.0, "replica_lag"),
        _waited(0, 48.0, "nice"),
        _waited(-2, 0.0, None),
    ]
    since = AS_OF - timedelta(minutes=10)
    pace = recent_pace(rows, since)
    assert pace is not None

    throttle = recent_throttle(rows, since, pace)

    assert throttle is not None
    assert (throttle.seconds, throttle.reason) == (228.0, "replica_lag")
    assert throttle.share == pytest.approx(228.0 / pace.seconds)
    assert recent_throttle([_waited(-2, 0.0, None)], since, pace) is None


def _held(throttle: Throttle) -> Health:
    cycles = CycleSummary(
        None,
        None,
        (),
        pace=Pace(60_000, 600.0),
        pace_window=timedelta(minutes=10),
        throttle=throttle,
    )
    return Health(AS_OF, "0007", Unreadable("x", None), cycles, 51_500, Unreadable("x", None))


def test_status_and_the_page_say_how_much_the_throttle_held_the_drain_and_why() -> None:
    assert drain_text(_held(Throttle(240.0, 0.4, "replica_lag"))) == (
        "100 rows/s over the last 10m 0s, 51,500 left, ETA 8m 35s, throttled 40% by replica lag"
    )
    load = drain_text(_held(Throttle(6.0, 0.01, "load")))
    assert load.endswith("throttled 1% by the database's load")
    assert drain_text(_held(Throttle(6.0, 0.01, "newer"))).endswith("throttled 1% by newer")


def test_a_backlog_that_is_not_coming_down_has_no_eta_however_fast_slots_go() -> None:
    for change in (0, 250):
        assert drain_text(_health(51_500, Pace(60_000, 600.0), change)) == (
            "100 rows/s over the last 10m 0s, 51,500 left, "
            "no ETA: the backlog is not coming down (slots fall due as fast)"
        )
    coming_down = drain_text(_health(51_500, Pace(60_000, 600.0), -4_000))
    assert coming_down.endswith(", ETA 8m 35s")


def test_a_backlog_past_the_count_cap_gives_an_eta_of_at_least() -> None:
    health = _health(100_000, Pace(60_000, 600.0))

    assert drain_text(health) == (
        "100 rows/s over the last 10m 0s, at least 100,000 left, ETA at least 16m 40s"
    )


def test_no_drain_in_progress_says_why() -> None:
    assert drain_text(_health(0, Pace(600, 60.0))) == "none: no Available slot has started"
    assert drain_text(_health(40, Pace(0, 60.0))) == (
        "none: no cycle expired a slot in the last 10m 0s"
    )
    assert drain_text(_health(40, None)) == "none: no cycle expired a slot in the last 10m 0s"
    unreadable = _health(Unreadable("permission denied", "42501"), Pace(600, 60.0))
    assert drain_text(unreadable) == "cannot read: permission denied (SQLSTATE 42501)"


# -- the last line of `once` ---------------------------------------------------------------


def _stopped(reason: StopReason | None, backlog: int | None) -> str:
    result = replace(
        cycle_result(expired=248_500, batches=125), stop_reason=reason, backlog=backlog
    )
    return stop_line(result, _settings(max_cycle_seconds=30, max_batches_per_cycle=125))


def test_the_last_line_says_the_budget_stopped_it_what_is_left_and_what_to_do() -> None:
    assert _stopped(StopReason.BUDGET, 51_500) == (
        "stopped at the cycle budget (30 s): 51,500 left; run again or raise --max-cycle-seconds"
    )


def test_the_last_line_says_the_batch_limit_stopped_it() -> None:
    assert _stopped(StopReason.MAX_BATCHES, 51_500) == (
        "stopped at the batch limit (125 batches): 51,500 left; "
        "run again or raise --max-batches-per-cycle"
    )


def test_the_last_line_says_a_signal_stopped_it() -> None:
    assert _stopped(StopReason.STOP_REQUESTED, None) == (
        "stopped on request (SIGTERM or SIGINT): what is left was not counted; run again to go on"
    )


def test_the_last_line_says_a_standby_held_it_and_that_it_goes_on_by_itself() -> None:
    assert _stopped(StopReason.THROTTLED, 51_500) == (
        "held by a streaming standby further behind than 10 s until the cycle budget ran "
        "out: 51,500 left; it goes on once the standby catches up "
        "(see docs/operations.md, a drain the calendar never feels)"
    )


def test_the_last_line_of_a_drain_that_took_everything_says_so() -> None:
    assert _stopped(StopReason.DRAINED, 0) == "drained: nothing left due"
    assert _stopped(StopReason.DRAINED, None) == "drained: what is left was not counted"
    assert _stopped(StopReason.DRAINED, 12) == (
        "drained what it could: 12 left, locked by other transactions or waiting in "
        "quarantine (see `slot-expiration status`)"
    )


def test_the_last_line_says_at_least_past_the_counts_cap() -> None:
    assert _stopped(StopReason.BUDGET, 100_000).startswith(
        "stopped at the cycle budget (30 s): at least 100,000 left;"
    )


def test_past_the_counts_cap_the_last_line_reads_what_is_left_of_the_drains_own_count() -> None:
    result = replace(cycle_result(expired=102_500), stop_reason=StopReason.BUDGET, backlog=100_000)
    settings = _settings(max_cycle_seconds=30)
    seen = DrainSeen()
    seen(BatchCommitted(uuid4(), batch(expired=2_000), DrainProgress(300_000, 102_500, 3.0)))

    assert stop_line(result, settings, seen.latest) == (
        "stopped at the cycle budget (30 s): about 197,500 left; "
        "run again or raise --max-cycle-seconds"
    )
    # Under the cap the count after the cycle says it; past both caps, at least the lower.
    under = replace(result, backlog=51_500)
    assert ": 51,500 left;" in stop_line(under, settings, seen.latest)
    both = DrainProgress(DRAIN_COUNT_CAP, 102_500, 3.0)
    assert ": at least 100,000 left;" in stop_line(result, settings, both)
