"""What a batch and a cycle did: counts, bounded samples, and the JSON summary scripts read."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from uuid import UUID, uuid4

from hypothesis import given
from hypothesis import strategies as st

from slot_expiration.domain import CycleOutcome, SlotRef
from slot_expiration.expiry import (
    FAILED_SAMPLE_SIZE,
    BatchResult,
    CycleProgress,
    StopReason,
)
from slot_expiration.expiry.result import ItemFailure

AS_OF = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
RUN_ID = UUID("6f1c2d3e-0000-4000-8000-000000000001")


def _slot() -> SlotRef:
    return SlotRef(id=uuid4(), tenant_id=uuid4())


def _batch(number: int, expired: int, failed: int, skipped_locked: int = 0) -> BatchResult:
    return BatchResult(
        number=number,
        expired_count=expired,
        failures=tuple(
            ItemFailure(slot=_slot(), sqlstate="23514", message="check violated")
            for _ in range(failed)
        ),
        skipped_locked_count=skipped_locked,
        duration_ms=3.0,
        exhausted=False,
    )


def _tally(*batches: BatchResult) -> CycleProgress:
    tally = CycleProgress(RUN_ID, AS_OF, AS_OF)
    for batch in batches:
        tally.batch_started()
        tally.add(batch)
    return tally


def test_summary_starts_with_expired_skipped_locked_and_duration_ms() -> None:
    result = _tally(_batch(1, expired=3, failed=0, skipped_locked=2)).result(
        CycleOutcome.SUCCESS, 41.98765, StopReason.DRAINED
    )

    summary = result.summary()

    assert list(summary)[:3] == ["expired_count", "skipped_locked_count", "duration_ms"]
    assert summary["expired_count"] == 3
    assert summary["skipped_locked_count"] == 2
    assert summary["duration_ms"] == 41.988


def test_summary_is_json_serialisable_and_round_trips() -> None:
    result = _tally(_batch(1, expired=2, failed=1, skipped_locked=1)).result(
        CycleOutcome.SUCCESS, 5.0, StopReason.MAX_BATCHES
    )

    decoded = json.loads(json.dumps(result.summary()))

    assert decoded == result.summary()
    assert decoded["run_id"] == str(RUN_ID)
    assert decoded["as_of"] == "2026-12-02T12:00:00+00:00"
    assert decoded["stop_reason"] == "max_batches"


def test_a_cycle_adds_up_its_batches() -> None:
    batches = (_batch(1, 500, 2, 3), _batch(2, 500, 0, 1), _batch(3, 120, 1, 0))

    result = _tally(*batches).result(CycleOutcome.SUCCESS, 10.0, StopReason.DRAINED)

    assert result.batches == 3
    assert result.expired_count == 1120
    assert result.failed_count == 3
    assert result.skipped_locked_count == 4
    assert result.selected_count == 1123
    assert result.summary()["batches"] == 3


def test_the_summary_samples_the_first_failed_ids_in_order() -> None:
    first, second = _batch(1, 0, 2), _batch(2, 0, 2)

    summary = _tally(first, second).result(CycleOutcome.SUCCESS, 1.0, StopReason.DRAINED).summary()

    expected = [str(f.slot.id) for f in (*first.failures, *second.failures)]
    assert summary["failed_slot_ids_sample"] == expected
    assert summary["failed_count"] == 4


@given(failed_per_batch=st.lists(st.integers(min_value=0, max_value=3_000), max_size=6))
def test_the_result_stays_bounded_however_many_rows_fail(failed_per_batch: list[int]) -> None:
    tally = CycleProgress(RUN_ID, AS_OF, AS_OF)
    for number, failed in enumerate(failed_per_batch, start=1):
        tally.batch_started()
        tally.add(_batch(number, expired=1, failed=failed))

    result = tally.result(CycleOutcome.SUCCESS, 1.0, StopReason.DRAINED)

    assert result.failed_count == sum(failed_per_batch)
    assert len(result.failed_sample) == min(sum(failed_per_batch), FAILED_SAMPLE_SIZE)
    assert len(json.dumps(result.summary())) < 1_000


def test_an_empty_cycle_summarises_to_zero_counts() -> None:
    summary = (
        _tally(_batch(1, 0, 0)).result(CycleOutcome.SUCCESS, 1.0, StopReason.DRAINED).summary()
    )

    assert summary["expired_count"] == 0
    assert summary["selected_count"] == 0
    assert summary["failed_slot_ids_sample"] == []
    assert summary["batches"] == 1


def test_a_cycle_that_failed_reports_its_outcome_no_stop_reason_and_what_committed() -> None:
    tally = _tally(_batch(1, expired=500, failed=0))
    tally.batch_started()  # a second batch, in flight when the cycle failed

    result = tally.result(CycleOutcome.BUDGET_EXCEEDED, 30_000.0)

    assert tally.batch_in_flight
    assert (result.outcome, result.stop_reason, result.batches) == (
        CycleOutcome.BUDGET_EXCEEDED,
        None,
        1,
    )
    summary = result.summary()
    assert (summary["outcome"], summary["stop_reason"]) == ("budget_exceeded", None)
    assert summary["expired_count"] == 500


def test_a_completed_cycle_summarises_its_outcome_and_why_it_stopped_apart() -> None:
    summary = (
        _tally(_batch(1, 3, 0)).result(CycleOutcome.SUCCESS, 1.0, StopReason.DRAINED).summary()
    )

    assert (summary["outcome"], summary["stop_reason"]) == ("success", "drained")
