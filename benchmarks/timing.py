"""Timing the two things compared: the worker's own batches and the bare batch statement.

The worker is the real one, in this process: the cycle `once` and `run` build
(`worker.build_cycle`), run under its budget by `run_cycle`, each batch's
time taken from its BatchResult.duration_ms through the cycle's events. The bare
statement runs from the same client library (psycopg, async) on one autocommit
session, timed around the call: one statement, one round trip.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime

from benchmarks.options import WorkerTuning
from benchmarks.store import BenchStore
from slot_expiration.expiry import BatchCommitted, BatchResult, CycleEnded, CycleResult, run_cycle
from slot_expiration.loop import Event
from slot_expiration.options import WorkerOptions, load_options
from slot_expiration.worker import build_cycle

# A drain of the whole backlog fits in one cycle: the budget is the cycle's
# time limit, not what is measured.
DRAIN_BUDGET_SECONDS = 600.0


@dataclass(slots=True)
class BatchRecorder:
    """A sink that keeps every batch and cycle result, and logs nothing."""

    batches: list[BatchResult] = field(default_factory=list)
    cycles: list[CycleResult] = field(default_factory=list)

    def __call__(self, event: Event) -> None:
        match event:
            case BatchCommitted(_, batch):
                self.batches.append(batch)
            case CycleEnded(result, None):
                self.cycles.append(result)

    def batch_ms(self) -> list[float]:
        return [batch.duration_ms for batch in self.batches]


def worker_options(
    url: str, batch_size: int, max_batches: int, worker: WorkerTuning | None = None
) -> WorkerOptions:
    """The worker's options as a deployment would set them for a drain (none from the
    environment): the given batch size and batches per cycle, a budget the drain fits in."""
    tuning = worker or WorkerTuning()
    return load_options(
        environment=False,
        database_url=url,
        batch_size=batch_size,
        drain_batch_size=batch_size,  # batch for batch against the bare loop
        max_batches_per_cycle=max_batches,
        max_cycle_seconds=DRAIN_BUDGET_SECONDS,
        prepared_statements=tuning.prepared_statements,
        batch_pause_seconds=tuning.batch_pause_seconds,
        synchronous_commit=tuning.synchronous_commit,
    )


async def worker_cycle(
    options: WorkerOptions, as_of: datetime, recorder: BatchRecorder
) -> CycleResult:
    """One real cycle of the worker, as `once` runs it (a fresh session, its budget)."""
    cycle = build_cycle(options)
    return await run_cycle(cycle, recorder, options.max_cycle_seconds, as_of)


async def session_open_ms(url: str, count: int) -> list[float]:
    """How long opening and closing a session takes (each worker cycle opens one)."""
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        async with BenchStore.connect(url):
            pass
        samples.append((time.perf_counter() - started) * 1000.0)
    return samples


@dataclass(frozen=True, slots=True)
class BareBatch:
    rows: int
    ms: float


async def bare_batch(store: BenchStore, as_of: datetime, batch_size: int) -> BareBatch:
    started = time.perf_counter()
    rows = await store.bare_batch(as_of, batch_size)
    return BareBatch(rows, (time.perf_counter() - started) * 1000.0)


async def worker_statement(store: BenchStore, as_of: datetime, batch_size: int) -> BareBatch:
    started = time.perf_counter()
    rows = await store.worker_statement(as_of, as_of, batch_size)
    return BareBatch(rows, (time.perf_counter() - started) * 1000.0)


async def bare_batches(
    store: BenchStore, as_of: datetime, batch_size: int, count: int
) -> list[BareBatch]:
    return [await bare_batch(store, as_of, batch_size) for _ in range(count)]
