"""`status --check` (and the page) judge the deployment's health with the alerts' own
thresholds (kept equal to deploy/prometheus/alerts.yml here), worst finding first, in one
line; the backlog's trend read from the history as the worker exports it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import yaml

from slot_expiration.cycle import BACKLOG_COUNT_CAP
from slot_expiration.domain import CycleOutcome
from slot_expiration.quarantine.store import QuarantineListing
from slot_expiration.status.check import (
    BACKLOG_WARNING_ABOVE,
    NO_SUCCESS_INTERVALS,
    NO_SUCCESS_SECONDS,
    QUARANTINE_WARNING_AFTER,
    Level,
    Section,
    Verdict,
    judge,
    no_success_threshold,
)
from slot_expiration.status.report import (
    CycleSummary,
    Health,
    Unreadable,
    deployment_backlog_change,
)
from slot_expiration.store.history_store import BacklogRow
from slot_expiration.store.schema_version import HEAD_REVISION
from slot_expiration.store.status_store import SchemaState
from tests.support.history import cycle_record
from tests.support.promtool import ALERTS
from tests.support.results import AS_OF


def _rule(alert: str) -> dict[str, Any]:
    document = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    rules = {rule.get("alert"): rule for group in document["groups"] for rule in group["rules"]}
    return dict(rules[alert])


def _expr(alert: str) -> str:
    return str(_rule(alert)["expr"])


def test_the_thresholds_are_the_alert_rules_own() -> None:
    no_success = _expr("SlotExpirationNoSuccessfulCycle")
    assert f"> {NO_SUCCESS_SECONDS}" in no_success
    assert f"{NO_SUCCESS_SECONDS} * group by" in no_success
    assert f"{NO_SUCCESS_INTERVALS} * namespace_job:" in no_success
    backlog = _expr("SlotExpirationBacklogHigh")
    assert f"(calendar_slot_expiration_backlog) > {BACKLOG_WARNING_ABOVE}\n" in backlog
    assert "(calendar_slot_expiration_backlog_change) >= 0" in backlog
    seconds = int(QUARANTINE_WARNING_AFTER.total_seconds())
    assert _expr("SlotExpirationItemErrors").endswith(f"_oldest_age_seconds) > {seconds}")


def test_a_long_interval_stretches_the_no_success_limit_to_three_intervals() -> None:
    assert no_success_threshold(300) == timedelta(minutes=30)
    assert no_success_threshold(1_200) == timedelta(hours=1)


def _health(
    *,
    success_minutes_ago: float | None = 3,
    backlog: int = 10,
    change: int | None = None,
    waiting: int = 0,
    waiting_minutes: float = 61,
    parked: int = 1,
    **parts: Any,
) -> Health:
    last = (
        None
        if success_minutes_ago is None
        else cycle_record(AS_OF - timedelta(minutes=success_minutes_ago), instance="a:1")
    )
    summary = CycleSummary(last, None, (), last, (last,) if last else (), change)
    fields: dict[str, Any] = {
        "as_of": AS_OF,
        "latest_revision": HEAD_REVISION,
        "cycles": summary,
        "schema": SchemaState(HEAD_REVISION, (), ()),
        "backlog": backlog,
        "quarantine": QuarantineListing(
            waiting + parked,
            parked,
            (),
            AS_OF - timedelta(minutes=waiting_minutes) if waiting else None,
        ),
    }
    return Health(**(fields | parts))


def test_a_healthy_deployment_is_ok_and_says_so() -> None:
    verdict = judge(_health(), 300)

    assert verdict.level is Level.OK
    assert (
        verdict.summary() == "OK: last success 3m 0s ago by a:1; backlog 10; quarantine: 1 parked"
    )


def test_slots_in_quarantine_for_less_than_an_hour_are_counted_in_an_ok_verdict() -> None:
    """ "quarantine empty" was said of five slots in quarantine for ten minutes."""
    verdict = judge(_health(waiting=5, waiting_minutes=10, parked=2), 300)

    assert verdict.level is Level.OK
    assert verdict.summary().endswith("; quarantine: 5 (none over an hour), 2 parked")
    assert judge(_health(parked=0), 300).summary().endswith("; quarantine empty")


def test_the_worst_finding_decides_and_comes_first_each_with_its_runbook_section() -> None:
    verdict = judge(_health(success_minutes_ago=31, backlog=5_001, change=0, waiting=2), 300)

    assert verdict.level is Level.CRITICAL
    assert verdict.summary() == (
        "CRITICAL: no successful cycle for 31m 0s (limit 30m 0s; the last by a:1); "
        "backlog 5001 > 5000, not down over 30m 0s; 2 slots in quarantine, the oldest for 1h 1m"
    )
    assert [f.section for f in verdict.ordered()] == [Section.HUNG, Section.HUNG, Section.POISON]


def test_a_backlog_of_exactly_5000_is_not_yet_a_warning() -> None:
    assert judge(_health(backlog=5_000, change=0), 300).level is Level.OK


def test_a_large_backlog_coming_down_or_without_a_trend_yet_is_no_warning() -> None:
    assert judge(_health(backlog=17_000, change=-3_000), 300).level is Level.OK
    assert judge(_health(backlog=17_000, change=None), 300).level is Level.OK


def test_a_large_backlog_stuck_or_growing_is_a_warning() -> None:
    stuck = judge(_health(backlog=20_000, change=0), 300)
    growing = judge(_health(backlog=20_500, change=500), 300)
    capped = judge(_health(backlog=BACKLOG_COUNT_CAP, change=0), 300)

    assert (stuck.level, growing.level) == (Level.WARNING, Level.WARNING)
    assert stuck.summary() == "WARNING: backlog 20000 > 5000, not down over 30m 0s"
    assert growing.summary() == "WARNING: backlog 20500 > 5000, up 500 over 30m 0s"
    assert capped.summary() == "WARNING: backlog at least 100000 > 5000, not down over 30m 0s"


def test_a_slot_in_quarantine_for_an_hour_or_less_is_not_yet_a_warning() -> None:
    assert judge(_health(waiting=1, waiting_minutes=60), 300).level is Level.OK
    assert judge(_health(waiting=1, waiting_minutes=61), 300).level is Level.WARNING


def test_no_success_at_all_and_no_cycle_at_all_are_critical_and_say_which() -> None:
    failed = cycle_record(AS_OF, CycleOutcome.FAILED, instance="a:1")
    never = CycleSummary(None, failed, (), failed, (failed,))
    fresh = CycleSummary(None, None, ())

    assert "no successful cycle in the history" in judge(_health(cycles=never), 300).summary()
    assert judge(_health(cycles=fresh), 300).summary() == (
        "CRITICAL: no cycle in the history: no worker has run here yet (limit 30m 0s)"
    )


def test_an_instance_still_there_whose_latest_cycle_needs_a_person_is_critical() -> None:
    bad = cycle_record(AS_OF, CycleOutcome.CLOCK_SKEW, instance="b:2", error="clock ahead")
    summary = CycleSummary(None, bad, (), bad, (bad,))

    verdict = judge(_health(cycles=summary), 300)

    assert verdict.level is Level.CRITICAL
    assert "b:2 is clock_skew: clock ahead" in verdict.summary()


def test_a_schema_behind_is_critical_and_an_unreadable_part_a_warning() -> None:
    behind = judge(_health(schema=SchemaState("0005", (), ())), 300)
    unreadable = judge(_health(cycles=Unreadable("permission denied", "42501")), 300)

    assert behind.level is Level.CRITICAL
    assert f"schema at 0005, not {HEAD_REVISION}: run migrate" in behind.summary()
    assert unreadable.level is Level.WARNING
    assert "cycle history: cannot read: permission denied (SQLSTATE 42501)" in unreadable.summary()


def test_where_nothing_could_be_judged_the_verdict_is_unknown_exit_3_on_one_line() -> None:
    verdict = Verdict.unknown("cannot connect to the database (postgresql://a@h/db):\n refused")

    assert (verdict.level, int(verdict.level)) == (Level.UNKNOWN, 3)
    assert verdict.summary() == (
        "UNKNOWN: cannot connect to the database (postgresql://a@h/db): refused"
    )


# -- the backlog's trend, read from the history as each worker exports it ---------------


def _row(
    minutes: float, backlog: int | None, instance: str = "a", *, ok: bool = True
) -> BacklogRow:
    outcome = CycleOutcome.SUCCESS if ok else CycleOutcome.FAILED
    return BacklogRow(instance, AS_OF + timedelta(minutes=minutes), outcome, backlog, 500)


WINDOW = timedelta(minutes=30)


def test_the_trend_is_the_change_over_the_window_of_consecutive_successes() -> None:
    rows = [_row(5 * i, 20_000 - 500 * i) for i in range(10)]

    assert deployment_backlog_change(rows, {"a"}, WINDOW) == 15_500 - 18_500
    assert deployment_backlog_change(rows[:1], {"a"}, WINDOW) is None


def test_a_count_that_jumps_after_an_outage_is_not_compared_across_it() -> None:
    before = [_row(5 * i, 20_000 - 500 * i) for i in range(4)]  # 20000 .. 18500
    outage = [_row(20 + 5 * i, None, ok=False) for i in range(4)]
    after = [_row(45, 21_000), _row(50, 20_500)]

    assert deployment_backlog_change([*before, *outage, after[0]], {"a"}, WINDOW) == -1_500
    assert deployment_backlog_change([*before, *outage, *after], {"a"}, WINDOW) == -500


def test_the_backlog_comes_down_when_one_instance_still_there_sees_it_come_down() -> None:
    rows = [
        *(_row(5 * i, 9_000 - 100 * i, "a") for i in range(4)),
        *(_row(5 * i + 2, 9_000, "b") for i in range(4)),
        *(_row(5 * i + 3, 20_000, "gone") for i in range(4)),
    ]

    assert deployment_backlog_change(rows, {"a", "b"}, WINDOW) == -300
    assert deployment_backlog_change(rows, {"b"}, WINDOW) == 0
