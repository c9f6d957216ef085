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
from benchmarks.drain_section import DrainComparison, DrainRun, DrainSeries, time_ratio
from benchmarks.growth_section import Growth, GrowthPoint, PhaseTiming
from benchmarks.memory_section import MemoryProfile
from benchmarks.options import WorkerTuning
from benchmarks.parallel_section import ParallelDrain
from benchmarks.partition_section import Layout, Partitioned, PartitionPoint
from benchmarks.report import (
    HEADER,
    TARGETS_HEADER,
    BenchReport,
    BenchResults,
    Conditions,
    RunFacts,
    render_markdown,
    table_rows,
    target_rows,
    throttle_check,
    to_json,
)
from benchmarks.stats import Distribution, Spread
from benchmarks.targets import (
    BATCH_RATIO,
    DRAIN_RATE,
    DRAIN_RATIO,
    GROWTH_RATIO,
    IDLE_MEMORY,
    PARTITIONED_GROWTH,
    TARGETS,
    Verdict,
)
from benchmarks.throttle_section import ThrottleCurve, ThrottlePoint


def _ms(median: float) -> Distribution:
    return Distribution.of([median * 0.9, median, median * 1.1])


def _drain(seconds: float) -> DrainRun:
    return DrainRun(200_000, seconds, 200_000 / seconds, 401, 10.0, 12.0, 260.0, 0.5)


def _series(kind: str, *seconds: float) -> DrainSeries:
    return DrainSeries(kind, tuple(_drain(s) for s in seconds))


def _drains(worker: DrainSeries, bare: DrainSeries) -> DrainComparison:
    synchronous = _series("worker, synchronous commit on", *(r.seconds * 1.1 for r in worker.runs))
    asynchronous = _series(
        "bare loop, synchronous commit off", *(r.seconds * 0.9 for r in bare.runs)
    )
    return DrainComparison(
        backlog=200_000,
        rounds=len(worker.runs),
        worker=worker,
        worker_synchronous=synchronous,
        bare=bare,
        bare_asynchronous=asynchronous,
        time_ratio=time_ratio(worker, bare),
        synchronous_ratio=time_ratio(synchronous, bare),
        asynchronous_floor_ratio=time_ratio(worker, asynchronous),
    )


DRAINS = _drains(_series("worker", 9.0, 9.2, 9.4, 9.1, 9.3), _series("bare loop", *[10.0] * 5))


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


def _size(
    batch_size: int, worker_rate: float, single_rate: float, *, bare: bool = True
) -> BatchSizeDrains:
    worker = _condition(f"worker, {batch_size} a batch, flat out", 4.0, worker_rate)
    loop = _condition(f"bare loop, {batch_size} a batch, flat out", 4.0, worker_rate * 1.2)
    rates = [worker_rate / single_rate * f for f in (0.95, 1.0, 1.05, 0.98, 1.02)]
    return BatchSizeDrains(
        batch_size=batch_size,
        worker=worker,
        bare=loop if bare else None,
        worker_vs_single=_spread(*rates),
        bare_vs_single=_spread(worker_rate * 1.2 / single_rate) if bare else None,
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
    worker_synchronous=_condition(
        "worker, 500 a batch, flat out, synchronous commit on", 7.0, 28_000
    ),
    flat_p99_ratio=_spread(1.3, 1.1, 1.2, 1.25, 1.4),
    paced_p99_ratio=_spread(1.0, 0.9, 1.05, 1.0, 1.1),
    synchronous_p99_ratio=_spread(1.5, 1.4, 1.6, 1.5, 1.45),
)
DRAIN_RATES = DrainRates(
    rounds=5,
    backlog=200_000,
    pause_seconds=0.0,
    drain_batch_size_flag=True,
    no_drain=_condition("no drain", 2.0),
    single=_condition("pg_cron job", 30.0, 100_000, vs_none=15.0),
    sizes=(
        _size(500, 30_000, 100_000, bare=False),
        _size(2_000, 70_000, 100_000),
        _size(5_000, 85_000, 100_000, bare=False),
    ),
)


