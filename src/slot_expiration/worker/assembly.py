"""Wires options, store, cycle, loop and hooks into the commands' entry points."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Final
from uuid import UUID

import structlog

from slot_expiration.cycle import (
    BatchResult,
    CycleLimits,
    CycleResult,
    CycleTally,
    ExpiryCycle,
    FailureKind,
    PoisonBackoff,
    StopReason,
    StoreFactory,
    failure_kind,
    misconfigured,
)
from slot_expiration.loop import (
    CycleBudgetExceededError,
    IntervalTicker,
    LoopStats,
    LoopTiming,
    PollingLoop,
    StopSignal,
    Ticker,
    cancel_on_signals,
    observed_cycle,
    stop_on_signals,
)
from slot_expiration.options import CycleOptions, WorkerOptions
from slot_expiration.store import SchemaMissingError, SlotStore, TransactionLimits
from slot_expiration.store.errors import SchemaFix
from slot_expiration.store.housekeeping import Housekeeping, record_cycle
from slot_expiration.store.schema_version import (
    HEAD_REVISION,
    SchemaPosition,
    ahead_of_release,
    position_of,
)
from slot_expiration.telemetry import CycleHooks, FanOutHooks, LogHooks, NoHooks
from slot_expiration.telemetry.history import HistoryHooks, default_instance
from slot_expiration.telemetry.logs import Event
from slot_expiration.telemetry.traces import traced_hooks, tracing, tracing_on
from slot_expiration.worker.observability import Observability, announce


def transaction_limits(options: CycleOptions) -> TransactionLimits:
    budget_ms = options.statement_timeout_ms
    return TransactionLimits(
        statement_timeout_ms=budget_ms,
        lock_timeout_ms=options.lock_timeout_ms,
        idle_in_transaction_timeout_ms=budget_ms,
    )


def cycle_limits(options: CycleOptions, *, collect_slots: bool = True) -> CycleLimits:
    return CycleLimits(
        batch_size=options.batch_size,
        drain_batch_size=options.drain_batch_size,
        max_batches=options.max_batches_per_cycle,
        batch_pause_seconds=options.batch_pause_seconds,
        backoff=PoisonBackoff(options.poison_backoff_seconds, options.poison_backoff_max_seconds),
        max_clock_skew_seconds=options.max_clock_skew_seconds,
        collect_slots=collect_slots,
    )


def store_factory(options: CycleOptions) -> StoreFactory:
    url, limits = options.require_database_url(), transaction_limits(options)
    return lambda: SlotStore.connect(url, limits, prepare=options.prepared_statements)


def build_cycle(options: CycleOptions, *, collect_slots: bool = True) -> ExpiryCycle:
    """The cycle; `collect_slots` when a trace records each batch's slots and tenants."""
    return ExpiryCycle(store_factory(options), cycle_limits(options, collect_slots=collect_slots))


def history_hooks(options: CycleOptions) -> HistoryHooks:
    """The sink that writes each cycle's row in the history (and purges past the
    retention), as this instance."""
    housekeeping = Housekeeping(
        options.require_database_url(), timedelta(days=options.history_retention_days)
    )
    return HistoryHooks(
        lambda record: record_cycle(housekeeping, record),
        options.instance_id or default_instance(),
    )


async def check_ready(options: CycleOptions) -> None:
    """Fail fast on a wrong URL, a refused login, a missing schema or a missing grant:
    MisconfiguredStoreError names every problem and the command that fixes it.

    A schema ahead of this release (a newer one migrated it) is said, then worked
    on: migrations only add. One behind it is said too (schema.behind); `run`
    waits for `migrate` on it (wait_for_migrate), `once` leaves it to the cycle.
    """
    async with store_factory(options)() as store, store.transaction():
        preflight = await store.preflight()
        revision = None if preflight.problems else await store.schema_revision()
    if preflight.problems:
        raise misconfigured(preflight)
    log = structlog.get_logger("slot_expiration")
    position = position_of(revision)
    if revision is not None and position is SchemaPosition.AHEAD:
        log.info(
            Event.SCHEMA_AHEAD,
            schema_revision=revision,
            latest_revision=HEAD_REVISION,
            detail=f"{ahead_of_release(revision)}: migrations only add, so this release runs on it",
        )
    elif position is SchemaPosition.BEHIND:
        log.warning(
            Event.SCHEMA_BEHIND,
            schema_revision=revision,
            latest_revision=HEAD_REVISION,
            detail=f"the schema is at {revision}, this release's newest is {HEAD_REVISION}: "
            "not ready until `slot-expiration migrate` has run",
        )


async def wait_for_migrate(options: CycleOptions) -> None:
    """`run`'s start check: like check_ready, but a schema that only `migrate` can bring
    to this release (not yet migrated, behind, or missing a table of the worker's own) is
    no reason to exit. The worker stays up and unready (/readyz: "run migrate"); each
    tick's cycle checks again and fails as misconfigured until the schema is there,
    then the worker is ready by itself. A rolling deploy applied in one go starts the
    new pods before the migration Job has run: they wait for it instead of crash-looping.
    Anything else a person must fix still fails the start."""
    try:
        await check_ready(options)
    except SchemaMissingError as exc:
        if exc.fix is not SchemaFix.MIGRATE:
            raise
        structlog.get_logger("slot_expiration").warning(
            Event.SCHEMA_BEHIND,
            schema_revision=None,
            latest_revision=HEAD_REVISION,
            detail=f"{exc}: not ready until then, checked at every tick",
        )


