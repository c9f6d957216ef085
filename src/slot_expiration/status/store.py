"""The operator's read-only view of the database: `status`, `quarantine list`, /readyz.

It runs the named statements of status.sql and schema.sql in one read-only
transaction (one snapshot) on a session of its own (its own
`application_name`, so it never counts as a worker session), each part in a
savepoint of its own: a part the role may not read fails alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, Final, Self
from uuid import UUID

from slot_expiration.db.errors import StoreError
from slot_expiration.db.session import (
    ApplicationName,
    Session,
    SessionSettings,
    TransactionLimits,
)
from slot_expiration.domain import SlotStatus
from slot_expiration.expiry.store import counts_by_status, explain_pick
from slot_expiration.history.store import HistoryStore
from slot_expiration.schema.location import verify_slot_table
from slot_expiration.schema.version import VERSION_TABLE, read_schema_revision

SELECTION_INDEX: Final = "ix_availability_slots_status_start"
SLOT_TABLE: Final = "availability_slots"
# Below this many slots the planner may rightly read the whole table instead of the
# index (measured with the selection's own EXPLAIN on generated calendars: a
# sequential scan up to 1,000 rows, a bitmap scan at 2,000, the index from 3,000
# whatever the share of due slots): whether the index serves cannot be judged yet.
SMALL_TABLE_ROWS: Final = 5_000


@dataclass(frozen=True, slots=True)
class OverdueSlot:
    """An Available slot whose start has passed."""

    id: UUID
    tenant_id: UUID
    start_at: datetime
    quarantined: bool


@dataclass(frozen=True, slots=True)
class WorkerSession:
    """A session of the worker in pg_stat_activity (None where the server hides it)."""

    pid: int
    state: str | None
    backend_start: datetime | None
    xact_start: datetime | None
    state_change: datetime | None
    wait_event_type: str | None
    wait_event: str | None


@dataclass(frozen=True, slots=True)
class TableSize:
    """The slot table's size: rows counted up to `cap`, the planner's estimate, bytes."""

    counted: int
    cap: int
    rows_estimate: int | None  # None before the table's first ANALYZE or VACUUM
    total_bytes: int

    @property
    def small(self) -> bool:
        return self.counted < self.cap


@dataclass(frozen=True, slots=True)
class SelectionIndex:
    """Whether the selection's index exists, is usable and is what the planner reads."""

    exists: bool
    valid: bool
    table: str | None
    definition: str | None
    scan: str  # how the plan reads the slot table: "Index Scan using ix_...", "Seq Scan", ...
    serves_selection: bool
    size: TableSize

    @property
    def too_small_to_judge(self) -> bool:
        """On a small table the planner rightly prefers a sequential scan: that the index
        does not serve the selection yet is no alarm."""
        return self.size.small


@dataclass(frozen=True, slots=True)
class SchemaState:
    """The worker's migration revision and how the tables differ from what it needs:
    the calendar's table from its contract (restored by hand), the worker's own tables
    missing or not of their shape (`migrate` repairs them)."""

    revision: str | None
    contract_mismatches: tuple[str, ...]
    missing_tables: tuple[str, ...]
    worker_mismatches: tuple[str, ...] = ()

    @property
    def slot_table_missing(self) -> bool:
        return any(p.startswith("table availability_slots") for p in self.contract_mismatches)

    @property
    def never_migrated(self) -> bool:
        """No `migrate` has run here: the worker's version table does not exist."""
        return VERSION_TABLE in self.missing_tables

    @property
    def worker_problems(self) -> tuple[str, ...]:
        """What `migrate` repairs."""
        return (*(f"table {t} is missing" for t in self.missing_tables), *self.worker_mismatches)

    @property
    def fits(self) -> bool:
        return not (self.contract_mismatches or self.worker_problems)


