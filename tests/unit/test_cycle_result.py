"""What one cycle did: counts, and the JSON summary other tools script against."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from uuid import UUID, uuid4

from slot_expiration.cycle import CycleResult, ItemFailure
from slot_expiration.domain import SlotRef

AS_OF = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
RUN_ID = UUID("6f1c2d3e-0000-4000-8000-000000000001")


def _slot() -> SlotRef:
    return SlotRef(id=uuid4(), tenant_id=uuid4())


def _result(expired: int, failed: int, skipped_locked: int = 0) -> CycleResult:
    return CycleResult(
        run_id=RUN_ID,
        as_of=AS_OF,
        expired=tuple(_slot() for _ in range(expired)),
        skipped_locked_count=skipped_locked,
        failures=tuple(
            ItemFailure(slot=_slot(), sqlstate="23514", message="check violated")
            for _ in range(failed)
        ),
        duration_ms=41.98765,
    )


def test_summary_starts_with_expired_skipped_locked_and_duration_ms() -> None:
    summary = _result(expired=3, failed=0, skipped_locked=2).summary()

    assert list(summary)[:3] == ["expired_count", "skipped_locked_count", "duration_ms"]
    assert summary["expired_count"] == 3
    assert summary["skipped_locked_count"] == 2
    assert summary["duration_ms"] == 41.988


def test_summary_is_json_serialisable_and_round_trips() -> None:
    result = _result(expired=2, failed=1, skipped_locked=1)

    decoded = json.loads(json.dumps(result.summary()))

    assert decoded == result.summary()
    assert decoded["run_id"] == str(RUN_ID)
    assert decoded["as_of"] == "2026-12-02T12:00:00+00:00"


def test_summary_lists_the_ids_of_the_failed_slots() -> None:
    result = _result(expired=2, failed=2)

    summary = result.summary()

    assert summary["failed_count"] == 2
    assert summary["failed_slot_ids"] == [str(f.slot.id) for f in result.failures]


def test_selected_count_is_the_expired_plus_the_failed_rows() -> None:
    result = _result(expired=5, failed=2)

    assert result.expired_count == 5
    assert result.failed_count == 2
    assert result.selected_count == 7
    assert result.summary()["selected_count"] == 7


def test_an_empty_cycle_summarises_to_zero_counts() -> None:
    summary = _result(expired=0, failed=0).summary()

    assert summary["expired_count"] == 0
    assert summary["selected_count"] == 0
    assert summary["failed_slot_ids"] == []