class CycleCutShortError(Exception):
    """A cycle stopped before it finished: `failure` is why, `partial` adds up what its
    committed batches did (a drain may have committed many before it stopped), and
    `in_flight` whether a batch was running then (it rolled back)."""

    def __init__(self, failure: BaseException, partial: CycleResult, *, in_flight: bool) -> None:
        super().__init__(str(failure) or type(failure).__name__)
        self.failure = failure
        self.partial = partial
        self.in_flight = in_flight

    @property
    def interrupted(self) -> bool:
        return isinstance(self.failure, asyncio.CancelledError)


# The stop_reason of a cycle cut short, by why it stopped.
CUT_SHORT: Final = {
    FailureKind.TRANSIENT: StopReason.FAILED,
    FailureKind.STOPPED: StopReason.INTERRUPTED,
    FailureKind.BUDGET_EXCEEDED: StopReason.BUDGET_EXCEEDED,
    FailureKind.MISCONFIGURED: StopReason.MISCONFIGURED,
    FailureKind.CLOCK_SKEW: StopReason.CLOCK_SKEW,
}


class _Committed(NoHooks):
    """Adds up the batches a cycle committed, as they commit, and knows whether one
    is running."""

    def __init__(self) -> None:
        self.tally: CycleTally | None = None
        self._started_batches = 0
        self._clock_skew_seconds: float | None = None

    def cycle_started(self, run_id: UUID, as_of: datetime) -> None:
        self.tally = CycleTally(run_id, as_of)

    def clock_compared(self, run_id: UUID, skew_seconds: float) -> None:
        self._clock_skew_seconds = skew_seconds

    def batch_started(self, run_id: UUID, number: int) -> None:
        self._started_batches = number

    def batch_completed(self, run_id: UUID, batch: BatchResult) -> None:
        if self.tally is not None:
            self.tally.add(batch)

    def cut_short(self, failure: BaseException, started: float) -> CycleCutShortError | None:
        """What a cycle that started and then failed did (None: it never started)."""
        if self.tally is None:
            return None
        budget = isinstance(failure, CycleBudgetExceededError)
        kind = (
            FailureKind.STOPPED
            if isinstance(failure, asyncio.CancelledError)
            else failure_kind(failure, budget_exceeded=budget)
        )
        elapsed_ms = (time.monotonic() - started) * 1000.0
        partial = self.tally.result(
            elapsed_ms, CUT_SHORT[kind], backlog=None, clock_skew_seconds=self._clock_skew_seconds
        )
        in_flight = self._started_batches > self.tally.batches
        return CycleCutShortError(failure, partial, in_flight=in_flight)


async def run_once(
    options: CycleOptions,
    as_of: datetime,
    hooks: CycleHooks | None = None,
    *,
    as_of_is_now: bool = False,
) -> CycleResult:
    """The `once` command: one cycle under the budget, logged like the loop's cycles.

    Cut short (a signal, the budget, an error after some batches of a drain
    committed), it raises CycleCutShortError with what did commit.
    """
    with cancel_on_signals(), tracing() as tracer:
        await check_ready(options)
        committed, history = _Committed(), history_hooks(options)
        sinks = [hooks or LogHooks(max_clock_skew_seconds=options.max_clock_skew_seconds)]
        traced = traced_hooks(FanOutHooks([*sinks, committed, history]), tracer)
        started = time.monotonic()
        try:
            cycle = build_cycle(options, collect_slots=tracing_on(tracer))
            return await observed_cycle(
                cycle, traced, options.max_cycle_seconds, as_of, as_of_is_now=as_of_is_now
            )
        except (asyncio.CancelledError, Exception) as failure:
            if (cut := committed.cut_short(failure, started)) is not None:
                raise cut from None
            raise
        finally:
            await history.drain()


def build_loop(
    options: WorkerOptions,
    hooks: CycleHooks,
    ticker: Ticker | None = None,
    *,
    collect_slots: bool = True,
) -> PollingLoop:
    timing = LoopTiming(
        max_cycle_seconds=options.max_cycle_seconds,
        shutdown_grace_seconds=options.shutdown_grace_seconds,
    )
    return PollingLoop(
        build_cycle(options, collect_slots=collect_slots),
        ticker or IntervalTicker(options.interval_seconds),
        hooks,
        timing,
    )


async def run_worker(
    options: WorkerOptions,
    extra_hooks: Sequence[CycleHooks] = (),
    stop: StopSignal | None = None,
    on_serving: Callable[[str], None] | None = None,
) -> LoopStats:
    """The `run` command: poll until SIGTERM/SIGINT (or `stop`), then stop gracefully.

    Its endpoint (/metrics, /healthz, /readyz) listens before anything else, so a
    port already taken fails the start; `on_serving` is told the endpoint's URL.
    """
    stop = stop or StopSignal()
    with tracing() as tracer, stop_on_signals(stop):
        observability = Observability.for_worker(options, tracer)
        logs = LogHooks(max_clock_skew_seconds=options.max_clock_skew_seconds)
        history = history_hooks(options)
        hooks = observability.hooks([logs, history, *extra_hooks])
        # Listening first: a port already taken fails the start before anything else.
        async with observability.endpoint(options) as url:
            await wait_for_migrate(options)
            loop = build_loop(options, hooks, collect_slots=tracing_on(tracer))
            hooks.loop_started(options.interval_seconds, options.batch_size)
            announce(url, on_serving)
            try:
                return await loop.run(stop)
            finally:
                # The last cycle's row (an interrupted one, say) is written before exit.
                await history.drain()
