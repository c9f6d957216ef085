"""Drains beside the booking load: the machinery that sections d and g share.

A *condition* is one way of draining the backlog (or none) with pgbench booking
beside it at a fixed rate. Each run of a condition starts from the table as
loaded (the backlog put back, vacuumed, after a CHECKPOINT) and fresh booking
candidates; pgbench books for its warm-up, then the drain runs. Without a drain
the bookings after the warm-up count; beside one, the bookings that ended while
it ran (from its first statement's start to its end).

The drains: the worker (a real `slot-expiration once --max-batches-per-cycle 0`
process, timed by its cycle.started and cycle.completed log lines), the bare
loop (the bare batch statement, one batch after the other, as section b runs
it, from this process; the same pause after each full batch as the worker's
`--batch-pause-seconds` when paced), and the single statement (every due row in
one UPDATE) run as a real pg_cron job, timed by pg_cron's own cron.job_run_details
(or, where pg_cron is not installed, sent and timed by the benchmark). pg_cron
starts jobs at a minute's start: its run's bookings begin so that their warm-up
ends just before it. A round runs every condition once, in an order turned by one
each round, so that no condition always follows the same one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from benchmarks.context import BenchContext, BenchError, WorkerPace
from benchmarks.dataset import restore_backlog
from benchmarks.pgbench import (
    LoggedTransaction,
    PgbenchSettings,
    between,
    booking_script,
    run_pgbench,
)
from benchmarks.processes import event_time, once_summary, worker_process
from benchmarks.stats import Distribution, Spread, rate, ratio
from benchmarks.store import booking_statements
from slot_expiration.domain import BOOK, sources_of
from slot_expiration.options import SynchronousCommit
from slot_expiration.options.settings import DEFAULT_LOCK_TIMEOUT_SECONDS
from slot_expiration.slots.options import SlotOptions

LOCK_TIMEOUT_SECONDS = DEFAULT_LOCK_TIMEOUT_SECONDS  # the worker's default
# A first guess of a drain's pace beside the bookings, before one was measured: it sets
# how long pgbench runs (the drain's time with some slack), never a result.
GUESSED_ROWS_PER_SECOND = {
    "worker": 15_000.0,
    "bare loop": 20_000.0,
    "single statement": 40_000.0,
    "pg_cron job": 40_000.0,
}
SLACK = 1.15  # pgbench runs this many times the drain's expected time, and SLACK_SECONDS more
SLACK_SECONDS = 0.5
CRON_JOB = "slot-expiration-bench"
# The job is scheduled this long before the minute's start pg_cron runs it at.
CRON_LEAD_SECONDS = 3.0
CRON_WAIT_SECONDS = 120.0
_CRON_POLL_SECONDS = 0.05


class DrainKind(StrEnum):
    NONE = "no drain"
    WORKER = "worker"
    BARE = "bare loop"
    SINGLE = "single statement"
    CRON = "pg_cron job"


@dataclass(frozen=True, slots=True)
class Drainer:
    kind: DrainKind
    batch_size: int = 500
    pause_seconds: float = 0.0
    drain_batch_size_flag: bool = False  # the worker is given --drain-batch-size
    synchronous_commit: SynchronousCommit | None = None  # the worker's; None: the run's
    nice_ratio: float = 0.0  # the worker's --drain-nice-ratio
    max_slowdown: float = 0.0  # the worker's --drain-max-slowdown (the adaptive mode)

    @property
    def batched(self) -> bool:
        return self.kind in {DrainKind.WORKER, DrainKind.BARE}

    @property
    def label(self) -> str:
        """`worker, 500 a batch, flat out`, `bare loop, 500 a batch, paced 0.02 s`, ..."""
        if not self.batched:
            return self.kind.value
        pace = f"paced {self.pause_seconds:g} s" if self.pause_seconds else "flat out"
        if self.nice_ratio:
            pace = f"nice ratio {self.nice_ratio:g}"
        if self.max_slowdown:
            pace = f"adaptive, max slowdown {self.max_slowdown:g}"
        commit = (
            f", synchronous commit {self.synchronous_commit.value}"
            if self.synchronous_commit is not None
            else ""
        )
        return f"{self.kind.value}, {self.batch_size:,} a batch, {pace}{commit}"

    def batches(self, backlog: int) -> int:
        return -(-backlog // self.batch_size) if self.batched else 1


@dataclass(frozen=True, slots=True)
class Window:
    """The bookings pgbench logged in a stretch of time, and how long it was."""

    transactions: tuple[LoggedTransaction, ...]
    seconds: float


@dataclass(frozen=True, slots=True)
class BookingLatency:
    bookings: int  # transactions that succeeded in the windows
    failed: int  # transactions pgbench logged as failed or skipped in the windows
    latency_ms: Distribution
    bookings_per_second: float
    window_seconds: float


@dataclass(frozen=True, slots=True)
class Drained:
    """What a drain did: rows, its start and end (Unix time), each batch's milliseconds."""

    rows: int
    start: float
    end: float
    batch_ms: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class ConditionRun:
    """One run of a condition: the bookings in its window, what its drain did."""

    drainer: Drainer
    window: Window
    drained: Drained | None  # None: no drain
    booked: int  # candidate slots the bookings moved to Booked

    @property
    def latency(self) -> BookingLatency:
        return latency_of([self.window])


