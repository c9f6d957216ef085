"""The status report: gathered from the database in one read-only session.

What `status --check` and the page judge (Health) is read by one function, read_health,
for both: the same parts, on the database's clock, so the two can only agree; and, when
told where the replicas are, what each one's /readyz says (status/replicas.py), asked
beside the database."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Final, TypeVar

from slot_expiration.db import ApplicationName, SchemaMissingError, StoreError
from slot_expiration.domain import CycleOutcome, SlotStatus
from slot_expiration.expiry import BACKLOG_COUNT_CAP
from slot_expiration.expiry.backlog_trend import (
    TREND_WINDOW,
    BacklogSample,
    backlog_change,
    trend_window,
)
from slot_expiration.expiry.drain import Pace
from slot_expiration.history.store import BacklogRow, CycleRecord, OutcomeCount
from slot_expiration.options import CycleOptions
from slot_expiration.options.listen_address import ListenAddress
from slot_expiration.options.settings import DEFAULT_INTERVAL_SECONDS
from slot_expiration.pause import PAUSES, Pause, PauseStore
from slot_expiration.quarantine import QuarantineListing, QuarantineStore
from slot_expiration.schema.location import slot_table_elsewhere
from slot_expiration.schema.version import HEAD_REVISION, SchemaPosition, position_of
from slot_expiration.status.replicas import ReplicaAnswer, ask_replicas
from slot_expiration.status.store import (
    SELECTION_INDEX,
    OverdueSlot,
    SchemaState,
    SelectionIndex,
    StatusStore,
    WorkerSession,
)

# The selection's plan is shown for the worker's default batch: `status` and `ui` read
# no worker option (each command reads only its own).
EXPLAINED_BATCH_SIZE: Final[int] = CycleOptions.model_fields["batch_size"].default
# How many quarantined slots the report lists (it always gives the total).
FAILED_SHOWN: Final = 20
# "Cycles in the last hour".
RECENT_WINDOW: Final = timedelta(hours=1)
# An instance still counts while its latest cycle ended at most two intervals and this
# much (a cycle's budget, a late tick) before the deployment's latest: one that has had
# no cycle since (replaced, or an ad-hoc `once`) has gone, and what it last said with it.
LIVE_SLACK: Final = timedelta(seconds=60)
LIVE_INTERVALS: Final = 2
# The backlog's count itself over the last half hour, as SlotExpirationBacklogHigh reads it
# (`offset 30m`): below the count of 30 minutes before, it is coming down, whatever trend a
# run of successes broken by failures still holds.
COUNT_FALL_WINDOW: Final = TREND_WINDOW
# A drain's pace is read over the cycles that ended in the last 10 minutes (or three
# intervals, when longer): recent enough to be the drain's pace now, long enough to hold
# the intervals between cycles.
PACE_WINDOW: Final = timedelta(minutes=10)
PACE_INTERVALS: Final = 3
T = TypeVar("T")


def pace_window(interval_seconds: float) -> timedelta:
    return max(PACE_WINDOW, PACE_INTERVALS * timedelta(seconds=interval_seconds))


# The trend window when the worker's interval is not told (`status` without --check).
DEFAULT_TREND_WINDOW: Final = trend_window(DEFAULT_INTERVAL_SECONDS)


def live_span(interval_seconds: float) -> timedelta:
    return LIVE_INTERVALS * timedelta(seconds=interval_seconds) + LIVE_SLACK


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A part of the report the database refused to give (a role without the
    privilege, a statement timeout): said in its place; the rest still prints."""

    reason: str
    sqlstate: str | None

    def __str__(self) -> str:
        code = f" (SQLSTATE {self.sqlstate})" if self.sqlstate else ""
        return f"cannot read: {self.reason}{code}"

    def as_json(self) -> dict[str, Any]:
        return {"unreadable": self.reason, "sqlstate": self.sqlstate}


Quarantine = QuarantineListing


