"""Demo slots: a backlog of past Available slots among the other states."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from slot_expiration.domain import Slot, SlotStatus

_SLOT_LENGTH = timedelta(minutes=30)


@dataclass(frozen=True, slots=True)
class DemoMix:
    """How many slots of each kind the demo publishes."""

    past_available: int = 1_800
    past_booked: int = 200
    future_available: int = 300
    already_expired: int = 100
    archived: int = 50

    @property
    def total(self) -> int:
        return (
            self.past_available
            + self.past_booked
            + self.future_available
            + self.already_expired
            + self.archived
        )


def demo_slots(now: datetime, mix: DemoMix, seed: int = 7) -> list[Slot]:
    """Slots of 12 agencies and 60 consultants, past ones spread over the last 3 days."""
    rng = random.Random(seed)  # noqa: S311 - reproducible demo data, not a secret
    tenants = [_uuid(rng) for _ in range(12)]
    consultants = [(_uuid(rng), rng.choice(tenants)) for _ in range(60)]

    def make(status: SlotStatus, past: bool) -> Slot:
        consultant, tenant = rng.choice(consultants)
        offset = timedelta(minutes=rng.randint(1, 3 * 24 * 60))
        start = now - offset if past else now + offset
        created = min(start, now) - timedelta(days=7)
        return Slot(
            id=_uuid(rng),
            tenant_id=tenant,
            consultant_id=consultant,
            start_at=start,
            end_at=start + _SLOT_LENGTH,
            status=status,
            version=1,
            created_at=created,
            updated_at=created,
        )

    plan = [
        (SlotStatus.AVAILABLE, True, mix.past_available),
        (SlotStatus.BOOKED, True, mix.past_booked),
        (SlotStatus.AVAILABLE, False, mix.future_available),
        (SlotStatus.EXPIRED, True, mix.already_expired),
        (SlotStatus.ARCHIVED, True, mix.archived),
    ]
    return [make(status, past) for status, past, count in plan for _ in range(count)]


def _uuid(rng: random.Random) -> UUID:
    return UUID(int=rng.getrandbits(128), version=4)
