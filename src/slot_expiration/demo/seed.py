"""Demo slots: a backlog of past Available slots among the other states, laid out so that
the publish operation accepts them (no overlaps per consultant, within the horizon)."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from slot_expiration.domain import SlotStatus
from slot_expiration.slots import MAX_BATCH_SLOTS, SlotRange

SLOT_LENGTH = timedelta(minutes=30)
SPREAD_SLOTS = 3 * 24 * 2  # three days of half-hour slots on each side of now
PUBLISHED_BEFORE = timedelta(days=4)
"""The demo publishes with its clock set this far back, so that past slots can exist."""


@dataclass(frozen=True, slots=True)
class DemoMix:
    """How many slots of each kind the demo publishes (and books or archives)."""

    past_available: int = 1_800
    past_booked: int = 200
    future_available: int = 300
    archived: int = 50

    @property
    def total(self) -> int:
        return self.past_available + self.past_booked + self.future_available + self.archived


@dataclass(frozen=True, slots=True)
class DemoSlot:
    """A slot to publish, and the status the demo brings it to before the worker runs."""

    tenant_id: UUID
    consultant_id: UUID
    range: SlotRange
    status: SlotStatus


def publishing_clock(now: datetime) -> datetime:
    return now - PUBLISHED_BEFORE


def demo_slots(now: datetime, mix: DemoMix, seed: int = 7) -> list[DemoSlot]:
    """Slots of 12 agencies and 60 consultants, on a half-hour grid around `now`: past
    ones in the last 3 days, future ones in the next 3; no two of a consultant overlap."""
    rng = random.Random(seed)  # noqa: S311 - reproducible demo data, not a secret
    tenants = [_uuid(rng) for _ in range(12)]
    consultants = [(_uuid(rng), rng.choice(tenants)) for _ in range(60)]
    taken: set[tuple[UUID, int]] = set()

    def make(status: SlotStatus, past: bool) -> DemoSlot:
        while True:
            consultant, tenant = rng.choice(consultants)
            step = rng.randint(1, SPREAD_SLOTS) * (-1 if past else 1)
            if (consultant, step) not in taken:
                taken.add((consultant, step))
                break
        start = now + step * SLOT_LENGTH
        return DemoSlot(tenant, consultant, SlotRange(start, start + SLOT_LENGTH), status)

    plan = [
        (SlotStatus.AVAILABLE, True, mix.past_available),
        (SlotStatus.BOOKED, True, mix.past_booked),
        (SlotStatus.AVAILABLE, False, mix.future_available),
        (SlotStatus.ARCHIVED, True, mix.archived),
    ]
    return [make(status, past) for status, past, count in plan for _ in range(count)]


def publications(slots: list[DemoSlot]) -> list[list[DemoSlot]]:
    """The slots grouped into publications: one consultant each, at most 500 slots."""
    by_consultant: dict[tuple[UUID, UUID], list[DemoSlot]] = defaultdict(list)
    for slot in slots:
        by_consultant[(slot.tenant_id, slot.consultant_id)].append(slot)
    return [
        group[i : i + MAX_BATCH_SLOTS]
        for group in by_consultant.values()
        for i in range(0, len(group), MAX_BATCH_SLOTS)
    ]


def _uuid(rng: random.Random) -> UUID:
    return UUID(int=rng.getrandbits(128), version=4)