@dataclass(frozen=True, slots=True)
class CycleSummary:
    """What the history says: the deployment's latest cycle and the latest cycle of each
    instance still there (`live`), the last success and failure of any instance, the
    cycles of the last hour per instance and outcome, and the backlog's change over the
    trend window as the alert reads it (None: no instance has a trend yet)."""

    last_success: CycleRecord | None
    last_failure: CycleRecord | None
    recent: tuple[OutcomeCount, ...]
    latest: CycleRecord | None = None
    live: tuple[CycleRecord, ...] = ()
    backlog_change: int | None = None
    trend_window: timedelta = DEFAULT_TREND_WINDOW
    # What the cycles that ended in the last `pace_window` expired, and over how long (None:
    # no such cycle).
    pace: Pace | None = None
    pace_window: timedelta = PACE_WINDOW
    # How much of that time the drains waited on their throttle, and mostly why.
    throttle: Throttle | None = None

    def recent_total(self) -> int:
        return sum(count.cycles for count in self.recent)

    def recent_by_outcome(self) -> dict[CycleOutcome, int]:
        totals: dict[CycleOutcome, int] = {}
        for count in self.recent:
            totals[count.outcome] = totals.get(count.outcome, 0) + count.cycles
        return totals

    def recent_by_instance(self) -> dict[str, dict[CycleOutcome, int]]:
        instances: dict[str, dict[CycleOutcome, int]] = {}
        for count in self.recent:
            instances.setdefault(count.instance, {})[count.outcome] = count.cycles
        return instances

    def needing_a_person(self) -> tuple[CycleRecord, ...]:
        """Instances still there whose latest cycle failed on what only a person can fix."""
        return tuple(c for c in self.live if c.outcome.needs_a_person)


@dataclass(frozen=True, slots=True)
class Health:
    """What `status --check` and the page judge, at `as_of` on the database's clock."""

    as_of: datetime
    latest_revision: str | None
    schema: SchemaState | Unreadable
    cycles: CycleSummary | Unreadable
    backlog: int | Unreadable
    quarantine: Quarantine | Unreadable
    # Each replica's /readyz, when `--replicas` names them (none asked: empty).
    replicas: tuple[ReplicaAnswer, ...] = ()
    # The pause in force (None: none), as every replica reads it at each tick.
    pause: Pause | Unreadable | None = None

    @property
    def backlog_capped(self) -> bool:
        """The backlog is at least `backlog`: the count stopped at the cap."""
        return isinstance(self.backlog, int) and self.backlog >= BACKLOG_COUNT_CAP

    def drain(self) -> Drain | Unreadable | None:
        """The drain in progress: slots are due and the recent cycles expired some. None
        when there is none (nothing due, or nothing expired lately)."""
        if isinstance(self.cycles, Unreadable):
            return self.cycles
        if isinstance(self.backlog, Unreadable):
            return self.backlog
        cycles = self.cycles
        if self.backlog == 0 or cycles.pace is None or cycles.pace.rows == 0:
            return None
        coming_down = cycles.backlog_change is None or cycles.backlog_change < 0
        return Drain(
            cycles.pace,
            cycles.pace_window,
            self.backlog,
            self.backlog_capped,
            coming_down,
            cycles.throttle,
        )


@dataclass(frozen=True, slots=True)
class Drain:
    """A drain in progress as `status` and the page tell it: the pace of the cycles of the
    last `window` (wall-clock time, the intervals between cycles included), the backlog
    counted now (`capped`: at least that), and when it is gone at that pace. The pace counts
    what was expired, not what fell due meanwhile: while the backlog's trend shows it not
    coming down (`coming_down` False: slots fall due as fast as they go), there is no ETA."""

    pace: Pace
    window: timedelta
    left: int
    capped: bool
    coming_down: bool
    throttle: Throttle | None = None

    @property
    def rows_per_second(self) -> float | None:
        return self.pace.rows_per_second

    @property
    def eta_seconds(self) -> float | None:
        return self.pace.eta_seconds(self.left) if self.coming_down else None