class StatusStore:
    """Read-only queries over the slot table, the history and the server's views (the
    quarantine's on the same session: QuarantineStore(store.session))."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.history = HistoryStore(session)

    @classmethod
    @asynccontextmanager
    async def connect(
        cls, database_url: str, application_name: str, timeout_seconds: float = 10.0
    ) -> AsyncIterator[Self]:
        """One read-only transaction whose statements give up after `timeout_seconds`, on
        the availability_slots meant (else WrongSlotTableError: schema.location)."""
        timeout_ms = round(timeout_seconds * 1000)
        limits = TransactionLimits(timeout_ms, timeout_ms, timeout_ms, read_only=True)
        settings = SessionSettings(
            application_name, limits=limits, connect_timeout_seconds=max(1, round(timeout_seconds))
        )
        async with Session.open(database_url, settings) as session, session.transaction():
            await verify_slot_table(session)
            yield cls(session)

    def part(self) -> AbstractAsyncContextManager[None]:
        """A part of a report: if the role may not read it, only it fails."""
        return self.session.savepoint()

    async def database_clock(self) -> datetime:
        """The database's now: what the report measures times and ages on."""
        now: datetime = await self.session.value("database_clock")
        return now

    async def schema_revision(self) -> str | None:
        """The migration the schema is at; SchemaMissingError when it was never migrated."""
        return await read_schema_revision(self.session)

    async def schema_state(self) -> SchemaState:
        mismatches = tuple(await self.session.column("contract_mismatches"))
        missing = tuple(await self.session.column("worker_tables_missing"))
        altered = tuple(
            row.problem for row in await self.session.records("worker_shape_mismatches", _Mismatch)
        )
        revision = None
        if "slot_expiration_alembic_version" not in missing:
            revision = await self.schema_revision()
        return SchemaState(revision, mismatches, missing, altered)

    async def counts_by_status(self) -> dict[SlotStatus, int]:
        return await counts_by_status(self.session)

    async def backlog(self, as_of: datetime, cap: int) -> int:
        """Available slots due at `as_of`, counted up to `cap`: the worker's own count."""
        params = {"as_of": as_of, "cap": cap}
        return int(await self.session.value("count_backlog_capped", params))

    async def oldest_overdue(self, as_of: datetime) -> OverdueSlot | None:
        found = await self.session.records("status_oldest_overdue", OverdueSlot, {"as_of": as_of})
        return found[0] if found else None

    async def worker_sessions(self) -> tuple[WorkerSession, ...]:
        params = {"application_name": ApplicationName.WORKER}
        return tuple(await self.session.records("status_worker_sessions", WorkerSession, params))

    async def table_size(self, cap: int = SMALL_TABLE_ROWS) -> TableSize:
        return await self.session.record(
            "status_slot_table_size", partial(TableSize, cap=cap), {"cap": cap}
        )

    async def selection_index(self, as_of: datetime, batch_size: int) -> SelectionIndex:
        found = await self.session.records("status_selection_index", _IndexRow)
        parts = await self.session.record("status_slot_table_partitions", _Partitions)
        plan = await explain_pick(self.session, as_of, batch_size)
        scan = _slot_table_scan(plan, {SLOT_TABLE, *parts.partitions}, set(parts.index_partitions))
        index = found[0] if found else _IndexRow(table_name=None, valid=False, definition=None)
        return SelectionIndex(
            exists=bool(found),
            valid=index.valid,
            table=index.table_name,
            definition=index.definition,
            scan=scan,
            serves_selection=f"using {SELECTION_INDEX}" in scan,
            size=await self.table_size(),
        )


@dataclass(frozen=True, slots=True)
class _Mismatch:
    relation: str
    problem: str
    rows: int


@dataclass(frozen=True, slots=True)
class _IndexRow:
    table_name: str | None
    valid: bool
    definition: str | None


@dataclass(frozen=True, slots=True)
class _Partitions:
    partitions: list[str]
    index_partitions: list[str]


def _slot_table_scan(
    explained: Any, relations: set[str] | None = None, index_partitions: set[str] | None = None
) -> str:
    """How an EXPLAIN (FORMAT JSON) plan reads the slot table, in EXPLAIN's own words.

    A bitmap scan reads the table in one node and the index in a child node:
    both are named ("Bitmap Heap Scan, Bitmap Index Scan using ix_..."). Only scans
    are named: the joins, sorts and limits around them say nothing of the index.
    On a partitioned table (`relations`: it and its partitions) each partition is
    scanned on its own, through its part of the selection's index
    (`index_partitions`): the same step over several partitions is named once,
    with their number, and a part of the selection's index by the index's name.
    """
    relations = relations or {SLOT_TABLE}
    index_partitions = index_partitions or set()
    try:
        steps = [
            f"{node['Node Type']} using {_index_name(node['Index Name'], index_partitions)}"
            if "Index Name" in node
            else str(node["Node Type"])
            for node in _plan_nodes(explained[0]["Plan"])
            # A bitmap index scan names no relation; any other scan names its own.
            if str(node["Node Type"]).endswith("Scan")
            and node.get("Relation Name", SLOT_TABLE) in relations
        ]
    except (KeyError, IndexError, TypeError) as exc:
        raise StoreError(f"unexpected EXPLAIN output: {exc!r}") from exc
    counted = Counter(steps)
    shown = [
        step if counted[step] == 1 else f"{step} (on {counted[step]} partitions)"
        for step in dict.fromkeys(steps)
    ]
    return ", ".join(shown) or f"no scan of {SLOT_TABLE}"


def _index_name(name: str, index_partitions: set[str]) -> str:
    return SELECTION_INDEX if name in index_partitions else name


def _plan_nodes(node: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield node
    for child in node.get("Plans", ()):
        yield from _plan_nodes(child)
