"""Wires options, the expiry cycle, the loop and the sinks into the commands' entry points."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

import structlog

from slot_expiration.db import SchemaMissingError, TransactionLimits, TransientStoreError
from slot_expiration.db.errors import Remedy
from slot_expiration.expiry import (
    CycleEnded,
    CycleFailed,
    CycleLimits,
    CycleResult,
    ExpiryCycle,
    StoreFactory,
    run_cycle,
)
from slot_expiration.expiry.store import CycleStore
from slot_expiration.history.housekeeping import Housekeeping, record_cycle
from slot_expiration.history.sink import HistorySink, Written, default_instance
from slot_expiration.loop import (
    Event,
    IntervalTicker,
    LoopStarted,
    LoopStats,
    LoopTiming,
    PollingLoop,
    Sink,
    StopSignal,
    Ticker,
    cancel_on_signals,
    fan_out,
    stop_on_signals,
)
from slot_expiration.options import CycleOptions, WorkerOptions
from slot_expiration.quarantine import PoisonBackoff
from slot_expiration.schema.version import (
    HEAD_REVISION,
    SchemaPosition,
    ahead_of_release,
    position_of,
)
from slot_expiration.telemetry import LogSink
from slot_expiration.telemetry.logs import LogEvent
from slot_expiration.telemetry.traces import traced, tracing
from slot_expiration.worker.observability import Observability, announce


def transaction_limits(options: CycleOptions) -> TransactionLimits:
    budget_ms = options.statement_timeout_ms
    return TransactionLimits(
        statement_timeout_ms=budget_ms,
        lock_timeout_ms=options.lock_timeout_ms,
        idle_in_transaction_timeout_ms=budget_ms,
        synchronous_commit=options.synchronous_commit.value,
    )


def cycle_limits(options: CycleOptions) -> CycleLimits:
    return CycleLimits(
        batch_size=options.batch_size,
        drain_batch_size=options.drain_batch_size,
        max_batches=options.max_batches_per_cycle,
        batch_pause_seconds=options.batch_pause_seconds,
        backoff=PoisonBackoff(options.poison_backoff_seconds, options.poison_backoff_max_seconds),
        max_clock_skew_seconds=options.max_clock_skew_seconds,
        quarantine_retention=timedelta(days=options.history_retention_days),
        max_replica_lag_seconds=options.max_replica_lag_seconds,
        drain_nice_ratio=options.drain_nice_ratio,
        drain_max_slowdown=options.drain_max_slowdown,
    )


def store_factory(options: CycleOptions) -> StoreFactory:
    url, limits = options.require_database_url(), transaction_limits(options)
    return lambda: CycleStore.connect(url, limits, prepare=options.prepared_statements)


def build_cycle(options: CycleOptions) -> ExpiryCycle:
    return ExpiryCycle(store_factory(options), cycle_limits(options))


def history_sink(options: CycleOptions, on_written: Written | None = None) -> HistorySink:
    """The sink that writes each cycle's row in the history (and purges past the
    retention), as this instance; `on_written` is told of each row written or lost."""
    housekeeping = Housekeeping(
        options.require_database_url(), timedelta(days=options.history_retention_days)
    )
    return HistorySink(
        lambda record: record_cycle(housekeeping, record),
        options.instance_id or default_instance(),
        on_written=on_written,
    )


async def check_ready(options: CycleOptions) -> None:
    """Fail fast on a wrong URL, a refused login, a missing schema or a missing grant:
    MisconfiguredStoreError names every problem and the command that fixes it.

    A schema ahead of this release (a newer one migrated it) is said, then worked
    on: migrations only add. One behind it is said too (schema.behind); `run`
    waits for `migrate` on it (wait_for_migrate), `once` leaves it to the cycle.
    """
    async with store_factory(options)() as store, store.transaction():
        await store.verify_slot_table()
        preflight = await store.preflight()
        revision = None if preflight.lacks.problems else await store.schema_revision()
    if preflight.lacks.problems:
        raise preflight.lacks.error()
    log = structlog.get_logger("slot_expiration")
    position = position_of(revision)
    if revision is not None and position is SchemaPosition.AHEAD:
        log.info(
            LogEvent.SCHEMA_AHEAD,
            schema_revision=revision,
            latest_revision=HEAD_REVISION,
            detail=f"{ahead_of_release(revision)}: migrations only add, so this release runs on it",
        )
    elif position is SchemaPosition.BEHIND:
        log.warning(
            LogEvent.SCHEMA_BEHIND,
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
        if exc.remedy is not Remedy.MIGRATE:
            raise
        structlog.get_logger("slot_expiration").warning(
            LogEvent.SCHEMA_BEHIND,
            schema_revision=None,
            latest_revision=HEAD_REVISION,
            detail=f"{exc}: not ready until then, checked at every tick",
        )
    except TransientStoreError as exc:
        # The database answered, but the check waited too long (a migration's table lock,
        # say: the contract's checks read the table's definition): time cures it, as it
        # does a cycle's. The worker starts; each tick's cycle checks again.
        if exc.connecting:
            raise
        structlog.get_logger("slot_expiration").warning(
            LogEvent.START_CHECK_DEFERRED,
            sqlstate=exc.sqlstate,
            detail=f"{exc}: the start check is left to each tick's cycle",
        )


async def run_once(
    options: CycleOptions,
    as_of: datetime,
    sink: Sink | None = None,
    *,
    as_of_is_now: bool = False,
    extra_sinks: Sequence[Sink] = (),
) -> CycleResult:
    """The `once` command: one cycle under the budget, logged like the loop's cycles (and
    told to `extra_sinks`: a terminal's progress bar, say).

    A cycle that does not complete (an error, the budget, a signal) raises
    CycleFailed with what its committed batches did.
    """
    ended: list[CycleEnded] = []

    def remember(event: Event) -> None:
        if isinstance(event, CycleEnded):
            ended.append(event)

    with cancel_on_signals(), tracing() as tracer:
        await check_ready(options)
        history = history_sink(options)
        logs = sink or LogSink(max_clock_skew_seconds=options.max_clock_skew_seconds)
        emit = fan_out(traced(fan_out(logs, history, remember, *extra_sinks), tracer))
        try:
            cycle = build_cycle(options)
            return await run_cycle(
                cycle, emit, options.max_cycle_seconds, as_of, as_of_is_now=as_of_is_now
            )
        except asyncio.CancelledError:
            # The outermost task of `once` ends here: the interrupted cycle is its report.
            if ended:
                raise CycleFailed(ended[-1]) from None
            raise
        finally:
            await history.drain()


def build_loop(
    options: WorkerOptions,
    emit: Sink,
    ticker: Ticker | None = None,
) -> PollingLoop:
    timing = LoopTiming(
        max_cycle_seconds=options.max_cycle_seconds,
        shutdown_grace_seconds=options.shutdown_grace_seconds,
    )
    return PollingLoop(
        build_cycle(options),
        ticker or IntervalTicker(options.interval_seconds),
        emit,
        timing,
    )


async def run_worker(
    options: WorkerOptions,
    extra_sinks: Sequence[Sink] = (),
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
        logs = LogSink(max_clock_skew_seconds=options.max_clock_skew_seconds)
        # A row the history could not take is served at /readyz: nothing else tells of it.
        history = history_sink(options, observability.readiness.history_written)
        emit = observability.sink([logs, history, *extra_sinks])
        # Listening first: a port already taken fails the start before anything else.
        async with observability.endpoint(options) as url:
            await wait_for_migrate(options)
            loop = build_loop(options, emit)
            emit(LoopStarted(options.interval_seconds, options.batch_size))
            announce(url, on_serving)
            try:
                return await loop.run(stop)
            finally:
                # The last cycle's row (an interrupted one, say) is written before exit.
                await history.drain()