@dataclass(frozen=True, slots=True)
class StatusReport:
    health: Health
    counts: dict[SlotStatus, int] | Unreadable
    oldest_overdue: OverdueSlot | Unreadable | None
    worker_sessions: tuple[WorkerSession, ...] | Unreadable
    index: SelectionIndex | Unreadable

    @property
    def as_of(self) -> datetime:
        return self.health.as_of

    @property
    def latest_revision(self) -> str | None:
        return self.health.latest_revision

    @property
    def schema(self) -> SchemaState | Unreadable:
        return self.health.schema

    @property
    def cycles(self) -> CycleSummary | Unreadable:
        return self.health.cycles

    @property
    def backlog(self) -> int | Unreadable:
        return self.health.backlog

    @property
    def quarantine(self) -> Quarantine | Unreadable:
        return self.health.quarantine

    @property
    def backlog_capped(self) -> bool:
        return self.health.backlog_capped

    def overdue_seconds(self) -> float | None:
        if not isinstance(self.oldest_overdue, OverdueSlot):
            return None
        return (self.as_of - self.oldest_overdue.start_at).total_seconds()

    def as_json(self) -> dict[str, Any]:
        return {
            "as_of": self.as_of.isoformat(),
            "cycles": _part_json(self.cycles, lambda c: _cycles_json(c, self.as_of)),
            "schema": _part_json(self.schema, lambda s: _schema_json(s, self.latest_revision)),
            "counts": _part_json(self.counts, lambda c: {k.value: n for k, n in c.items()}),
            "backlog": _part_json(
                self.backlog,
                lambda n: {"count": n, "capped": self.backlog_capped, "cap": BACKLOG_COUNT_CAP},
            ),
            "drain": _drain_json(self.health.drain()),
            "oldest_overdue": _part_json(
                self.oldest_overdue, lambda slot: _overdue_json(slot, self.overdue_seconds())
            ),
            "worker_sessions": _part_json(self.worker_sessions, _sessions_json),
            "failed_slots": _part_json(
                self.quarantine,
                lambda q: {
                    "total": q.total,
                    "parked": q.parked,
                    "waiting_since": _iso(q.waiting_since),
                    "shown": [f.as_json() for f in q.latest],
                },
            ),
            "index": _part_json(self.index, _index_json),
            "pause": _pause_json(self.health.pause, self.as_of),
        }


async def collect_status(
    database_url: str,
    batch_size: int,
    interval_seconds: float = DEFAULT_INTERVAL_SECONDS,
    failed_shown: int = FAILED_SHOWN,
) -> StatusReport:
    """The report, part by part in one snapshot; a part the role may not read says why.

    Raises SchemaMissingError when there is no slot table at all: nothing to report.
    """
    async with StatusStore.connect(database_url, ApplicationName.STATUS) as store:
        health = await read_health(store, interval_seconds, failed_shown)
        if isinstance(health.schema, SchemaState) and health.schema.slot_table_missing:
            raise SchemaMissingError("table availability_slots does not exist")
        as_of = health.as_of
        return StatusReport(
            health=health,
            counts=await read_part(store, store.counts_by_status),
            oldest_overdue=await read_part(store, lambda: store.oldest_overdue(as_of)),
            worker_sessions=await read_part(store, store.worker_sessions),
            index=await read_part(store, lambda: store.selection_index(as_of, batch_size)),
        )


async def collect_health(
    database_url: str, interval_seconds: float, replicas: Sequence[ListenAddress] = ()
) -> Health:
    """What `status --check` judges, and nothing more (no count of the whole slot table):
    the parts the page judges, read the same way, and the `replicas`' /readyz."""

    async def read() -> Health:
        async with StatusStore.connect(database_url, ApplicationName.STATUS) as store:
            health = await read_health(store, interval_seconds, FAILED_SHOWN)
        await refuse_a_slot_table_elsewhere(health, database_url)
        return health

    health, answers = await asking_replicas(replicas, read)
    return replace(health, replicas=answers)


async def refuse_a_slot_table_elsewhere(health: Health, database_url: str) -> None:
    """A search_path that misses the calendar's availability_slots, which another schema
    holds, is not a database never migrated (`migrate` would refuse it): raised as the
    SlotTableElsewhereError that says how to point at it, so nothing is judged."""
    if isinstance(health.schema, SchemaState) and health.schema.slot_table_missing:
        elsewhere = await asyncio.to_thread(slot_table_elsewhere, database_url)
        if elsewhere is not None:
            raise elsewhere


