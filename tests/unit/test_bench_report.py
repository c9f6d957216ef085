"""The report: one Markdown table with every section, the same figures as JSON, and the
targets set beside them (met, not met, not measured)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from slot_expiration.bench.batch_section import BatchComparison
from slot_expiration.bench.booking_section import BookingInterference, BookingLatency
from slot_expiration.bench.drain_section import DrainComparison, DrainRun
from slot_expiration.bench.growth_section import Growth, GrowthPoint, PhaseTiming
from slot_expiration.bench.memory_section import MemoryProfile
from slot_expiration.bench.options import WorkerTuning
from slot_expiration.bench.parallel_section import ParallelDrain
from slot_expiration.bench.report import (
    HEADER,
    BenchReport,
    BenchResults,
    Conditions,
    RunFacts,
    render_markdown,
    table_rows,
    to_json,
)
from slot_expiration.bench.stats import Distribution
from slot_expiration.bench.targets import BATCH_RATIO, IDLE_MEMORY, Verdict


def _ms(median: float) -> Distribution:
    return Distribution.of([median * 0.9, median, median * 1.1])


def _drain(seconds: float) -> DrainRun:
    return DrainRun(200_000, seconds, 200_000 / seconds, 401, 10.0, 12.0)


def _point(slots: int, clean_ms: float) -> GrowthPoint:
    phase = PhaseTiming(_ms(clean_ms), _ms(clean_ms * 0.8))
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
    booking=BookingInterference(
        rate_per_second=200,
        clients=4,
        pairs=2,
        without_worker=_latency(2.0),
        with_worker=_latency(5.0),
        p50_ratio=1.0,
        p99_ratio=2.5,
        pair_p99_ratios=(2.0, 3.0),
        worker_rows=200_000,
        worker_rows_per_second=2e4,
        slots_booked=3_900,
    ),
    memory=MemoryProfile(61.0, 70.0, 66.0, 71.0, 200_000),
    growth=Growth(0.2, (_point(100_000, 10.0), _point(1_000_000, 12.0))),
    plans={"expire_batch": "Update on availability_slots"},
)
FACTS = RunFacts(
    mode="default",
    command="slot-expiration bench",
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
)
REPORT = BenchReport(FACTS, RESULTS)


def test_the_table_has_the_header_and_a_row_for_every_section() -> None:
    markdown = render_markdown(REPORT)

    lines = markdown.splitlines()
    assert "| " + " | ".join(HEADER) + " |" in lines
    rows = [line for line in lines if line.startswith("| ") and line != lines[0]]
    for section in "abcdef":
        assert any(row.startswith(f"| {section}. ") for row in rows), section
    assert all(row.count(" | ") == len(HEADER) - 1 for row in rows)


def test_the_header_says_what_ran_where_and_the_load_it_ran_under() -> None:
    markdown = render_markdown(REPORT)

    assert "`slot-expiration bench` on embedded PostgreSQL on port 5555" in markdown
    assert "the CPUs were 12% busy with other work" in markdown
    assert "load average (1, 5, 15 min): 0.25 / 0.50 / 0.75" in markdown
    assert "a 0.50 -> 1.50, 0, 1, 12 s" in markdown


def test_each_target_is_set_beside_its_result_with_its_verdict() -> None:
    rows = {(row[0], row[1]): row for row in table_rows(REPORT)}

    a = rows[("a. one batch of 500", "inside drain cycles (3 batches each)")]
    assert (a[4], a[5], a[6]) == (
        "1.20 (p95 1.25)",
        "<= 1.3 (goal 1.1)",
        "met (goal 1.1 not reached)",
    )
    b = rows[("b. drain 200,000", "rows per second")]
    assert (b[4], b[6]) == ("1.43 (time)", "not met")
    d = rows[("d. booking latency", "p99 (200/s, 4 clients, 2 pairs of runs)")]
    assert (d[4], d[5], d[6]) == ("2.50 (each pair: 2.00, 3.00)", "<= 1.5", "not met")
    f = rows[("f. worker memory", "resident, idle (`run`)")]
    assert (f[2], f[5], f[6]) == ("61.0 MB", "<= 80 MB", "met")


def test_growth_without_ten_million_slots_says_the_target_was_not_measured() -> None:
    rows = [row for row in table_rows(REPORT) if row[1].startswith("largest vs smallest")]

    assert rows[0][4] == "1.20"  # 1M vs 100k, shown all the same
    assert rows[0][6] == "not measured (needs --full for 10 million slots)"


def test_growth_with_ten_million_slots_is_judged_against_a_hundred_thousand() -> None:
    growth = Growth(0.2, (_point(100_000, 10.0), _point(10_000_000, 25.0)))
    report = BenchReport(FACTS, replace(RESULTS, growth=growth))

    checks = {check.target.section: check for check in report.checks()}

    assert checks["e"].value == pytest.approx(2.5)
    assert checks["e"].verdict is Verdict.NOT_MET


def test_a_section_not_run_has_no_rows_and_its_target_is_not_measured() -> None:
    report = BenchReport(FACTS, BenchResults(batch=RESULTS.batch))

    assert {row[0][0] for row in table_rows(report)} == {"a"}
    verdicts = {check.target.section: check.verdict for check in report.checks()}
    assert verdicts == {
        "a": Verdict.MET,
        "b": Verdict.NOT_MEASURED,
        "d": Verdict.NOT_MEASURED,
        "e": Verdict.NOT_MEASURED,
        "f": Verdict.NOT_MEASURED,
    }


def test_a_target_is_met_at_its_limit_and_not_above() -> None:
    assert BATCH_RATIO.check(1.3).verdict is Verdict.MET
    assert BATCH_RATIO.check(1.31).verdict is Verdict.NOT_MET
    assert BATCH_RATIO.check(1.05).describe() == "met"
    assert IDLE_MEMORY.check(None, "section not run").describe() == "not measured (section not run)"


def test_a_parallel_drain_that_lost_or_repeated_a_row_is_shown_as_such() -> None:
    wrong = replace(_parallel(2, 30_000), not_once=3)
    report = BenchReport(FACTS, BenchResults(parallel=(_parallel(1, 20_000), wrong)))

    verdicts = [row[6] for row in table_rows(report)]

    assert verdicts == ["yes", "NO"]


def test_the_json_holds_the_same_figures_the_targets_and_the_plans() -> None:
    document = json.loads(json.dumps(to_json(REPORT)))

    assert set(document) == {"run", "sections", "targets", "plans"}
    assert set(document["sections"]) == set("abcdef")
    assert document["sections"]["a"]["median_ratio"] == 1.2
    assert document["sections"]["a"]["worker"]["median"] == pytest.approx(12.0)
    assert [c["exactly_once"] for c in document["sections"]["c"]] == [True, True, True]
    assert document["sections"]["e"]["largest_vs_smallest"] == pytest.approx(1.2)
    assert document["sections"]["f"]["idle_mb"] == 61.0
    assert [t["section"] for t in document["targets"]] == ["a", "b", "d", "e", "f"]
    assert {t["verdict"] for t in document["targets"]} == {"met", "not met", "not measured"}
    assert document["plans"] == {"expire_batch": "Update on availability_slots"}
    assert document["run"]["conditions"]["a"]["autovacuum_runs"] == 1