@dataclass(frozen=True, slots=True)
class Condition:
    """A condition over the rounds: its bookings pooled, its ratios to no drain per round."""

    label: str
    kind: str
    batch_size: int
    pause_seconds: float
    latency: BookingLatency  # the rounds' bookings pooled
    p50_ms: Spread  # each round's p50
    p99_ms: Spread  # each round's p99
    p50_vs_none: Spread | None  # each round's p50 / that round's p50 without a drain
    p99_vs_none: Spread | None
    rows: int  # the backlog each run drained (0 without a drain)
    rows_per_second: Spread | None  # each round's drain rate
    drain_seconds: tuple[float, ...]
    batch_ms: Distribution | None  # every batch of every round (the single statement: one)
    slots_booked: int  # over the rounds: proof that the bookings took


async def run_condition(
    ctx: BenchContext, drainer: Drainer, pgbench_seconds: float
) -> ConditionRun:
    """One run: the table as loaded, pgbench booking, the drain after its warm-up."""
    load = ctx.plan.booking
    backlog = await restore_backlog(ctx.store, ctx.as_of)
    script = booking_script(
        booking_statements(), await ctx.store.fill_booking_candidates(ctx.as_of, load.candidates)
    )
    settings = PgbenchSettings(
        pgbench_seconds, load.rate_per_second, load.clients, booking_variables()
    )
    if drainer.kind is DrainKind.NONE:
        started = time.time()
        logged = await run_pgbench(ctx.url, script, settings)
        window = window_of(logged, started + load.warmup_seconds)
        return ConditionRun(drainer, window, None, await ctx.store.booked_candidates())
    if drainer.kind is DrainKind.CRON:
        await asyncio.sleep(until_minute_start(time.time(), load.warmup_seconds))
    bookings = asyncio.create_task(run_pgbench(ctx.url, script, settings))
    try:
        await asyncio.sleep(load.warmup_seconds)  # bookings reach their pace
        drained = await _DRAINS[drainer.kind](ctx, drainer)
        logged = await bookings
    finally:
        bookings.cancel()
        await asyncio.gather(bookings, return_exceptions=True)
    if drained.rows != backlog:
        raise BenchError(f"{drainer.label} expired {drained.rows} rows, not the backlog {backlog}")
    window = window_of(logged, drained.start, drained.end)
    return ConditionRun(drainer, window, drained, await ctx.store.booked_candidates())


def until_minute_start(now: float, warmup_seconds: float) -> float:
    """Seconds to wait from `now` (Unix time) so that a warm-up started then ends
    CRON_LEAD_SECONDS before a minute's start, when pg_cron runs its jobs."""
    lead = warmup_seconds + CRON_LEAD_SECONDS
    wait = (60.0 - now % 60.0) - lead
    return wait if wait >= 0 else wait + 60.0


async def _cron_drain(ctx: BenchContext, drainer: Drainer) -> Drained:
    """The single statement as a pg_cron job, timed by pg_cron (cron.job_run_details)."""
    del drainer
    job = await ctx.store.schedule_single_statement(CRON_JOB)
    try:
        async with asyncio.timeout(CRON_WAIT_SECONDS):
            # pg_cron's own table tells when the job ran: there is no event to wait on.
            while (run := await ctx.store.cron_run(job)) is None:  # noqa: ASYNC110
                await asyncio.sleep(_CRON_POLL_SECONDS)
    except TimeoutError:
        raise BenchError(f"the pg_cron job did not run within {CRON_WAIT_SECONDS:g} s") from None
    finally:
        await ctx.store.unschedule(job)
    if run.status != "succeeded":
        raise BenchError(f"the pg_cron job failed: {run.return_message}")
    start, end = run.start_time.timestamp(), run.end_time.timestamp()
    return Drained(run.rows, start, end, ((end - start) * 1000.0,))