async def asking_replicas(
    replicas: Sequence[ListenAddress], read: Callable[[], Awaitable[T]]
) -> tuple[T, tuple[ReplicaAnswer, ...]]:
    """`read()`, while each of the `replicas` is asked for its /readyz."""
    asked = asyncio.create_task(ask_replicas(replicas))
    try:
        done = await read()
    except BaseException:
        asked.cancel()
        raise
    return done, await asked


async def read_health(store: StatusStore, interval_seconds: float, shown: int) -> Health:
    """What `status --check` and the page judge, in the store's snapshot, at the database's
    now; the quarantine's `shown` latest entries with it. A database never migrated (or
    without a slot table) is judged too: its schema says so, and what can be read is."""
    as_of = await store.database_clock()
    schema = await read_part(store, store.schema_state)

    async def quarantine() -> Quarantine:
        return await QuarantineStore(store.session).listing(shown)

    return Health(
        as_of=as_of,
        latest_revision=HEAD_REVISION,
        schema=schema,
        cycles=await read_part(store, lambda: summarize_cycles(store, as_of, interval_seconds)),
        backlog=await read_part(store, lambda: store.backlog(as_of, BACKLOG_COUNT_CAP)),
        quarantine=await read_part(store, quarantine),
        pause=await _read_pause(store, schema),
    )


async def _read_pause(
    store: StatusStore, schema: SchemaState | Unreadable
) -> Pause | Unreadable | None:
    """The pause in force; none where its table is missing (the schema's finding says to
    run migrate: a release before this one's schema, say)."""
    if isinstance(schema, SchemaState) and PAUSES in schema.missing_tables:
        return None
    return await read_part(store, PauseStore(store.session).current)


async def summarize_cycles(
    store: StatusStore, as_of: datetime, interval_seconds: float
) -> CycleSummary:
    """The history's summary: the deployment's latest cycle and its instances still there
    (their latest cycles within live_span of it), and the backlog's trend as the alert reads
    it, each instance's from its own consecutive successful cycles (the same rule,
    cycle/backlog_trend.py), the least of them: the backlog comes down if any instance sees
    it come down, or if its count fell over the last half hour. Every read is a probe or a
    short range of the history's indexes."""
    history = store.history
    window = trend_window(interval_seconds)
    latest = await history.latest()
    live: tuple[CycleRecord, ...] = ()
    change = None
    pace, throttle = None, None
    paced_over = pace_window(interval_seconds)
    if latest is not None:
        live = await history.latest_per_instance(latest.ended_at - live_span(interval_seconds))
        # Twice the window: a run reaches back a window from its latest cycle, and one more.
        samples = await history.backlog_samples(latest.ended_at - 2 * window)
        change = deployment_backlog_change(samples, {c.instance for c in live}, window)
        fall = backlog_fall(samples, as_of)
        if fall is not None and (change is None or fall < change):
            change = fall
        pace = recent_pace(samples, as_of - paced_over)
        throttle = recent_throttle(samples, as_of - paced_over, pace)
    return CycleSummary(
        last_success=await history.latest_success(),
        last_failure=await history.latest_failure(),
        recent=await history.outcomes_since(as_of - RECENT_WINDOW),
        latest=latest,
        live=live,
        backlog_change=change,
        trend_window=window,
        pace=pace,
        pace_window=paced_over,
        throttle=throttle,
    )


def recent_pace(rows: Sequence[BacklogRow], since: datetime) -> Pace | None:
    """The deployment's pace now: what its cycles that ended `since` (of `rows`, any
    instance, however each ended: a failed one's committed batches count) expired, from the
    first one's start to the latest one's end. The time between cycles counts too: an ETA at
    this pace is wall-clock time. None without such a cycle: a worker that stopped has no
    pace, whatever it did before."""
    recent = [row for row in rows if row.ended_at >= since]
    if not recent:
        return None
    started = min(row.started_at for row in recent)
    latest = max(row.ended_at for row in recent)
    return Pace(sum(row.expired_count for row in recent), (latest - started).total_seconds())


