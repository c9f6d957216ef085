"""`status --check` judges a report with the alerts' own thresholds (kept equal to
deploy/prometheus/alerts.yml here), worst finding first, in one line."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import yaml

from slot_expiration.domain import CycleOutcome
from slot_expiration.quarantine.store import QuarantineListing
from slot_expiration.status.check import (
    BACKLOG_WARNING_ABOVE,
    NO_SUCCESS_INTERVALS,
    NO_SUCCESS_SECONDS,
    QUARANTINE_WARNING_AFTER,
    Level,
    judge,
    no_success_threshold,
)
from slot_expiration.status.report import (
    BACKLOG_TREND_WINDOW,
    CycleSummary,
    StatusReport,
    Unreadable,
)
from slot_expiration.store.history_store import BacklogPoint
from slot_expiration.store.schema_version import HEAD_REVISION
from slot_expiration.store.status_store import SchemaState
from tests.support.history import cycle_record
from tests.support.promtool import ALERTS
from tests.support.results import AS_OF


def _rule(alert: str) -> dict[str, Any]:
    document = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    rules = {rule["alert"]: rule for group in document["groups"] for rule in group["rules"]}
    return dict(rules[alert])


def _expr(alert: str) -> str:
    return str(_rule(alert)["expr"])


def test_the_thresholds_are_the_alert_rules_own() -> None:
    no_success = _expr("SlotExpirationNoSuccessfulCycle")
    assert f"> {NO_SUCCESS_SECONDS}" in no_success
    assert f"{NO_SUCCESS_SECONDS} * group by" in no_success
    assert f"{NO_SUCCESS_INTERVALS} * max by (namespace, job) (last_over_time(" in no_success
    backlog = _expr("SlotExpirationBacklogHigh")
    assert f"(calendar_slot_expiration_backlog) > {BACKLOG_WARNING_ABOVE} and" in backlog
    minutes = int(BACKLOG_TREND_WINDOW.total_seconds() // 60)
    assert f"(calendar_slot_expiration_backlog > 0)[{minutes}m:]) >= 0" in backlog
    hours = int(QUARANTINE_WARNING_AFTER.total_seconds() // 3600)
    assert _rule("SlotExpirationItemErrors")["for"] == f"{hours}h"


def test_a_long_interval_stretches_the_no_success_limit_to_three_intervals() -> None:
    assert no_success_threshold(300) == timedelta(minutes=30)
    assert no_success_threshold(1_200) == timedelta(hours=1)


def _report(
    *,
    success_minutes_ago: float | None = 3,
    backlog: int = 10,
    waiting: int = 0,
    waiting_minutes: float = 61,
    backlog_before: int | None = None,
    **parts: Any,
) -> StatusReport:
    last = (
        None
        if success_minutes_ago is None
        else cycle_record(AS_OF - timedelta(minutes=success_minutes_ago), instance="a:1")
    )
    before = (
        None
        if backlog_before is None
        else BacklogPoint(AS_OF - timedelta(minutes=32), backlog_before)
    )
    summary = CycleSummary(last, None, (), (last,) if last else (), before)
    fields: dict[str, Any] = {
        "as_of": AS_OF,
        "latest_revision": HEAD_REVISION,
        "cycles": summary,
        "schema": SchemaState(HEAD_REVISION, (), ()),
        "counts": {},
        "backlog": backlog,
        "oldest_overdue": None,
        "worker_sessions": (),
        "quarantine": QuarantineListing(
            waiting + 1, 1, (), AS_OF - timedelta(minutes=waiting_minutes) if waiting else None
        ),
        "index": Unreadable("not read here", None),
    }
    return StatusReport(**(fields | parts))


def test_a_healthy_report_is_ok_and_says_so() -> None:
    verdict = judge(_report(), 300)

    assert verdict.level is Level.OK
    assert (
        verdict.summary() == "OK: last success 3m 0s ago by a:1; backlog 10; quarantine: 1 parked"
    )


def test_the_worst_finding_decides_and_comes_first() -> None:
    verdict = judge(_report(success_minutes_ago=31, backlog=5_001, waiting=2), 300)

    assert verdict.level is Level.CRITICAL
    assert verdict.summary() == (
        "CRITICAL: no successful cycle for 31m 0s (limit 30m 0s; the last by a:1); "
        "backlog 5001 > 5000; 2 slots in quarantine, for 1h 1m"
    )


def test_a_backlog_of_exactly_5000_is_not_yet_a_warning() -> None:
    assert judge(_report(backlog=5_000), 300).level is Level.OK


def test_a_large_backlog_coming_down_since_half_an_hour_ago_is_no_warning() -> None:
    assert judge(_report(backlog=17_000, backlog_before=20_000), 300).level is Level.OK


def test_a_large_backlog_stuck_or_growing_since_half_an_hour_ago_is_a_warning() -> None:
    stuck = judge(_report(backlog=20_000, backlog_before=20_000), 300)
    growing = judge(_report(backlog=20_500, backlog_before=20_000), 300)

    assert (stuck.level, growing.level) == (Level.WARNING, Level.WARNING)
    assert stuck.summary() == "WARNING: backlog 20000 > 5000, not down from 20000 32m 0s ago"


def test_a_slot_quarantined_less_than_an_hour_ago_is_not_yet_a_warning() -> None:
    assert judge(_report(waiting=1, waiting_minutes=59), 300).level is Level.OK
    assert judge(_report(waiting=1, waiting_minutes=60), 300).level is Level.WARNING


def test_no_success_at_all_is_critical() -> None:
    assert (
        "no successful cycle in the history"
        in judge(_report(success_minutes_ago=None), 300).summary()
    )


def test_an_instance_whose_latest_cycle_needs_a_person_is_critical() -> None:
    bad = cycle_record(AS_OF, CycleOutcome.CLOCK_SKEW, instance="b:2", error="clock ahead")
    summary = CycleSummary(None, bad, (), (bad,))

    verdict = judge(_report(cycles=summary), 300)

    assert verdict.level is Level.CRITICAL
    assert "b:2 is clock_skew: clock ahead" in verdict.summary()


def test_a_schema_behind_is_critical_and_an_unreadable_part_a_warning() -> None:
    behind = judge(_report(schema=SchemaState("0005", (), ())), 300)
    unreadable = judge(_report(cycles=Unreadable("permission denied", "42501")), 300)

    assert behind.level is Level.CRITICAL
    assert f"schema at 0005, not {HEAD_REVISION}: run migrate" in behind.summary()
    assert unreadable.level is Level.WARNING
    assert "cycle history: cannot read: permission denied (SQLSTATE 42501)" in unreadable.summary()
