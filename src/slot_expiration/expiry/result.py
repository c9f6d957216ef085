"""What a batch and a cycle did, for the logs, the metrics and the `once --json` output.

A cycle runs one batch (the spec's behaviour) or, in drain mode, several; each
batch is its own transaction. A BatchResult counts what its transaction expired
and lists the rows it failed (bounded by the batch size); a CycleResult only adds
up counts and keeps a few sample ids, so it stays small however many rows a cycle
drains or fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from slot_expiration.domain import CycleOutcome, SlotRef
from slot_expiration.expiry.throttle import ThrottleReason
from slot_expiration.pause import Pause

# How many failed slot ids a cycle's summary shows; every one is logged anyway.
FAILED_SAMPLE_SIZE = 10
# The backlog left after a cycle is counted up to this many rows: far above the
# alert threshold (5,000), cheap enough to count after every cycle.
BACKLOG_COUNT_CAP = 100_000


@dataclass(frozen=True, slots=True)
class ItemFailure:
    """A poison row: the database refused its transition; it stays Available.

    `attempts` counts this failure too; the row is quarantined until
    `next_attempt_at` (None when the cycle could not record it).
    """

    slot: SlotRef
    sqlstate: str
    message: str
    attempts: int = 1
    next_attempt_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class BatchResult:
    """One transaction of a cycle: committed whole, with everything it lists."""

    number: int  # 1 for the first batch of a cycle
    # How many it expired: a count, not the rows (the batch statement returns no ids: the
    # calendar's table says which rows are Expired; the failures name theirs).
    expired_count: int
    failures: tuple[ItemFailure, ...]
    skipped_locked_count: int
    duration_ms: float
    exhausted: bool  # the selection found fewer rows than asked for: nothing more is due now
    # Where its window ended when it was full, (start_at, id) of its last row: the next
    # batch of a drain starts after it.
    window_end: tuple[datetime, UUID] | None = None

    @property
    def failed_count(self) -> int:
        return len(self.failures)

    @property
    def selected_count(self) -> int:
        """Rows the batch locked: those it expired plus the poison ones it left."""
        return self.expired_count + len(self.failures)


class StopReason(StrEnum):
    """Why a cycle that succeeded ran no further batch."""

    DRAINED = "drained"  # the last batch came back short: the backlog is done for now
    MAX_BATCHES = "max_batches"  # it ran --max-batches-per-cycle batches
    BUDGET = "budget"  # too little of the cycle budget was left for another batch
    STOP_REQUESTED = "stop_requested"  # SIGTERM/SIGINT arrived between two batches
    # held back (a standby further behind than allowed) until too little budget was left
    THROTTLED = "throttled"


@dataclass(frozen=True, slots=True)
class CycleResult:
    """What a cycle did, however it ended: a frozen snapshot of its progress (a cycle that
    failed reports what its committed batches did: a drain may have committed many before
    it stopped), with how it ended. The JSON of `once`, the history's row and the log's
    fields are derived from it (summary, history.store.CycleRecord.of), never re-listed.
    The first three fields are the JSON's first keys, a scripting contract."""

    expired_count: int
    skipped_locked_count: int
    duration_ms: float
    failed_count: int
    failed_sample: tuple[SlotRef, ...]
    batches: int
    outcome: CycleOutcome
    # Why a cycle that succeeded stopped; None for one that failed (its outcome says how).
    stop_reason: StopReason | None
    backlog: int | None  # Available rows still due at as_of after the cycle, capped
    # The worker's clock minus the database's at the cycle's start (None: not compared).
    clock_skew_seconds: float | None
    # How long a drain waited before its batches (the throttle: throttle.py), and the
    # reason it waited longest for (None: it never waited).
    throttled_seconds: float
    throttled_by: ThrottleReason | None
    run_id: UUID
    as_of: datetime
    started_at: datetime  # the worker's clock when the cycle started
    # The pause in force that the cycle found, and obeyed (outcome `paused`); else None.
    pause: Pause | None = None

    @property
    def selected_count(self) -> int:
        """Rows the cycle locked: those it expired plus the poison ones it left."""
        return self.expired_count + self.failed_count

    def summary(self) -> dict[str, Any]:
        """The JSON-ready summary: every field in order, as JSON reads it (the sample as
        slot ids), and the rows it locked after the first three."""
        fields = {field.name: _json(getattr(self, field.name)) for field in dataclass_fields(self)}
        fields["failed_slot_ids_sample"] = [str(slot.id) for slot in self.failed_sample]
        del fields["failed_sample"], fields["started_at"]
        first = dict(list(fields.items())[:3])
        return {**first, "selected_count": self.selected_count, **fields}


def _json(value: object) -> object:
    """A field's value as JSON reads it: text for ids, moments and words; numbers rounded."""
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, UUID | StrEnum):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Pause):
        return value.as_json()
    return value


@dataclass(slots=True)
class CycleProgress:
    """What a cycle has done so far: written by the cycle as its batches start and commit
    and as it measures, read once it ended (by whoever reports it, however it ended) as
    a CycleResult: every field of its but `batch_in_flight` is one of the result's."""

    run_id: UUID
    as_of: datetime
    started_at: datetime
    batches: int = 0
    batch_in_flight: bool = False  # a batch started and has not committed
    expired_count: int = 0
    skipped_locked_count: int = 0
    failed_count: int = 0
    failed_sample: list[SlotRef] = field(default_factory=list)
    backlog: int | None = None
    clock_skew_seconds: float | None = None
    pause: Pause | None = None
    throttled_seconds: float = 0.0
    # The throttle's waits by reason; the result keeps the total and the longest's reason.
    _throttled: dict[ThrottleReason, float] = field(default_factory=dict)

    def throttled(self, reason: ThrottleReason, seconds: float) -> None:
        """The drain waits `seconds` before its next batch, for `reason`."""
        self.throttled_seconds += seconds
        self._throttled[reason] = self._throttled.get(reason, 0.0) + seconds

    def batch_started(self) -> int:
        """The number of the batch that starts (1 for the cycle's first)."""
        self.batch_in_flight = True
        return self.batches + 1

    def add(self, batch: BatchResult) -> None:
        """A batch committed."""
        self.batch_in_flight = False
        self.batches += 1
        self.expired_count += batch.expired_count
        self.skipped_locked_count += batch.skipped_locked_count
        self.failed_count += batch.failed_count
        room = FAILED_SAMPLE_SIZE - len(self.failed_sample)
        self.failed_sample.extend(f.slot for f in batch.failures[: max(room, 0)])

    def result(
        self, outcome: CycleOutcome, duration_ms: float, stop_reason: StopReason | None = None
    ) -> CycleResult:
        """The snapshot: what the cycle did so far, and how it ended."""
        done = {
            field.name: getattr(self, field.name)
            for field in dataclass_fields(self)
            if field.name not in {"batch_in_flight", "_throttled"}
        }
        done["throttled_by"] = max(self._throttled, key=self._throttled.__getitem__, default=None)
        done["failed_sample"] = tuple(self.failed_sample)
        return CycleResult(
            **done, outcome=outcome, duration_ms=duration_ms, stop_reason=stop_reason
        )
