"""What one cycle did, for the logs, the metrics and the `once --json` output."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from slot_expiration.domain import SlotRef


@dataclass(frozen=True, slots=True)
class ItemFailure:
    """A poison row: the database refused its transition; it stays Available."""

    slot: SlotRef
    sqlstate: str
    message: str


@dataclass(frozen=True, slots=True)
class CycleResult:
    run_id: UUID
    as_of: datetime
    expired: tuple[SlotRef, ...]
    skipped_locked_count: int
    failures: tuple[ItemFailure, ...]
    duration_ms: float

    @property
    def expired_count(self) -> int:
        return len(self.expired)

    @property
    def selected_count(self) -> int:
        """Rows the cycle locked: those it expired plus the poison ones it left."""
        return len(self.expired) + len(self.failures)

    @property
    def failed_count(self) -> int:
        return len(self.failures)

    def summary(self) -> dict[str, Any]:
        """The JSON-ready summary; the first three keys are a scripting contract."""
        return {
            "expired_count": self.expired_count,
            "skipped_locked_count": self.skipped_locked_count,
            "duration_ms": round(self.duration_ms, 3),
            "selected_count": self.selected_count,
            "failed_count": self.failed_count,
            "failed_slot_ids": [str(f.slot.id) for f in self.failures],
            "run_id": str(self.run_id),
            "as_of": self.as_of.isoformat(),
        }
