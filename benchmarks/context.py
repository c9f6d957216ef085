"""What every section of a run is handed: the database, the clock, the plan, a progress line."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TextIO

from benchmarks.options import WorkerTuning
from benchmarks.plan import BenchPlan
from benchmarks.store import BenchStore
from benchmarks.timing import DRAIN_BUDGET_SECONDS, worker_options
from slot_expiration.expiry import BACKLOG_COUNT_CAP
from slot_expiration.expiry.store import Selection
from slot_expiration.options import SynchronousCommit, WorkerOptions


class BenchError(RuntimeError):
    """A run could not measure what it set out to (a worker failed, the data ran out)."""


@dataclass(frozen=True, slots=True)
class WorkerPace:
    """The batch size and pause of a worker process's drain.

    `drain_batch_size_flag`: the worker has `--drain-batch-size` (the size of a drain's
    batches after the first): the drain is asked for with it, the first batch keeping
    the run's `--batch-size`; without it, `--batch-size` is the drain's size throughout.
    """

    batch_size: int
    pause_seconds: float = 0.0
    drain_batch_size_flag: bool = False
    synchronous_commit: SynchronousCommit | None = None  # None: the run's
    nice_ratio: float = 0.0  # --drain-nice-ratio
    max_slowdown: float = 0.0  # --drain-max-slowdown

    def size_flags(self, first_batch_size: int) -> tuple[str, ...]:
        if self.drain_batch_size_flag:
            return (
                "--batch-size",
                str(first_batch_size),
                "--drain-batch-size",
                str(self.batch_size),
            )
        return ("--batch-size", str(self.batch_size))


@dataclass(frozen=True, slots=True)
class Progress:
    """One line on stderr per step, with the time since the run began."""

    out: TextIO = sys.stderr
    started: float = field(default_factory=time.monotonic)
    clock: Callable[[], float] = time.monotonic

    def __call__(self, message: str) -> None:
        print(f"bench [{self.clock() - self.started:6.1f} s] {message}", file=self.out, flush=True)


@dataclass(frozen=True, slots=True)
class BenchContext:
    url: str  # reaches the benchmark's schema
    as_of: datetime  # the AsOf of every cycle; the table is loaded around it
    plan: BenchPlan
    store: BenchStore  # an autocommit session of the benchmark's own
    progress: Progress
    worker: WorkerTuning = field(default_factory=WorkerTuning)
    plans: dict[str, str] = field(default_factory=dict)  # EXPLAIN ANALYZE texts, by occasion
    # The worker has --drain-batch-size: its processes are given it (processes.py says how
    # the run knows), equal to --batch-size unless a section asks for another drain size.
    drain_batch_size_flag: bool = False

    def worker_options(
        self, max_batches: int, synchronous_commit: SynchronousCommit | None = None
    ) -> WorkerOptions:
        """An in-process worker's options: the run's, with this commit setting if given."""
        tuning = self.worker
        if synchronous_commit is not None:
            tuning = replace(tuning, synchronous_commit=synchronous_commit)
        return worker_options(self.url, self.plan.batch_size, max_batches, tuning)

    def drain_once_args(
        self, lock_timeout_seconds: float, pace: WorkerPace | None = None
    ) -> tuple[str, ...]:
        """`once` draining the whole backlog due at AsOf in one cycle, its result as JSON."""
        args = (
            "once",
            "--json",
            "--as-of",
            self.as_of.isoformat(),
            "--max-batches-per-cycle",
            "0",
            "--lock-timeout-seconds",
            f"{lock_timeout_seconds:g}",
        )
        return (*args, *self.worker_flags(pace))

    def worker_flags(self, pace: WorkerPace | None = None) -> tuple[str, ...]:
        """The flags every worker process of the run gets (none from the environment): the
        run's batch size and pause, or those of `pace`."""
        worker = self.worker
        pace = pace or WorkerPace(
            self.plan.batch_size, worker.batch_pause_seconds, self.drain_batch_size_flag
        )
        prepared = "--" + ("" if worker.prepared_statements else "no-") + "prepared-statements"
        commit = pace.synchronous_commit or worker.synchronous_commit
        return (
            "--database-url",
            self.url,
            *pace.size_flags(self.plan.batch_size),
            "--max-cycle-seconds",
            f"{DRAIN_BUDGET_SECONDS:g}",
            "--batch-pause-seconds",
            f"{pace.pause_seconds:g}",
            prepared,
            "--synchronous-commit",
            commit.value,
            "--drain-nice-ratio",
            f"{pace.nice_ratio:g}",
            "--drain-max-slowdown",
            f"{pace.max_slowdown:g}",
        )

    async def explain(self, occasion: str, statement: str) -> None:
        """Keep the executed plan of a named statement (its changes rolled back)."""
        selection = Selection(self.as_of, self.as_of, self.plan.batch_size)
        params = selection.parameters() | {"cap": BACKLOG_COUNT_CAP}
        self.plans[f"{occasion}: {statement}"] = await self.store.explain(statement, params)