async def _worker_drain(ctx: BenchContext, drainer: Drainer) -> Drained:
    pace = WorkerPace(
        drainer.batch_size,
        drainer.pause_seconds,
        drainer.drain_batch_size_flag,
        drainer.synchronous_commit,
        drainer.nice_ratio,
        drainer.max_slowdown,
    )
    async with worker_process(*ctx.drain_once_args(LOCK_TIMEOUT_SECONDS, pace)) as worker:
        await worker.wait()
    start, end, batch_ms = worker_timing(worker.events(), drainer.pause_seconds, drainer.nice_ratio)
    rows = int(once_summary(worker)["expired_count"])
    return Drained(rows, start, end, batch_ms)


def worker_timing(
    events: Sequence[dict[str, Any]], pause_seconds: float, nice_ratio: float = 0.0
) -> tuple[float, float, tuple[float, ...]]:
    """A worker's drain from its log: its cycle's start and end (Unix time), and each
    batch's milliseconds from one batch's log line to the next's: the batch and the
    code around it, less the pause before it (and the nice rest after the batch before,
    ratio x its time: the span over 1 + ratio); the first from the cycle's start (its
    set-up too)."""
    moments = [
        event_time(event).timestamp()
        for event in events
        if event["event"] in {"cycle.started", "batch.selected", "cycle.completed"}
    ]
    if len(moments) < 3:
        raise BenchError("a worker's log has no cycle with a batch")
    pauses = [0.0] + [pause_seconds] * (len(moments) - 3)
    rests = [1.0] + [1.0 + nice_ratio] * (len(moments) - 3)
    batch_ms = tuple(
        (b - a - pause) * 1000.0 / rest
        for a, b, pause, rest in zip(moments[:-2], moments[1:-1], pauses, rests, strict=True)
    )
    return moments[0], moments[-1], batch_ms


async def _bare_drain(ctx: BenchContext, drainer: Drainer) -> Drained:
    size, rows, batch_ms = drainer.batch_size, 0, []
    start = time.time()
    while True:
        started = time.perf_counter()
        count = await ctx.store.bare_batch(ctx.as_of, size)
        batch_ms.append((time.perf_counter() - started) * 1000.0)
        rows += count
        if count < size:
            break
        if drainer.pause_seconds:
            await asyncio.sleep(drainer.pause_seconds)
    return Drained(rows, start, time.time(), tuple(batch_ms))


async def _single_statement(ctx: BenchContext, drainer: Drainer) -> Drained:
    del drainer
    start = time.time()
    rows = await ctx.store.expire_all_due()
    end = time.time()
    return Drained(rows, start, end, ((end - start) * 1000.0,))


_DRAINS: dict[DrainKind, Callable[[BenchContext, Drainer], Awaitable[Drained]]] = {
    DrainKind.WORKER: _worker_drain,
    DrainKind.BARE: _bare_drain,
    DrainKind.SINGLE: _single_statement,
    DrainKind.CRON: _cron_drain,
}


class PgbenchLength:
    """How long pgbench runs for a condition: without a drain the plan's length; beside
    one its warm-up and the drain's expected time, with slack, so that the bookings
    outlast the drain without idling long after it. The expected time is the condition's
    last measured one, else what the last drain of its kind (at any batch size or pace)
    says of its working pace, else a guess."""

    def __init__(self, ctx: BenchContext, backlog: int) -> None:
        self._load = ctx.plan.booking
        self._backlog = backlog
        self._seen: dict[Drainer, float] = {}
        self._working_rate: dict[DrainKind, float] = {}  # rows per second, pauses left out

    def seconds(self, drainer: Drainer) -> float:
        if drainer.kind is DrainKind.NONE:
            return self._load.seconds
        expected = self._seen.get(drainer) or self._expected(drainer)
        lead = CRON_LEAD_SECONDS if drainer.kind is DrainKind.CRON else 0.0
        return self._load.warmup_seconds + lead + SLACK * expected + SLACK_SECONDS

    def saw(self, run: ConditionRun) -> None:
        drained = run.drained
        if drained is None:
            return
        seconds = drained.end - drained.start
        self._seen[run.drainer] = seconds
        working = (seconds - self._pauses(run.drainer, drained.rows)) / (
            1.0 + run.drainer.nice_ratio
        )
        if working > 0 and drained.rows:
            self._working_rate[run.drainer.kind] = drained.rows / working

    def _expected(self, drainer: Drainer) -> float:
        guessed = GUESSED_ROWS_PER_SECOND[drainer.kind.value]
        working_rate = self._working_rate.get(drainer.kind, guessed)
        working = self._backlog / working_rate * (1.0 + drainer.nice_ratio)
        return working + self._pauses(drainer, self._backlog)

    @staticmethod
    def _pauses(drainer: Drainer, rows: int) -> float:
        return (drainer.batches(rows) - 1) * drainer.pause_seconds


