"""`status --check` (and the page) judge the deployment's health with the alerts' own
thresholds (kept equal to deploy/prometheus/alerts.yml here), worst finding first, in one
line; the backlog's trend read from the history as the worker exports it."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import yaml

from slot_expiration.domain import CycleOutcome
from slot_expiration.expiry import BACKLOG_COUNT_CAP
from slot_expiration.history.store import BacklogRow
from slot_expiration.quarantine.store import QuarantineListing
from slot_expiration.schema.version import HEAD_REVISION
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
from slot_expiration.status.replicas import ReplicaAnswer, Unrecorded
from slot_expiration.status.report import (
    COUNT_FALL_WINDOW,
    CycleSummary,
    Health,
    Unreadable,
    backlog_fall,
    deployment_backlog_change,
)
from slot_expiration.status.store import SchemaState
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
    fall = int(COUNT_FALL_WINDOW.total_seconds() / 60)
    assert f"(calendar_slot_expiration_backlog offset {fall}m)" in _expr(
        "SlotExpirationBacklogHigh"
    )
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
        "nor any other cycle since: no replica is running, or none can log in or write to the "
        "database: their /readyz says which; "
        "backlog 5001 > 5000, not down over 30m 0s; 2 slots in quarantine, the oldest for 1h 1m"
    )
    assert [f.section for f in verdict.ordered()] == [
        Section.HUNG,
        Section.HUNG,
        Section.HUNG,
        Section.POISON,
    ]


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
    return BacklogRow(instance, AS_OF + timedelta(minutes=minutes), outcome, backlog, 500, 800.0)


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


def test_a_backlog_whose_count_fell_over_half_an_hour_is_coming_down_whatever_trend_is_held() -> (
    None
):
    """Every other cycle fails: no two successes in a row, so the trend of the stuck hour
    before (0) is held, while each success expires 500."""
    stuck = [_row(5 * i, 20_000) for i in range(12)]
    flaky = [
        _row(60 + 5 * i, None, ok=False)
        if i % 2 == 0
        else _row(60 + 5 * i, 20_000 - 500 * (i + 1) // 2)
        for i in range(12)
    ]  # failed, 19500, failed, 19000, ..., 17000 at 115 minutes
    rows = [*stuck, *flaky]
    now = AS_OF + timedelta(minutes=116)

    assert deployment_backlog_change(rows, {"a"}, WINDOW) == 0  # held from the stuck hour
    assert backlog_fall(rows, now) == 17_000 - 18_500  # 30 minutes before: 18500, at 85
    assert backlog_fall(stuck, AS_OF + timedelta(minutes=56)) is None  # not below: stuck


def test_a_count_that_jumps_after_an_outage_is_no_fall() -> None:
    rows = [_row(0, 16_000), _row(5, None, ok=False), _row(40, 19_500)]

    assert backlog_fall(rows, AS_OF + timedelta(minutes=41)) is None


# -- silence: no cycle of any outcome recorded ---------------------------------------------


def _latest(minutes_ago: float, outcome: CycleOutcome = CycleOutcome.FAILED) -> CycleSummary:
    """The last success 10 minutes before the latest cycle, which ended `minutes_ago`."""
    success = cycle_record(AS_OF - timedelta(minutes=minutes_ago + 10), instance="a:1")
    latest = cycle_record(AS_OF - timedelta(minutes=minutes_ago), outcome, instance="a:1")
    return CycleSummary(success, latest, (), latest, (latest,))


def test_no_cycle_recorded_for_three_intervals_and_a_minute_is_a_warning_naming_the_causes() -> (
    None
):
    quiet = judge(_health(cycles=_latest(15)), 300)
    silent = judge(_health(cycles=_latest(17)), 300)
    fast = judge(_health(cycles=_latest(1.2)), 2)

    assert quiet.level is Level.OK
    assert silent.level is Level.WARNING
    assert silent.summary() == (
        "WARNING: no cycle recorded for 17m 0s (limit 16m 0s; the last, failed, by a:1): no "
        "replica is running, or none can log in or write to the database: their /readyz "
        "says which"
    )
    assert [f.section for f in silent.findings] == [Section.HUNG]
    assert fast.level is Level.WARNING  # every 2 s: 1m 6s
    assert "(limit 1m 6s;" in fast.summary()


def test_past_the_no_success_limit_silence_is_critical_and_says_why_once() -> None:
    verdict = judge(_health(cycles=_latest(25)), 300)

    assert verdict.level is Level.CRITICAL
    assert verdict.summary().startswith("CRITICAL: no successful cycle for 35m 0s")
    assert "no cycle recorded for 25m 0s (limit 16m 0s; the last, failed, by a:1)" in (
        verdict.summary()
    )


# -- the schema: never migrated, ahead -----------------------------------------------------

NEVER_MIGRATED = SchemaState(
    None,
    ("table availability_slots does not exist",),
    ("slot_expiration_alembic_version", "slot_expiration_cycles", "slot_expiration_failures"),
)


def test_a_database_never_migrated_is_critical_run_migrate_and_nothing_else() -> None:
    missing = Unreadable('relation "slot_expiration_cycles" does not exist', "42P01")
    verdict = judge(
        replace(
            _health(schema=NEVER_MIGRATED, cycles=missing, quarantine=missing), backlog=missing
        ),
        300,
    )
    adopting = judge(
        _health(schema=replace(NEVER_MIGRATED, contract_mismatches=()), cycles=missing), 300
    )

    assert verdict.level is Level.CRITICAL
    assert verdict.summary() == (
        "CRITICAL: the database was never migrated: run `slot-expiration migrate` (it "
        "creates availability_slots and the worker's tables)"
    )
    assert [f.section for f in verdict.findings] == [Section.MISCONFIGURED]
    assert adopting.summary() == (
        "CRITICAL: the database was never migrated: run `slot-expiration migrate` (it adopts "
        "availability_slots and creates the worker's tables)"
    )


def test_a_calendar_table_migrate_cannot_adopt_is_said_beside_never_migrated() -> None:
    misfit = replace(NEVER_MIGRATED, contract_mismatches=("column version is text",))

    verdict = judge(_health(schema=misfit), 300)

    assert verdict.summary().endswith(
        "; schema: column version is text: restore availability_slots first (migrate cannot "
        "adopt it)"
    )


def test_a_schema_ahead_of_this_release_is_a_warning_whose_advice_is_true() -> None:
    ahead = f"{int(HEAD_REVISION) + 1:04d}"

    verdict = judge(_health(schema=SchemaState(ahead, (), ())), 300)

    assert verdict.level is Level.WARNING
    assert verdict.summary() == (
        f"WARNING: schema ahead of this release ({ahead} > {HEAD_REVISION}): a newer release "
        "migrated this database; roll forward, or keep this release: it works on the newer "
        "schema (migrations only add)"
    )
    assert "run migrate" not in verdict.summary()


def test_a_revision_not_of_this_product_is_critical() -> None:
    verdict = judge(_health(schema=SchemaState("ae1027a6acf", (), ())), 300)

    assert verdict.level is Level.CRITICAL
    assert "'ae1027a6acf', which is not a revision of slot-expiration" in verdict.summary()


# -- the replicas' /readyz -----------------------------------------------------------------

REFUSED = (
    "the last cycle failed, misconfigured (SQLSTATE 28P01): password authentication failed "
    'for user "w"'
)


def test_a_replica_whose_login_is_refused_is_critical_and_its_lost_cycle_said() -> None:
    lost = Unrecorded("misconfigured", AS_OF - timedelta(seconds=4), "password refused (28P01)")
    answer = ReplicaAnswer("127.0.0.1:9464", True, False, REFUSED, True, lost)

    verdict = judge(_health(replicas=(answer,)), 300)

    assert verdict.level is Level.CRITICAL
    assert verdict.summary() == (
        f"CRITICAL: replica 127.0.0.1:9464 cannot work until a person acts: {REFUSED}; its "
        "cycle of 4s ago (misconfigured) is not in the history: password refused (28P01)"
    )
    assert [f.section for f in verdict.findings] == [Section.MISCONFIGURED]


def test_replicas_not_answering_or_not_ready_are_warnings_and_ready_ones_say_nothing() -> None:
    answers = (
        ReplicaAnswer("10.0.0.5:9464", False, False, "[Errno 111] Connection refused"),
        ReplicaAnswer("10.0.0.6:9464", True, False, "database: connection refused"),
        ReplicaAnswer("10.0.0.7:9464", True, True, "database answers, schema up to date"),
    )

    verdict = judge(_health(replicas=answers), 300)

    assert verdict.level is Level.WARNING
    assert verdict.summary() == (
        "WARNING: replica 10.0.0.5:9464 does not answer /readyz: [Errno 111] "
        "Connection refused; replica 10.0.0.6:9464 is not ready: database: connection refused"
    )


def test_a_ready_replica_whose_cycle_the_history_lacks_is_a_warning() -> None:
    lost = Unrecorded("success", AS_OF - timedelta(minutes=2), "permission denied (42501)")
    answer = ReplicaAnswer("10.0.0.7:9464", True, True, "database answers", False, lost)

    verdict = judge(_health(replicas=(answer,)), 300)

    assert verdict.summary() == (
        "WARNING: replica 10.0.0.7:9464: its cycle of 2m 0s ago (success) is not in the "
        "history: permission denied (42501)"
    )