@dataclass(frozen=True, slots=True)
class Throttle:
    """What the drains of the pace's window waited on their throttle: `seconds` in all (the
    instances' waits added up), `share` of the window's time, and the reason most of it was
    for (`replica_lag`, `nice`, `load`)."""

    seconds: float
    share: float
    reason: str


def recent_throttle(
    rows: Sequence[BacklogRow], since: datetime, pace: Pace | None
) -> Throttle | None:
    """The throttle of the cycles `recent_pace` reads, None when none waited. Each cycle's
    wait counts for the reason it waited longest for; the share is of the pace's time
    (several instances waiting at once may add up past it: capped at 1)."""
    waits: dict[str, float] = {}
    for row in rows:
        if row.ended_at >= since and row.throttled_seconds > 0 and row.throttled_by:
            waits[row.throttled_by] = waits.get(row.throttled_by, 0.0) + row.throttled_seconds
    if not waits or pace is None or pace.seconds <= 0:
        return None
    seconds = sum(waits.values())
    return Throttle(seconds, min(seconds / pace.seconds, 1.0), max(waits, key=waits.__getitem__))


def deployment_backlog_change(
    rows: Iterable[BacklogRow], instances: set[str], window: timedelta
) -> int | None:
    """The least of the backlog changes these instances' cycles show (`rows`, oldest first),
    each as the worker's calendar_slot_expiration_backlog_change reads it: over the run of
    consecutive successful cycles since the instance's latest failure, or, while that run
    holds fewer than two, what the run before it showed."""
    runs: dict[str, list[BacklogSample]] = {}
    held: dict[str, int] = {}
    for row in rows:
        if row.instance not in instances:
            continue
        run = runs.setdefault(row.instance, [])
        if row.outcome is not CycleOutcome.SUCCESS:
            shown = backlog_change(run, window)
            if shown is not None:
                held[row.instance] = shown
            runs[row.instance] = []
        elif row.backlog is not None:
            run.append(BacklogSample(row.ended_at.timestamp(), row.backlog, row.expired_count))
    changes = []
    for instance, run in runs.items():
        change = backlog_change(run, window)
        if change is None:
            change = held.get(instance)
        if change is not None:
            changes.append(change)
    return min(changes, default=None)


def backlog_fall(
    rows: Sequence[BacklogRow], as_of: datetime, window: timedelta = COUNT_FALL_WINDOW
) -> int | None:
    """How far the count the latest cycle left (of `rows`, oldest first) is below the one
    the latest cycle `window` before `as_of` left; None unless it is below. A run of
    successes broken by failures holds its trend: the count still shows the drain."""
    counted = [(row.ended_at, count) for row in rows if (count := row.backlog) is not None]
    before = [count for ended_at, count in counted if ended_at <= as_of - window]
    if not before:
        return None
    fall = counted[-1][1] - before[-1]
    return fall if fall < 0 else None


async def read_part(store: StatusStore, read: Callable[[], Awaitable[T]]) -> T | Unreadable:
    try:
        async with store.part():
            return await read()
    except StoreError as exc:
        return Unreadable(str(exc), exc.sqlstate)


def _part_json(part: T | Unreadable, render: Callable[[T], Any]) -> Any:
    return part.as_json() if isinstance(part, Unreadable) else render(part)


def _schema_json(schema: SchemaState, latest: str | None) -> dict[str, Any]:
    return {
        "revision": schema.revision,
        "latest": latest,
        "up_to_date": schema.revision == latest and schema.fits,
        # A newer release migrated it: this one runs on it (migrations only add).
        "ahead": position_of(schema.revision, latest or "") is SchemaPosition.AHEAD,
        "never_migrated": schema.never_migrated,
        "contract_mismatches": list(schema.contract_mismatches),
        "missing_tables": list(schema.missing_tables),
        "worker_mismatches": list(schema.worker_mismatches),
    }


def _sessions_json(sessions: tuple[WorkerSession, ...]) -> dict[str, Any]:
    return {
        "application_name": ApplicationName.WORKER,
        "count": len(sessions),
        "sessions": [_session_json(session) for session in sessions],
    }