async def run_rounds(
    ctx: BenchContext, drainers: Sequence[Drainer], rounds: int, section: str
) -> list[list[ConditionRun]]:
    """Every condition once per round, the order turned by one each round; each round's
    runs returned in the order of `drainers`."""
    length = PgbenchLength(ctx, ctx.plan.backlog)
    results: list[list[ConditionRun]] = []
    for number in range(rounds):
        turn = number % len(drainers)
        order = [*drainers[turn:], *drainers[:turn]]
        runs: dict[Drainer, ConditionRun] = {}
        for drainer in order:
            ctx.progress(f"{section}. round {number + 1}/{rounds}: bookings, {drainer.label}")
            run = await run_condition(ctx, drainer, length.seconds(drainer))
            length.saw(run)
            runs[drainer] = run
        results.append([runs[drainer] for drainer in drainers])
    return results


def condition(runs: Sequence[ConditionRun], baselines: Sequence[ConditionRun]) -> Condition:
    """A condition's runs over the rounds, each set beside its round's run without a drain."""
    drainer = runs[0].drainer
    latencies = [run.latency for run in runs]
    base = [run.latency for run in baselines]
    drained = [run.drained for run in runs if run.drained is not None]
    batch_ms = [ms for d in drained for ms in d.batch_ms]
    return Condition(
        label=drainer.label,
        kind=drainer.kind.value,
        batch_size=drainer.batch_size if drainer.batched else 0,
        pause_seconds=drainer.pause_seconds,
        latency=latency_of([run.window for run in runs]),
        p50_ms=_spread([lat.latency_ms.median for lat in latencies]),
        p99_ms=_spread([lat.latency_ms.p99 for lat in latencies]),
        p50_vs_none=Spread.of(
            [
                ratio(a.latency_ms.median, b.latency_ms.median)
                for a, b in zip(latencies, base, strict=True)
            ]
        ),
        p99_vs_none=Spread.of(
            [
                ratio(a.latency_ms.p99, b.latency_ms.p99)
                for a, b in zip(latencies, base, strict=True)
            ]
        ),
        rows=drained[0].rows if drained else 0,
        rows_per_second=Spread.of([rate(d.rows, d.end - d.start) for d in drained]),
        drain_seconds=tuple(d.end - d.start for d in drained),
        batch_ms=Distribution.of(batch_ms) if batch_ms else None,
        slots_booked=sum(run.booked for run in runs),
    )


def p99_ratio(runs: Sequence[ConditionRun], references: Sequence[ConditionRun]) -> Spread | None:
    """Each round's booking p99 beside one drain / beside another."""
    return Spread.of(
        [
            ratio(run.latency.latency_ms.p99, reference.latency.latency_ms.p99)
            for run, reference in zip(runs, references, strict=True)
        ]
    )


def _spread(values: Sequence[float]) -> Spread:
    spread = Spread.of(values)
    if spread is None:
        raise BenchError("no round measured")
    return spread


def booking_variables() -> dict[str, str]:
    """What the book operation passes to book_slot besides the slot and the clock: from
    the state machine and the slot context's default lead time."""
    sources = ",".join(sorted(status.value for status in sources_of(BOOK.target)))
    lead = SlotOptions.model_fields["min_lead_time_minutes"].default
    return {"target": BOOK.target.value, "sources": f"{{{sources}}}", "lead_minutes": str(lead)}


def window_of(
    logged: Sequence[LoggedTransaction], start: float, end: float = float("inf")
) -> Window:
    """The bookings that ended in [start, end]; the window ends at the last of them at most.
    A drain shorter than the gap between two bookings (the single statement on a small table)
    is measured by the first booking that ended after its start: it waited, if at all,
    behind that drain."""
    later = sorted(between(logged, start, float("inf")), key=lambda t: t.ended_at)
    kept = between(logged, start, end) or later[:1]
    if not kept:
        raise BenchError("no booking ended while it was measured")
    first = max(start, min(t.ended_at for t in logged))
    last = min(end, max(t.ended_at for t in kept))
    return Window(tuple(kept), max(last - first, 0.0))


def latency_of(windows: Sequence[Window]) -> BookingLatency:
    """The bookings of several windows, pooled."""
    logged = [t for window in windows for t in window.transactions]
    done = [t.latency_ms for t in logged if t.ok and t.latency_ms is not None]
    if not done:
        raise BenchError("no booking succeeded while it was measured")
    seconds = sum(window.seconds for window in windows)
    return BookingLatency(
        bookings=len(done),
        failed=len(logged) - len(done),
        latency_ms=Distribution.of(done),
        bookings_per_second=rate(len(done), seconds),
        window_seconds=seconds,
    )
