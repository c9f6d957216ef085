"""Wires options, store, cycle, loop and hooks into the commands' entry points."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from slot_expiration.cycle import (
    CycleLimits,
    CycleResult,
    ExpiryCycle,
    PoisonBackoff,
    StoreFactory,
)
from slot_expiration.loop import (
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
from slot_expiration.options import WorkerOptions
from slot_expiration.store import SchemaMissingError, SessionLimits, SlotStore
from slot_expiration.telemetry import CycleHooks, LogHooks
from slot_expiration.telemetry.traces import TraceHooks, tracing
from slot_expiration.worker.observability import Observability, announce


def session_limits(options: WorkerOptions) -> SessionLimits:
    budget_ms = options.statement_timeout_ms
    return SessionLimits(
        statement_timeout_ms=budget_ms,
        idle_in_transaction_timeout_ms=budget_ms,
        lock_timeout_ms=options.lock_timeout_ms,
        prepared_statements=options.prepared_statements,
    )


def cycle_limits(options: WorkerOptions) -> CycleLimits:
    return CycleLimits(
        batch_size=options.batch_size,
        max_batches=options.max_batches_per_cycle,
        batch_pause_seconds=options.batch_pause_seconds,
        backoff=PoisonBackoff(options.poison_backoff_seconds, options.poison_backoff_max_seconds),
    )


def store_factory(options: WorkerOptions) -> StoreFactory:
    url, limits = options.require_database_url(), session_limits(options)
    return lambda: SlotStore.connect(url, limits)


def build_cycle(options: WorkerOptions) -> ExpiryCycle:
    return ExpiryCycle(store_factory(options), cycle_limits(options))


async def check_ready(options: WorkerOptions) -> None:
    """Fail fast on a wrong URL, a refused login or a missing schema."""
    async with store_factory(options)() as store:
        if not await store.schema_ready():
            raise SchemaMissingError


async def run_once(
    options: WorkerOptions, as_of: datetime, hooks: CycleHooks | None = None
) -> CycleResult:
    """The `once` command: one cycle under the budget, logged like the loop's cycles."""
    with cancel_on_signals(), tracing() as tracer:
        await check_ready(options)
        traced = TraceHooks(hooks or LogHooks(), tracer)
        return await observed_cycle(build_cycle(options), traced, options.max_cycle_seconds, as_of)


def build_loop(
    options: WorkerOptions, hooks: CycleHooks, ticker: Ticker | None = None
) -> PollingLoop:
    timing = LoopTiming(
        max_cycle_seconds=options.max_cycle_seconds,
        shutdown_grace_seconds=options.shutdown_grace_seconds,
    )
    return PollingLoop(
        build_cycle(options),
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
        hooks = observability.hooks([LogHooks(), *extra_hooks])
        # Listening first: a port already taken fails the start before anything else.
        async with observability.endpoint(options) as url:
            await check_ready(options)
            loop = build_loop(options, hooks)
            hooks.loop_started(options.interval_seconds, options.batch_size)
            announce(url, on_serving)
            return await loop.run(stop)
