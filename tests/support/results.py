"""Batch and cycle results as the cycle reports them, built by hand for sink tests."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from slot_expiration.domain import CycleOutcome, SlotRef
from slot_expiration.expiry import BatchResult, CycleEnded, CycleResult, StopReason
from slot_expiration.expiry.result import ItemFailure

AS_OF = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def slot_refs(count: int, tenant_id: UUID | None = None) -> tuple[SlotRef, ...]:
    """`count` slots, each of its own tenant unless one is given."""
    return tuple(SlotRef(id=uuid4(), tenant_id=tenant_id or uuid4()) for _ in range(count))


def failure(slot: SlotRef | None = None, sqlstate: str = "P0001", attempts: int = 1) -> ItemFailure:
    return ItemFailure(
        slot=slot or slot_refs(1)[0],
        sqlstate=sqlstate,
        message="slot refuses to expire",
        attempts=attempts,
        next_attempt_at=AS_OF + timedelta(minutes=5),
    )


def batch(
    expired: int = 0,
    failures: Sequence[ItemFailure] = (),
    skipped_locked: int = 0,
    number: int = 1,
) -> BatchResult:
    return BatchResult(
        number=number,
        expired_count=expired,
        failures=tuple(failures),
        skipped_locked_count=skipped_locked,
        duration_ms=5.0,
        exhausted=True,
    )


def cycle_result(
    run_id: UUID | None = None,
    *,
    expired: int = 0,
    failed: int = 0,
    skipped_locked: int = 0,
    duration_ms: float = 12.5,
    backlog: int | None = 0,
    batches: int = 1,
    outcome: CycleOutcome = CycleOutcome.SUCCESS,
) -> CycleResult:
    return CycleResult(
        run_id=run_id or uuid4(),
        as_of=AS_OF,
        started_at=AS_OF,
        outcome=outcome,
        batches=batches,
        expired_count=expired,
        skipped_locked_count=skipped_locked,
        failed_count=failed,
        failed_sample=slot_refs(min(failed, 10)),
        duration_ms=duration_ms,
        stop_reason=StopReason.DRAINED if outcome is CycleOutcome.SUCCESS else None,
        backlog=backlog,
        clock_skew_seconds=None,
        throttled_seconds=0.0,
        throttled_by=None,
    )


def ended(
    outcome: CycleOutcome = CycleOutcome.SUCCESS,
    error: BaseException | None = None,
    *,
    run_id: UUID | None = None,
    batch_in_flight: bool = False,
    **counts: Any,
) -> CycleEnded:
    """A CycleEnded as run_cycle emits it: a result with `outcome`, and the error."""
    result = cycle_result(run_id, outcome=outcome, backlog=None if error else 0, **counts)
    return CycleEnded(result, error, batch_in_flight)


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