def _partition_point(layout: Layout, slots: int, clean_ms: float) -> PartitionPoint:
    samples = [clean_ms * 0.9, clean_ms, clean_ms * 1.1] * 16 + [clean_ms] * 2
    rounds = (clean_ms * 0.95, clean_ms, clean_ms * 1.05, clean_ms, clean_ms)
    phase = PhaseTiming(Distribution.of(samples), _ms(clean_ms * 0.8), rounds)
    drain = replace(_drain(1.0), rows=40_000, rows_per_second=40_000, batches=80, wal_mb=48.0)
    return PartitionPoint(
        layout=layout.value,
        slots=slots,
        partitions=27 if layout is Layout.MONTHLY else 0,
        due=40_000,
        load_seconds=3.0,
        table_mib=20.0,
        indexes_mib=10.0,
        clean=phase,
        worker_drain=drain,
        bare_drain=drain,
        worker_drain_again=replace(drain, wal_mb=16.0),
    )


PARTITIONED = Partitioned(
    24,
    (
        _partition_point(Layout.PLAIN, 100_000, 8.0),
        _partition_point(Layout.MONTHLY, 100_000, 8.0),
        _partition_point(Layout.PLAIN, 1_000_000, 12.0),
        _partition_point(Layout.MONTHLY, 1_000_000, 9.0),
    ),
)


def _throttle_point(nice: float, share: float, p99_vs_none: float) -> ThrottlePoint:
    drain = _condition(f"worker, nice ratio {nice:g}", 3.0, 40_000 * share, p99_vs_none)
    return ThrottlePoint(nice, 0.0, drain, _spread(share, share))


