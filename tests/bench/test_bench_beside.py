"""Sections d and g's machinery without a database: conditions, their rounds and ratios,
how long pgbench runs, a worker's drain read from its log, the worker's flags."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from benchmarks.beside import (
    ConditionRun,
    Drained,
    Drainer,
    DrainKind,
    PgbenchLength,
    Window,
    condition,
    p99_ratio,
    until_minute_start,
    window_of,
    worker_timing,
)
from benchmarks.context import BenchContext, BenchError, Progress, WorkerPace
from benchmarks.drain_rate_section import rate_ratio
from benchmarks.options import WorkerTuning
from benchmarks.pgbench import LoggedTransaction
from benchmarks.plan import Mode, plan_for

from slot_expiration.options import SynchronousCommit

AS_OF = datetime(2026, 12, 4, 8, 0, tzinfo=UTC)
WORKER = Drainer(DrainKind.WORKER, 500)
BARE = Drainer(DrainKind.BARE, 500)
NONE = Drainer(DrainKind.NONE)


def _window(latencies_ms: list[float], start: float = 1_000.0) -> Window:
    logged = tuple(
        LoggedTransaction(0, "ok", ms, start + n * 0.01, 0.0) for n, ms in enumerate(latencies_ms)
    )
    return Window(logged, 10.0)


def _run(drainer: Drainer, p99_ms: float, rows: int = 0, seconds: float = 1.0) -> ConditionRun:
    drained = Drained(rows, 1_000.0, 1_000.0 + seconds, (10.0, 12.0)) if rows else None
    return ConditionRun(drainer, _window([1.0] * 99 + [p99_ms] * 101), drained, booked=7)


def test_the_labels_say_the_drain_its_batch_and_its_pace() -> None:
    assert WORKER.label == "worker, 500 a batch, flat out"
    assert Drainer(DrainKind.BARE, 2_000, 0.02).label == "bare loop, 2,000 a batch, paced 0.02 s"
    assert Drainer(DrainKind.SINGLE).label == "single statement"
    assert NONE.label == "no drain"


def test_a_condition_pools_its_rounds_and_sets_each_beside_its_rounds_run_without_a_drain() -> None:
    baselines = [_run(NONE, 2.0), _run(NONE, 4.0)]
    runs = [_run(WORKER, 6.0, 200_000, 10.0), _run(WORKER, 6.0, 200_000, 5.0)]

    worker = condition(runs, baselines)

    assert worker.label == "worker, 500 a batch, flat out"
    assert worker.p99_vs_none is not None
    assert worker.p99_vs_none.values == pytest.approx((3.0, 1.5))
    assert worker.rows_per_second is not None
    assert worker.rows_per_second.values == pytest.approx((20_000, 40_000))
    assert worker.drain_seconds == pytest.approx((10.0, 5.0))
    assert worker.batch_ms is not None
    assert worker.batch_ms.count == 4
    assert worker.latency.bookings == 400
    assert worker.slots_booked == 14


def test_the_headline_is_each_rounds_p99_beside_the_worker_over_beside_the_bare_loop() -> None:
    worker = [_run(WORKER, 6.0, 1), _run(WORKER, 3.0, 1)]
    bare = [_run(BARE, 5.0, 1), _run(BARE, 3.0, 1)]

    spread = p99_ratio(worker, bare)

    assert spread is not None
    assert spread.values == pytest.approx((1.2, 1.0))
    assert spread.median == pytest.approx(1.1)


def test_drain_rates_are_compared_round_by_round() -> None:
    worker = [_run(WORKER, 1.0, 100_000, 4.0), _run(WORKER, 1.0, 100_000, 5.0)]
    single = [_run(Drainer(DrainKind.SINGLE), 1.0, 100_000, 2.0)] * 2

    spread = rate_ratio(worker, single)

    assert spread is not None
    assert spread.values == pytest.approx((0.5, 0.4))


def test_the_window_keeps_the_bookings_that_ended_in_it() -> None:
    logged = list(_window([1.0, 2.0, 3.0, 4.0], start=100.0).transactions)  # end 100.00..100.03

    window = window_of(logged, 100.005, 100.025)

    assert [t.latency_ms for t in window.transactions] == [2.0, 3.0]
    assert window.seconds == pytest.approx(0.015)
    with pytest.raises(BenchError, match="no booking ended"):
        window_of(logged, 200.0, 300.0)


def test_a_drain_between_two_bookings_is_measured_by_the_next_one_to_end() -> None:
    logged = list(_window([1.0, 2.0, 3.0, 4.0], start=100.0).transactions)  # end 100.00..100.03

    window = window_of(logged, 100.012, 100.014)  # no booking ended in those 2 ms

    assert [t.latency_ms for t in window.transactions] == [3.0]


def _event(name: str, second: float) -> dict[str, str]:
    moment = datetime.fromtimestamp(1_000 + second, UTC)
    return {"event": name, "timestamp": moment.isoformat()}


def test_a_workers_batches_are_timed_between_its_log_lines_less_the_pause() -> None:
    events = [
        _event("worker.started", 0.0),
        _event("cycle.started", 1.0),
        _event("batch.selected", 1.05),
        _event("batch.selected", 1.125),
        _event("batch.selected", 1.2),
        _event("cycle.completed", 1.3),
    ]

    start, end, batch_ms = worker_timing(events, pause_seconds=0.02)

    assert start == pytest.approx(1_001.0)
    assert end == pytest.approx(1_001.3)
    assert batch_ms == pytest.approx((50.0, 55.0, 55.0))
    with pytest.raises(BenchError, match="no cycle with a batch"):
        worker_timing(events[:2], 0.0)


def _context(mode: Mode = Mode.DEFAULT) -> BenchContext:
    return BenchContext(
        url="postgresql://h/db",
        as_of=AS_OF,
        plan=plan_for(mode),
        store=None,  # type: ignore[arg-type]  # not used here
        progress=Progress(),
    )


def test_pgbench_outlasts_a_drain_by_some_slack_guessed_first_then_as_measured() -> None:
    ctx = _context()
    length = PgbenchLength(ctx, 200_000)
    paced = replace(WORKER, pause_seconds=0.02)

    assert length.seconds(NONE) == ctx.plan.booking.seconds
    first_guess = length.seconds(paced)
    assert first_guess > length.seconds(WORKER)  # 399 pauses more
    length.saw(ConditionRun(paced, _window([1.0]), Drained(200_000, 0.0, 11.98, ()), 0))
    assert length.seconds(paced) == pytest.approx(
        ctx.plan.booking.warmup_seconds + 1.15 * 11.98 + 0.5
    )
    # 399 pauses of 0.02 s left out: the worker works at 50,000 rows/s, so at any other
    # batch size or pace it is expected to take 4 s and its pauses.
    flat = replace(WORKER, batch_size=2_000)
    assert length.seconds(flat) == pytest.approx(ctx.plan.booking.warmup_seconds + 1.15 * 4 + 0.5)


def test_a_workers_drain_batch_size_goes_to_drain_batch_size_when_it_has_that_flag() -> None:
    ctx = _context()

    without = ctx.drain_once_args(2.0, WorkerPace(5_000))
    with_flag = ctx.drain_once_args(2.0, WorkerPace(5_000, 0.02, drain_batch_size_flag=True))

    assert _flag(without, "--batch-size") == "5000"
    assert "--drain-batch-size" not in without
    assert _flag(with_flag, "--batch-size") == "500"
    assert _flag(with_flag, "--drain-batch-size") == "5000"
    assert _flag(with_flag, "--batch-pause-seconds") == "0.02"
    assert _flag(ctx.drain_once_args(2.0), "--batch-size") == "500"


def _flag(args: tuple[str, ...], name: str) -> str:
    return args[args.index(name) + 1]


def test_every_worker_drains_batch_for_batch_once_it_has_drain_batch_size() -> None:
    ctx = replace(_context(), drain_batch_size_flag=True)

    flags = ctx.worker_flags()

    assert _flag(flags, "--batch-size") == _flag(flags, "--drain-batch-size") == "500"
    assert "--drain-batch-size" not in _context().worker_flags()


def test_every_worker_commits_as_the_run_says_unless_its_drain_says_otherwise() -> None:
    ctx = _context()
    synchronous = WorkerPace(500, synchronous_commit=SynchronousCommit.ON)

    assert _flag(ctx.worker_flags(), "--synchronous-commit") == "off"  # the worker's default
    assert _flag(ctx.worker_flags(synchronous), "--synchronous-commit") == "on"
    run_on = replace(ctx, worker=WorkerTuning(synchronous_commit=SynchronousCommit.ON))
    assert _flag(run_on.worker_flags(), "--synchronous-commit") == "on"
    assert (
        Drainer(DrainKind.WORKER, 500, synchronous_commit=SynchronousCommit.ON).label
        == "worker, 500 a batch, flat out, synchronous commit on"
    )


@pytest.mark.parametrize(
    ("seconds_past_a_minute", "wait"),
    [
        (20.0, 35.0),  # warm-up 2 s, then the job scheduled 3 s before the minute's start
        (55.0, 0.0),  # just in time for this minute
        (57.0, 58.0),  # too late for this minute: the next
    ],
)
def test_the_pg_cron_jobs_bookings_start_so_that_their_warm_up_ends_before_the_minute(
    seconds_past_a_minute: float, wait: float
) -> None:
    now = 600_000.0 + seconds_past_a_minute  # 600,000 s is a minute's start

    assert until_minute_start(now, warmup_seconds=2.0) == pytest.approx(wait)
