"""Liveness from the events: ticking and not stuck in a cycle, on a clock the test moves."""

from __future__ import annotations

from uuid import uuid4

from slot_expiration.domain import CycleOutcome
from slot_expiration.expiry import CycleEnded, CycleStarted
from slot_expiration.loop import LoopStarted, LoopStopping, TickSkipped
from slot_expiration.telemetry.liveness import SLACK_SECONDS, Liveness
from tests.support.results import AS_OF, FakeClock, cycle_result, ended

INTERVAL, BUDGET = 300.0, 30.0


def _liveness() -> tuple[Liveness, FakeClock]:
    clock = FakeClock()
    return Liveness(INTERVAL, BUDGET, monotonic=clock), clock


def test_a_loop_that_just_started_is_live() -> None:
    liveness, _ = _liveness()
    liveness(LoopStarted(INTERVAL, 500))

    report = liveness.report()
    assert (report.live, report.status) == (True, "ok")


def test_a_loop_ticking_every_interval_stays_live_for_hours() -> None:
    liveness, clock = _liveness()
    liveness(LoopStarted(INTERVAL, 500))
    for _ in range(24):
        run_id = uuid4()
        liveness(CycleStarted(run_id, AS_OF))
        clock.advance(2.0)
        liveness(CycleEnded(cycle_result(run_id=run_id)))
        clock.advance(INTERVAL - 2.0)
        assert liveness.report().live

    assert liveness.report().seconds_since_tick == INTERVAL


def test_no_tick_for_an_interval_and_the_slack_is_not_live() -> None:
    liveness, clock = _liveness()
    liveness(LoopStarted(INTERVAL, 500))
    clock.advance(INTERVAL + SLACK_SECONDS)
    assert liveness.report().live

    clock.advance(0.5)

    report = liveness.report()
    assert (report.live, report.status) == (False, "not_ticking")
    assert "no tick for 310.5 s" in report.detail


def test_skipped_ticks_count_as_ticks() -> None:
    liveness, clock = _liveness()
    liveness(LoopStarted(INTERVAL, 500))
    liveness(CycleStarted(uuid4(), AS_OF))
    clock.advance(INTERVAL)
    liveness(TickSkipped(1))
    clock.advance(1.0)

    # The cycle runs past its budget (and is stuck), but the ticks themselves came.
    assert liveness.report().seconds_since_tick == 1.0


def test_a_cycle_running_past_its_budget_and_the_slack_is_stuck() -> None:
    liveness, clock = _liveness()
    liveness(LoopStarted(INTERVAL, 500))
    liveness(CycleStarted(uuid4(), AS_OF))
    clock.advance(BUDGET + SLACK_SECONDS)
    assert liveness.report().live

    clock.advance(1.0)

    report = liveness.report()
    assert (report.live, report.status) == (False, "stuck_in_cycle")
    assert report.cycle_running_seconds == BUDGET + SLACK_SECONDS + 1.0


def test_a_cycle_that_fails_at_its_budget_is_not_stuck() -> None:
    liveness, clock = _liveness()
    liveness(LoopStarted(INTERVAL, 500))
    run_id = uuid4()
    liveness(CycleStarted(run_id, AS_OF))
    clock.advance(BUDGET)
    liveness(ended(CycleOutcome.BUDGET_EXCEEDED, TimeoutError(), run_id=run_id))
    clock.advance(60.0)

    report = liveness.report()
    assert (report.live, report.status, report.cycle_running_seconds) == (True, "ok", None)


def test_a_stopping_loop_stays_live_while_its_last_cycle_finishes_within_its_budget() -> None:
    liveness, clock = _liveness()
    liveness(LoopStarted(INTERVAL, 500))
    liveness(CycleStarted(uuid4(), AS_OF))
    liveness(LoopStopping(cycle_in_flight=True))
    clock.advance(BUDGET)

    report = liveness.report()
    assert (report.live, report.status) == (True, "stopping")

    clock.advance(SLACK_SECONDS + 1.0)
    assert liveness.report().status == "stuck_in_cycle"


def test_start_up_counts_as_a_sign_of_life_before_the_loop_starts() -> None:
    liveness, clock = _liveness()
    clock.advance(5.0)  # checking the database, say
    assert liveness.report().live

    clock.advance(INTERVAL + SLACK_SECONDS)
    assert not liveness.report().live


def test_the_report_as_json_names_status_detail_and_timings() -> None:
    liveness, clock = _liveness()
    liveness(CycleStarted(uuid4(), AS_OF))
    clock.advance(1.23456)

    assert liveness.report().as_json() == {
        "live": True,
        "status": "ok",
        "detail": "ticking",
        "seconds_since_tick": 1.235,
        "cycle_running_seconds": 1.235,
    }
