"""What every section of a run is handed: the database, the clock, the plan, a progress line."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TextIO

from slot_expiration.bench.options import WorkerTuning
from slot_expiration.bench.plan import BenchPlan
from slot_expiration.bench.store import BenchStore
from slot_expiration.bench.timing import DRAIN_BUDGET_SECONDS, worker_options
from slot_expiration.cycle import BACKLOG_COUNT_CAP
from slot_expiration.options import WorkerOptions
from slot_expiration.store import Selection


class BenchError(RuntimeError):
    """A run could not measure what it set out to (a worker failed, the data ran out)."""


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

    def worker_options(self, max_batches: int) -> WorkerOptions:
        return worker_options(self.url, self.plan.batch_size, max_batches, self.worker)

    def drain_once_args(self, lock_timeout_seconds: float) -> tuple[str, ...]:
        """`once` draining the whole backlog due at AsOf in one cycle, its result as JSON."""
        args = (
            "once",
            "--json",
            "--as-of", self.as_of.isoformat(),
            "--max-batches-per-cycle", "0",
            "--lock-timeout-seconds", f"{lock_timeout_seconds:g}",
        )  # fmt: skip
        return (*args, *self.worker_flags())

    def worker_flags(self) -> tuple[str, ...]:
        """The flags every worker process of the run gets (none from the environment)."""
        worker = self.worker
        prepared = "--" + ("" if worker.prepared_statements else "no-") + "prepared-statements"
        return (
            "--database-url", self.url,
            "--batch-size", str(self.plan.batch_size),
            "--drain-batch-size", str(self.plan.batch_size),
            "--max-cycle-seconds", f"{DRAIN_BUDGET_SECONDS:g}",
            "--batch-pause-seconds", f"{worker.batch_pause_seconds:g}",
            prepared,
        )  # fmt: skip

    async def explain(self, occasion: str, statement: str) -> None:
        """Keep the executed plan of a named statement (its changes rolled back)."""
        selection = Selection(self.as_of, self.as_of, self.plan.batch_size)
        params = selection.parameters() | {"cap": BACKLOG_COUNT_CAP}
        self.plans[f"{occasion}: {statement}"] = await self.store.explain(statement, params)
