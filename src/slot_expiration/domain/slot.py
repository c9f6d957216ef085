"""Availability slot rows, as frozen values with an Enum status."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from uuid import UUID


class SlotStatus(StrEnum):
    """The four values the table contract allows, spelled as stored."""

    AVAILABLE = "Available"
    BOOKED = "Booked"
    EXPIRED = "Expired"
    ARCHIVED = "Archived"


@dataclass(frozen=True, slots=True)
class Slot:
    """One row of `availability_slots`."""

    id: UUID
    tenant_id: UUID
    consultant_id: UUID
    start_at: datetime
    end_at: datetime
    status: SlotStatus
    version: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class SlotRef:
    """The identity of a slot a cycle touched: enough for logs and traces, no PII."""

    id: UUID
    tenant_id: UUID