THROTTLE = ThrottleCurve(
    rounds=2,
    backlog=200_000,
    batch_size=2_000,
    no_drain=_condition("no drain", 2.0),
    bare_flat=_condition("bare loop, 2,000 a batch, flat out", 4.5, 60_000, 2.3),
    points=(
        _throttle_point(0.0, 1.0, 2.6),
        _throttle_point(1.0, 0.55, 1.8),
        _throttle_point(2.0, 0.42, 1.45),
        _throttle_point(4.0, 0.25, 1.1),
    ),
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
    drain=DRAINS,
    parallel=(_parallel(1, 20_000), _parallel(2, 30_000), _parallel(4, 28_000)),
    booking=BOOKING,
    drain_rate=DRAIN_RATES,
    memory=MemoryProfile(58.0, 70.0, 66.0, 71.0, 200_000),
    growth=Growth(0.2, (_point(100_000, 10.0), _point(1_000_000, 12.0))),
    partitioned=PARTITIONED,
    throttle=THROTTLE,
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


def _tables(markdown: str) -> list[list[str]]:
    """Each Markdown table of the text: its lines, header first."""
    tables: list[list[str]] = []
    current: list[str] = []
    for line in [*markdown.splitlines(), ""]:
        if line.startswith("| "):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables


def test_the_table_has_the_header_and_a_row_for_every_section() -> None:
    main, targets = _tables(render_markdown(REPORT))

    assert main[0] == "| " + " | ".join(HEADER) + " |"
    rows = main[2:]
    for section in "abcdefgh":
        assert any(row.startswith(f"| {section}. ") for row in rows), section
    assert all(row.count(" | ") == len(HEADER) - 1 for row in rows)
    assert targets[0] == "| " + " | ".join(TARGETS_HEADER) + " |"
    assert len(targets[2:]) == len(TARGETS)


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
    b = next(row for key, row in rows.items() if key[1].startswith("time to drain"))
    assert (b[4], b[5], b[6]) == (
        "0.92 (0.90-0.94 over 5 rounds)",
        "<= 0.95 with >= 5 rounds",
        "met",
    )
    f = rows[("f. worker memory", "resident, idle (`run`)")]
    assert (f[2], f[5], f[6]) == ("58.0 MB", "<= 60 MB", "met")


def test_every_target_is_printed_with_its_limit_its_result_and_the_rounds_range() -> None:
    rows = {row[0] + ": " + row[1]: row for row in target_rows(REPORT)}

    b = rows["b: " + DRAIN_RATIO.what]
    assert b[2:] == ("<= 0.95 with >= 5 rounds", "0.92 (0.90-0.94 over 5 rounds)", "met")
    g = rows["g: " + DRAIN_RATE.what]
    assert g[2:] == (">= 0.75 with >= 5 rounds", "0.70 (0.66-0.73 over 5 rounds)", "not met")
    assert rows["f: " + IDLE_MEMORY.what][3] == "58.00 MB"
    assert rows["h: " + PARTITIONED_GROWTH.what][3:] == (
        "-",
        "not measured (needs --full for 10 million slots)",
    )


def test_a_target_measured_in_fewer_rounds_than_it_needs_is_not_judged() -> None:
    drains = _drains(_series("worker", 9.0), _series("bare loop", 10.0))
    report = BenchReport(FACTS, replace(RESULTS, drain=drains))

    check = next(check for check in report.checks() if check.target is DRAIN_RATIO)

    assert check.verdict is Verdict.NOT_MEASURED
    assert check.describe() == "not measured (1 of the 5 rounds it needs)"
    assert check.result() == "0.90 (1 round)"


def test_d_sets_the_worker_beside_the_bare_loop_at_each_pace_with_the_rounds_spread() -> None:
    rows = {(row[0], row[1]): row for row in table_rows(REPORT)}
    label = "d. bookings beside a drain"

    flat = rows[(label, "p99 beside the worker / beside the bare loop, flat out")]
    paced = rows[(label, "p99 beside the worker / beside the bare loop, paced 0.02 s")]
    synchronous = rows[
        (
            label,
            "p99 beside the worker / beside the bare loop, flat out, the worker with "
            "synchronous commit on",
        )
    ]

    assert (flat[4], flat[5], flat[6]) == (
        "1.25 (1.10-1.40 over 5 rounds)",
        "<= 0.85 flat out with >= 5 rounds",
        "not met",
    )
    assert (paced[4], paced[5], paced[6]) == ("1.00 (0.90-1.10 over 5 rounds)", "-", "-")
    assert (synchronous[4], synchronous[5]) == ("1.50 (1.40-1.60 over 5 rounds)", "-")
    none = rows[(label, "no drain (200/s, 4 clients, 5 rounds)")]
    assert none[2].startswith("p50 1.00 ms, p99 2.00 ms")
    worker = rows[(label, "worker, 500 a batch, flat out: p99 / no drain")]
    assert "drain 30,000 rows/s" in worker[2]
    assert worker[4] == "p99 2.00 (1.80-2.20 over 2 rounds); p50 1.05"


def test_b_shows_each_drain_over_the_rounds_with_its_wal_and_client_cpu() -> None:
    rows = [row for row in table_rows(REPORT) if row[0] == "b. drain 200,000"]

    assert [row[1].split(":")[0] for row in rows] == [
        "time to drain, median of 5 rounds",
        "worker, synchronous commit on",
        "bare loop, synchronous commit off",
        "worker",
        "worker, synchronous commit on",
        "bare loop",
        "bare loop, synchronous commit off",
    ]
    assert rows[1][4] == "1.01 (0.99-1.03 over 5 rounds)"  # 1.1 x the worker / the bare loop
    assert rows[2][4] == "1.02 (1.00-1.04 over 5 rounds)"  # the worker / the bare loop x 0.9
    assert rows[3][2] == "10.00 / 12.00 ms; 260 MB; 0.50 ms"
    assert json.loads(json.dumps(to_json(REPORT)))["sections"]["b"]["worker"]["runs"][0][
        "cpu_ms_per_batch"
    ] == pytest.approx(0.5)


def test_g_shows_each_batch_size_and_judges_the_default_one_against_the_pg_cron_job() -> None:
    rows = [row for row in table_rows(REPORT) if row[0] == "g. drain rate"]

    assert [row[1].split(":")[0] for row in rows] == [
        "the pg_cron job (timed by pg_cron), 200,000 rows in one UPDATE",
        "500 rows a batch",
        "2,000 rows a batch",
        "5,000 rows a batch",
        "the default drain batch (2,000 rows) / pg_cron job",
        "best drain batch (5,000 rows) / pg_cron job",
    ]
    assert rows[1][3] == "-"  # no bare loop at 500
    default, best = rows[-2], rows[-1]
    assert (default[2], default[3]) == ("worker 70,000 rows/s", "pg_cron job 100,000 rows/s")
    assert (default[4], default[5], default[6]) == (
        "0.70 (0.66-0.73 over 5 rounds)",
        ">= 0.75 with >= 5 rounds",
        "not met",
    )
    assert (best[4], best[5], best[6]) == ("0.85 (0.81-0.89 over 5 rounds)", "-", "-")


def test_g_says_when_the_peer_was_sent_by_the_benchmark_for_want_of_pg_cron() -> None:
    single = _condition("single statement", 30.0, 100_000, vs_none=15.0)
    report = BenchReport(FACTS, replace(RESULTS, drain_rate=replace(DRAIN_RATES, single=single)))

    first = next(row for row in table_rows(report) if row[0] == "g. drain rate")

    assert "sent and timed by the benchmark: no pg_cron" in first[1]


def test_h_shows_each_table_and_the_growth_of_both_layouts() -> None:
    rows = [row for row in table_rows(REPORT) if row[0].startswith("h.")]

    labels = [row[0] for row in rows]
    assert labels[:3] == ["h. 100,000 slots, unpartitioned"] * 3
    assert "h. 1,000,000 slots, partitioned by month" in labels
    first = rows[0]
    assert first[1] == "one batch (ms); table 20 MiB, indexes 10 MiB"
    drain = rows[1]
    assert (drain[2], drain[3]) == (
        "worker 40,000 rows/s; 600 kB",
        "bare loop 40,000 rows/s; 600 kB",
    )
    again = rows[2]
    assert (again[2], again[4]) == ("worker 40,000 rows/s; 200 kB", "0.33")
    plain, monthly = rows[-2], rows[-1]
    assert plain[1].startswith("unpartitioned: largest vs smallest")
    assert plain[4] == "1.50 (rounds 1.50 (1.50-1.50 over 5 rounds))"
    assert monthly[4].startswith("1.12 ")
    assert monthly[6] == "not measured (needs --full for 10 million slots)"


def test_partitioned_growth_at_ten_million_slots_is_judged_against_a_hundred_thousand() -> None:
    points = (
        _partition_point(Layout.MONTHLY, 100_000, 8.0),
        _partition_point(Layout.MONTHLY, 10_000_000, 11.0),
    )
    report = BenchReport(FACTS, replace(RESULTS, partitioned=Partitioned(24, points)))

    check = next(check for check in report.checks() if check.target is PARTITIONED_GROWTH)

    assert check.value == pytest.approx(11.0 / 8.0)
    assert check.verdict is Verdict.MET
    assert check.result() == "1.38 (1.38-1.38 over 5 rounds)"


def test_a_section_h_without_pg_partman_says_so() -> None:
    missing = Partitioned(24, (), not_measured="pg_partman is not installed on this server")
    report = BenchReport(FACTS, replace(RESULTS, partitioned=missing))

    check = next(check for check in report.checks() if check.target is PARTITIONED_GROWTH)

    assert check.describe() == "not measured (pg_partman is not installed on this server)"


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
    assert described == "not measured (12 of the 50 batches it needs)"


def test_the_growth_spread_pairs_each_rounds_median_on_the_largest_and_smallest_table() -> None:
    growth = Growth(0.2, (_point(100_000, 10.0), _point(1_000_000, 12.0)))

    spread = growth.round_ratios

    assert spread is not None
    assert spread.values == pytest.approx((1.2, 1.2, 1.2))


def test_a_section_not_run_has_no_rows_and_its_target_is_not_measured() -> None:
    report = BenchReport(FACTS, BenchResults(batch=RESULTS.batch))

    assert {row[0][0] for row in table_rows(report)} == {"a"}
    verdicts = [check.verdict for check in report.checks()]
    assert verdicts == [Verdict.MET, Verdict.MET, *[Verdict.NOT_MEASURED] * 7]


def test_a_target_is_met_at_its_limit_and_not_above() -> None:
    assert BATCH_RATIO.check(1.2).verdict is Verdict.MET
    assert BATCH_RATIO.check(1.21).verdict is Verdict.NOT_MET
    assert BATCH_RATIO.check(1.05).describe() == "met"
    assert IDLE_MEMORY.check(None, "section not run").describe() == "not measured (section not run)"


def test_an_at_least_target_is_met_at_its_limit_and_above() -> None:
    assert DRAIN_RATE.check(0.75).verdict is Verdict.MET
    assert DRAIN_RATE.check(1.3).verdict is Verdict.MET
    assert DRAIN_RATE.check(0.74).verdict is Verdict.NOT_MET
    assert DRAIN_RATE.describe() == ">= 0.75 with >= 5 rounds"


def test_the_targets() -> None:
    assert [(t.section, t.describe()) for t in TARGETS] == [
        ("a", "<= 1.2"),
        ("a", "<= 1.15"),
        ("b", "<= 0.95 with >= 5 rounds"),
        ("d", "<= 0.85 flat out with >= 5 rounds"),
        ("e", "<= 1.5 with >= 50 batches"),
        ("h", "<= 1.5 with >= 50 batches"),
        ("f", "<= 60 MB"),
        ("g", ">= 0.75 with >= 5 rounds"),
        ("i", "<= 1.5 while it drains at >= 40% of flat out with >= 5 rounds"),
    ]


def test_a_parallel_drain_that_lost_or_repeated_a_row_is_shown_as_such() -> None:
    wrong = replace(_parallel(2, 30_000), not_once=3)
    report = BenchReport(FACTS, BenchResults(parallel=(_parallel(1, 20_000), wrong)))

    verdicts = [row[6] for row in table_rows(report)]

    assert verdicts == ["yes", "NO"]


def test_the_json_holds_the_same_figures_the_targets_and_the_plans() -> None:
    document = json.loads(json.dumps(to_json(REPORT)))

    assert set(document) == {"run", "sections", "targets", "plans"}
    assert set(document["sections"]) == set("abcdefghi")
    assert document["sections"]["a"]["median_ratio"] == 1.2
    assert document["sections"]["a"]["worker"]["median"] == pytest.approx(12.0)
    assert [c["exactly_once"] for c in document["sections"]["c"]] == [True, True, True]
    assert document["sections"]["e"]["largest_vs_smallest"] == pytest.approx(1.2)
    assert document["sections"]["f"]["idle_mb"] == 58.0
    assert [t["section"] for t in document["targets"]] == [
        "a",
        "a",
        "b",
        "d",
        "e",
        "h",
        "f",
        "g",
        "i",
    ]
    assert document["targets"][2]["spread"]["values"] == pytest.approx(
        [0.9, 0.92, 0.94, 0.91, 0.93]
    )
    assert document["sections"]["b"]["time_ratio"]["median"] == pytest.approx(0.92)
    assert document["sections"]["g"]["default_vs_single"]["median"] == pytest.approx(0.7)
    assert document["sections"]["g"]["peer_is_cron"] is True
    assert document["sections"]["h"]["monthly_growth"] == pytest.approx(9.0 / 8.0)
    assert document["sections"]["d"]["flat_p99_ratio"]["values"] == [1.3, 1.1, 1.2, 1.25, 1.4]
    assert document["sections"]["d"]["slots_booked"] == 6_000
    assert document["sections"]["g"]["best_batch_size"] == 5_000
    assert document["sections"]["g"]["best_vs_single"]["median"] == pytest.approx(0.85)
    assert {t["verdict"] for t in document["targets"]} == {"met", "not met", "not measured"}
    assert document["plans"] == {"expire_batch": "Update on availability_slots"}
    assert document["run"]["conditions"]["a"]["autovacuum_runs"] == 1


def test_the_least_throttled_setting_that_meets_the_target_is_the_one_chosen() -> None:
    # nice 1 keeps 55% but its p99 is 1.8 x; nice 2 keeps 42% at 1.45 x; nice 4 is lower
    # still (1.1 x) but keeps only 25%.
    assert THROTTLE.chosen is not None
    assert THROTTLE.chosen.nice_ratio == 2.0
    assert THROTTLE.floor is not None
    assert THROTTLE.floor.nice_ratio == 2.0


def test_where_no_setting_meets_the_target_the_floor_is_the_lowest_p99_that_kept_the_share() -> (
    None
):
    curve = replace(
        THROTTLE,
        points=(_throttle_point(0.0, 1.0, 2.6), _throttle_point(1.0, 0.5, 1.9)),
    )

    assert curve.chosen is None
    assert curve.floor is not None
    assert curve.floor.nice_ratio == 1.0
    rows = table_rows(BenchReport(FACTS, BenchResults(throttle=curve)))
    assert "no setting meets it; the floor: nice ratio 1, p99 1.90" in rows[-1][2]


def test_the_throttle_target_reads_the_default_setting_and_its_rounds() -> None:
    check = throttle_check(THROTTLE)  # the default: flat out, 2.6 x in 2 rounds

    assert check.verdict is Verdict.NOT_MEASURED
    assert check.why_not_measured == "2 of the 5 rounds it needs"
    five = replace(
        THROTTLE,
        points=(
            ThrottlePoint(
                0.0,
                0.0,
                replace(THROTTLE.points[0].drain, p99_vs_none=_spread(*[1.3] * 5)),
                _spread(*[1.0] * 5),
            ),
        ),
    )
    assert throttle_check(five).verdict is Verdict.MET
    assert throttle_check(replace(five, points=())).why_not_measured == (
        "the default setting not run"
    )