def _index_json(index: SelectionIndex) -> dict[str, Any]:
    return {
        "name": SELECTION_INDEX,
        "exists": index.exists,
        "valid": index.valid,
        "table": index.table,
        "definition": index.definition,
        "selection_scan": index.scan,
        "serves_selection": index.serves_selection,
        "too_small_to_judge": index.too_small_to_judge,
        "table_rows_counted": index.size.counted,
        "table_rows_count_cap": index.size.cap,
        "table_rows_estimate": index.size.rows_estimate,
        "table_bytes": index.size.total_bytes,
    }


def _cycles_json(cycles: CycleSummary, as_of: datetime) -> dict[str, Any]:
    return {
        "last_success": cycle_json(cycles.last_success, as_of),
        "last_failure": cycle_json(cycles.last_failure, as_of),
        "latest": cycle_json(cycles.latest, as_of),
        "last_hour": {
            "total": cycles.recent_total(),
            "by_outcome": {o.value: n for o, n in cycles.recent_by_outcome().items()},
            "by_instance": {
                instance: {o.value: n for o, n in outcomes.items()}
                for instance, outcomes in cycles.recent_by_instance().items()
            },
        },
        "live_instances": [c.instance for c in cycles.live],
        "needing_a_person": [c.instance for c in cycles.needing_a_person()],
        "backlog_change": {
            "change": cycles.backlog_change,
            "window_seconds": cycles.trend_window.total_seconds(),
        },
    }


def _drain_json(drain: Drain | Unreadable | None) -> dict[str, Any] | None:
    if drain is None:
        return None
    if isinstance(drain, Unreadable):
        return drain.as_json()
    rate, eta = drain.rows_per_second, drain.eta_seconds
    return {
        "rows_per_second": None if rate is None else round(rate, 3),
        "eta_seconds": None if eta is None else round(eta, 3),
        "left": drain.left,
        "left_capped": drain.capped,
        "coming_down": drain.coming_down,
        "expired": drain.pace.rows,
        "seconds": round(drain.pace.seconds, 3),
        "window_seconds": drain.window.total_seconds(),
        "throttled_seconds": round(drain.throttle.seconds, 3) if drain.throttle else 0.0,
        "throttled_share": round(drain.throttle.share, 3) if drain.throttle else 0.0,
        "throttled_by": drain.throttle.reason if drain.throttle else None,
    }


def cycle_json(cycle: CycleRecord | None, as_of: datetime) -> dict[str, Any] | None:
    if cycle is None:
        return None
    return {
        "run_id": str(cycle.run_id),
        "instance": cycle.instance,
        "outcome": cycle.outcome.value,
        "ended_at": cycle.ended_at.isoformat(),
        "age_seconds": round((as_of - cycle.ended_at).total_seconds(), 3),
        "duration_ms": round(cycle.duration_ms, 3),
        "expired_count": cycle.expired_count,
        "failed_count": cycle.failed_count,
        "batches": cycle.batches,
        "backlog": cycle.backlog,
        "stop_reason": cycle.stop_reason,
        "error_type": cycle.error_type,
        "sqlstate": cycle.sqlstate,
        "error": cycle.error,
    }


def _pause_json(pause: Pause | Unreadable | None, as_of: datetime) -> dict[str, Any] | None:
    if pause is None or isinstance(pause, Unreadable):
        return None if pause is None else pause.as_json()
    return pause.as_json() | {
        "age_seconds": round(pause.age(as_of).total_seconds(), 3),
        "outlived": pause.outlived(as_of),
    }


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _overdue_json(slot: OverdueSlot | None, age_seconds: float | None) -> dict[str, Any] | None:
    if slot is None or age_seconds is None:
        return None
    return {
        "slot_id": str(slot.id),
        "tenant_id": str(slot.tenant_id),
        "start_at": slot.start_at.isoformat(),
        "age_seconds": round(age_seconds, 3),
        "quarantined": slot.quarantined,
    }


def _session_json(session: WorkerSession) -> dict[str, Any]:
    return {
        "pid": session.pid,
        "state": session.state,
        "backend_start": _iso(session.backend_start),
        "xact_start": _iso(session.xact_start),
        "state_change": _iso(session.state_change),
        "wait_event_type": session.wait_event_type,
        "wait_event": session.wait_event,
    }
