"""The report: one Markdown table with every section, the same figures as JSON, and the
targets set beside them (met, not met, not measured)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from benchmarks.batch_section import BatchComparison
from benchmarks.beside import BookingLatency, Condition
from benchmarks.booking_section import BookingInterference
from benchmarks.drain_rate_section import BatchSizeDrains, DrainRates
from benchmarks.drain_section import DrainComparison, DrainRun
from benchmarks.growth_section import Growth, GrowthPoint, PhaseTiming
from benchmarks.memory_section import MemoryProfile
from benchmarks.options import WorkerTuning
from benchmarks.parallel_section import ParallelDrain
from benchmarks.report import (
    HEADER,
    BenchReport,
    BenchResults,
    Conditions,
    RunFacts,
    render_markdown,
    table_rows,
    to_json,
)
from benchmarks.stats import Distribution, Spread
from benchmarks.targets import (
    BATCH_RATIO,
    DRAIN_RATE,
    GROWTH_RATIO,
    IDLE_MEMORY,
    TARGETS,
    Verdict,
)


def _ms(median: float) -> Distribution:
    return Distribution.of([median * 0.9, median, median * 1.1])


def _drain(seconds: float) -> DrainRun:
    return DrainRun(200_000, seconds, 200_000 / seconds, 401, 10.0, 12.0)


def _spread(*values: float) -> Spread:
    spread = Spread.of(values)
    assert spread is not None
    return spread


def _point(slots: int, clean_ms: float, batches: int = 50) -> GrowthPoint:
    samples = [clean_ms * 0.9, clean_ms, clean_ms * 1.1] * (batches // 3) + [clean_ms] * (
        batches % 3
    )
    rounds = (clean_ms * 0.95, clean_ms, clean_ms * 1.05)
    phase = PhaseTiming(Distribution.of(samples), _ms(clean_ms * 0.8), rounds)
    return GrowthPoint(slots, 2.0, 12.0, 5.0, phase, slots // 5, 90.0, phase, phase)


def _parallel(processes: int, rows_per_second: float) -> ParallelDrain:
    return ParallelDrain(
        processes=processes,
        backlog=200_000,
        rows_expired=200_000,
        expired_counts=tuple([200_000 // processes] * processes),
        skipped_locked=1_000 * (processes - 1),
        batches=401,
        seconds=200_000 / rows_per_second,
        rows_per_second=rows_per_second,
        not_once=0,
    )


def _latency(p99_ms: float) -> BookingLatency:
    return BookingLatency(2_000, 0, Distribution.of([1.0] * 98 + [p99_ms] * 2), 200.0, 10.0)


def _condition(
    label: str, p99_ms: float, rows_per_second: float | None = None, vs_none: float = 2.0
) -> Condition:
    drains = rows_per_second is not None
    return Condition(
        label=label,
        kind=label.split(",", maxsplit=1)[0],
        batch_size=500 if drains else 0,
        pause_seconds=0.0,
        latency=_latency(p99_ms),
        p50_ms=_spread(1.0, 1.0),
        p99_ms=_spread(p99_ms * 0.9, p99_ms * 1.1),
        p50_vs_none=_spread(1.0, 1.1) if drains else None,
        p99_vs_none=_spread(vs_none * 0.9, vs_none * 1.1) if drains else None,
        rows=200_000 if drains else 0,
        rows_per_second=_spread(rows_per_second) if rows_per_second else None,
        drain_seconds=(200_000 / rows_per_second,) if rows_per_second else (),
        batch_ms=_ms(15.0) if drains else None,
        slots_booked=1_000,
    )


def _size(batch_size: int, worker_rate: float, single_rate: float) -> BatchSizeDrains:
    worker = _condition(f"worker, {batch_size} a batch, flat out", 4.0, worker_rate)
    bare = _condition(f"bare loop, {batch_size} a batch, flat out", 4.0, worker_rate * 1.2)
    return BatchSizeDrains(
        batch_size=batch_size,
        worker=worker,
        bare=bare,
        worker_vs_single=_spread(worker_rate / single_rate),
        bare_vs_single=_spread(worker_rate * 1.2 / single_rate),
    )


BOOKING = BookingInterference(
    rate_per_second=200,
    clients=4,
    rounds=5,
    pause_seconds=0.02,
    backlog=200_000,
    no_drain=_condition("no drain", 2.0),
    worker_flat=_condition("worker, 500 a batch, flat out", 6.0, 30_000),
    bare_flat=_condition("bare loop, 500 a batch, flat out", 5.0, 45_000),
    worker_paced=_condition("worker, 500 a batch, paced 0.02 s", 5.0, 15_000),
    bare_paced=_condition("bare loop, 500 a batch, paced 0.02 s", 5.0, 17_000),
    flat_p99_ratio=_spread(1.3, 1.1, 1.2, 1.25, 1.4),
    paced_p99_ratio=_spread(1.0, 0.9, 1.05, 1.0, 1.1),
)
DRAIN_RATES = DrainRates(
    rounds=1,
    backlog=200_000,
    pause_seconds=0.0,
    drain_batch_size_flag=False,
    no_drain=_condition("no drain", 2.0),
    single=_condition("single statement", 30.0, 100_000, vs_none=15.0),
    sizes=(_size(500, 30_000, 100_000), _size(5_000, 85_000, 100_000)),
)


RESULTS = BenchResults(
    batch=BatchComparison(
        worker=_ms(12.0),
        bare=_ms(10.0),
        statement_only=_ms(11.0),
        statement_bare=_ms(10.0),
        median_ratio=1.2,
        p95_ratio=1.25,
        single_batch=_ms(14.0),
        single_cycle=_ms(30.0),
        first_batches=_ms(13.0),
        later_batches=_ms(11.5),
        session_open=_ms(4.0),
        rounds=5,
        batches_per_round=20,
        worker_samples_ms=(10.8, 12.0, 13.2),
        bare_samples_ms=(9.0, 10.0, 11.0),
    ),
    drain=DrainComparison(200_000, _drain(10.0), _drain(7.0), 10.0 / 7.0),
    parallel=(_parallel(1, 20_000), _parallel(2, 30_000), _parallel(4, 28_000)),
    booking=BOOKING,
    drain_rate=DRAIN_RATES,
    memory=MemoryProfile(58.0, 70.0, 66.0, 71.0, 200_000),
    growth=Growth(0.2, (_point(100_000, 10.0), _point(1_000_000, 12.0))),
    plans={"expire_batch": "Update on availability_slots"},
)
FACTS = RunFacts(
    mode="default",
    command="./scripts/bench",
    database="embedded PostgreSQL on port 5555",
    embedded=True,
    started_at="2026-12-03T07:00:00+00:00",
    seconds=200.0,
    cpus=2,
    as_of="2026-12-03T07:00:00+00:00",
    server_version="15.18",
    server_settings={"shared_buffers": "1GB"},
    table=None,
    worker=WorkerTuning(),
    checkpoint_before_sections=True,
    load_before_run=(0.25, 0.5, 0.75),
    cpu_busy_before_run=0.125,
    conditions={"a": Conditions(0.5, 1.5, 0, 1, 12.0)},
    server_overrides=("wal_compression=on",),
)
REPORT = BenchReport(FACTS, RESULTS)


def test_the_table_has_the_header_and_a_row_for_every_section() -> None:
    markdown = render_markdown(REPORT)

    lines = markdown.splitlines()
    assert "| " + " | ".join(HEADER) + " |" in lines
    rows = [line for line in lines if line.startswith("| ") and line != lines[0]]
    for section in "abcdefg":
        assert any(row.startswith(f"| {section}. ") for row in rows), section
    assert all(row.count(" | ") == len(HEADER) - 1 for row in rows)


def test_the_header_says_what_ran_where_and_the_load_it_ran_under() -> None:
    markdown = render_markdown(REPORT)

    assert "`./scripts/bench` on embedded PostgreSQL on port 5555" in markdown
    assert "the CPUs were 12% busy with other work" in markdown
    assert "load average (1, 5, 15 min): 0.25 / 0.50 / 0.75" in markdown
    assert "a 0.50 -> 1.50, 0, 1, 12 s" in markdown
    assert "server settings given: wal_compression=on." in markdown


def test_each_target_is_set_beside_its_result_with_its_verdict() -> None:
    rows = {(row[0], row[1]): row for row in table_rows(REPORT)}

    a = rows[("a. one batch of 500", "inside drain cycles (3 batches each)")]
    assert (a[4], a[5], a[6]) == ("1.20 (p95 1.25)", "<= 1.2", "met")
    statement = next(row for key, row in rows.items() if "statement alone" in key[1])
    assert (statement[4], statement[5], statement[6]) == ("1.10", "<= 1.15", "met")
    b = rows[("b. drain 200,000", "rows per second")]
    assert (b[4], b[5], b[6]) == ("1.43 (time)", "<= 1.2", "not met")
    f = rows[("f. worker memory", "resident, idle (`run`)")]
    assert (f[2], f[5], f[6]) == ("58.0 MB", "<= 60 MB", "met")


def test_d_sets_the_worker_beside_the_bare_loop_at_each_pace_with_the_rounds_spread() -> None:
    rows = {(row[0], row[1]): row for row in table_rows(REPORT)}
    label = "d. bookings beside a drain"

    flat = rows[(label, "p99 beside the worker / beside the bare loop, flat out")]
    paced = rows[(label, "p99 beside the worker / beside the bare loop, paced 0.02 s")]

    assert (flat[4], flat[5], flat[6]) == (
        "1.25 (1.10-1.40 over 5 rounds)",
        "<= 1.1 flat out",
        "not met",
    )
    assert (paced[4], paced[5], paced[6]) == ("1.00 (0.90-1.10 over 5 rounds)", "-", "-")
    none = rows[(label, "no drain (200/s, 4 clients, 5 rounds)")]
    assert none[2].startswith("p50 1.00 ms, p99 2.00 ms")
    worker = rows[(label, "worker, 500 a batch, flat out: p99 / no drain")]
    assert "drain 30,000 rows/s" in worker[2]
    assert worker[4] == "p99 2.00 (1.80-2.20 over 2 rounds); p50 1.05"


def test_b_sets_the_workers_client_cpu_per_batch_beside_the_bare_loops() -> None:
    drain = DrainComparison(
        200_000,
        replace(_drain(10.0), cpu_ms_per_batch=0.6),
        replace(_drain(7.0), cpu_ms_per_batch=0.4),
        10.0 / 7.0,
    )
    report = BenchReport(FACTS, replace(RESULTS, drain=drain))

    (row,) = [line for line in render_markdown(report).splitlines() if "client CPU" in line]

    assert "| worker 0.60 ms | bare loop 0.40 ms | 1.50 |" in row
    assert (
        json.loads(json.dumps(to_json(report)))["sections"]["b"]["worker"]["cpu_ms_per_batch"]
        == 0.6
    )


def test_g_shows_each_batch_size_and_judges_the_fastest_against_the_single_statement() -> None:
    rows = [row for row in table_rows(REPORT) if row[0] == "g. drain rate"]

    assert [row[1].split(":")[0] for row in rows] == [
        "single statement, 200,000 rows in one UPDATE",
        "500 rows a batch",
        "5,000 rows a batch",
        "best drain batch (5,000 rows) / single statement",
    ]
    best = rows[-1]
    assert (best[2], best[3]) == ("worker 85,000 rows/s", "single statement 100,000 rows/s")
    assert (best[4], best[5], best[6]) == ("0.85 (1 round)", ">= 0.8", "met")


def test_growth_without_ten_million_slots_says_the_target_was_not_measured() -> None:
    rows = [row for row in table_rows(REPORT) if row[1].startswith("largest vs smallest")]

    assert rows[0][4] == "1.20 (rounds 1.20-1.20)"  # 1M vs 100k, shown all the same
    assert rows[0][6] == "not measured (needs --full for 10 million slots)"


def _growth_check(growth: Growth) -> tuple[float | None, Verdict, str]:
    report = BenchReport(FACTS, replace(RESULTS, growth=growth))
    check = next(check for check in report.checks() if check.target is GROWTH_RATIO)
    return check.value, check.verdict, check.describe()


def test_growth_with_ten_million_slots_is_judged_against_a_hundred_thousand() -> None:
    growth = Growth(0.2, (_point(100_000, 10.0), _point(10_000_000, 14.0)))

    value, verdict, _ = _growth_check(growth)

    assert value == pytest.approx(1.4)
    assert verdict is Verdict.MET
    value, verdict, _ = _growth_check(replace(growth, points=(growth.points[0], _point(10**7, 16))))
    assert verdict is Verdict.NOT_MET


def test_growth_on_fewer_than_fifty_batches_a_phase_is_not_judged() -> None:
    growth = Growth(0.2, (_point(100_000, 10.0, batches=12), _point(10_000_000, 12.0)))

    value, verdict, described = _growth_check(growth)

    assert (value, verdict) == (None, Verdict.NOT_MEASURED)
    assert described == "not measured (12 samples, fewer than 50)"


def test_the_growth_spread_pairs_each_rounds_median_on_the_largest_and_smallest_table() -> None:
    growth = Growth(0.2, (_point(100_000, 10.0), _point(1_000_000, 12.0)))

    spread = growth.round_ratios

    assert spread is not None
    assert spread.values == pytest.approx((1.2, 1.2, 1.2))


def test_a_section_not_run_has_no_rows_and_its_target_is_not_measured() -> None:
    report = BenchReport(FACTS, BenchResults(batch=RESULTS.batch))

    assert {row[0][0] for row in table_rows(report)} == {"a"}
    verdicts = [check.verdict for check in report.checks()]
    assert verdicts == [Verdict.MET, Verdict.MET, *[Verdict.NOT_MEASURED] * 5]


def test_a_target_is_met_at_its_limit_and_not_above() -> None:
    assert BATCH_RATIO.check(1.2).verdict is Verdict.MET
    assert BATCH_RATIO.check(1.21).verdict is Verdict.NOT_MET
    assert BATCH_RATIO.check(1.05).describe() == "met"
    assert IDLE_MEMORY.check(None, "section not run").describe() == "not measured (section not run)"


def test_an_at_least_target_is_met_at_its_limit_and_above() -> None:
    assert DRAIN_RATE.check(0.8).verdict is Verdict.MET
    assert DRAIN_RATE.check(1.3).verdict is Verdict.MET
    assert DRAIN_RATE.check(0.79).verdict is Verdict.NOT_MET
    assert DRAIN_RATE.describe() == ">= 0.8"


def test_the_targets_are_issue_15s() -> None:
    assert [(t.section, t.describe()) for t in TARGETS] == [
        ("a", "<= 1.2"),
        ("a", "<= 1.15"),
        ("b", "<= 1.2"),
        ("d", "<= 1.1 flat out"),
        ("e", "<= 1.5 with >= 50 samples"),
        ("f", "<= 60 MB"),
        ("g", ">= 0.8"),
    ]


def test_a_parallel_drain_that_lost_or_repeated_a_row_is_shown_as_such() -> None:
    wrong = replace(_parallel(2, 30_000), not_once=3)
    report = BenchReport(FACTS, BenchResults(parallel=(_parallel(1, 20_000), wrong)))

    verdicts = [row[6] for row in table_rows(report)]

    assert verdicts == ["yes", "NO"]


def test_the_json_holds_the_same_figures_the_targets_and_the_plans() -> None:
    document = json.loads(json.dumps(to_json(REPORT)))

    assert set(document) == {"run", "sections", "targets", "plans"}
    assert set(document["sections"]) == set("abcdefg")
    assert document["sections"]["a"]["median_ratio"] == 1.2
    assert document["sections"]["a"]["worker"]["median"] == pytest.approx(12.0)
    assert [c["exactly_once"] for c in document["sections"]["c"]] == [True, True, True]
    assert document["sections"]["e"]["largest_vs_smallest"] == pytest.approx(1.2)
    assert document["sections"]["f"]["idle_mb"] == 58.0
    assert [t["section"] for t in document["targets"]] == ["a", "a", "b", "d", "e", "f", "g"]
    assert document["sections"]["d"]["flat_p99_ratio"]["values"] == [1.3, 1.1, 1.2, 1.25, 1.4]
    assert document["sections"]["d"]["slots_booked"] == 5_000
    assert document["sections"]["g"]["best_batch_size"] == 5_000
    assert document["sections"]["g"]["best_vs_single"]["median"] == pytest.approx(0.85)
    assert {t["verdict"] for t in document["targets"]} == {"met", "not met", "not measured"}
    assert document["plans"] == {"expire_batch": "Update on availability_slots"}
    assert document["run"]["conditions"]["a"]["autovacuum_runs"] == 1
