"""Building slot rows for tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

from slot_expiration.domain import Slot, SlotStatus

AS_OF = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)

# Test-side SQL: `count` due slots in one statement, the newest a day before `now`, one
# minute apart (a backlog of thousands without thousands of round trips).
DUE_BACKLOG = """
INSERT INTO availability_slots
SELECT gen_random_uuid(), gen_random_uuid(), gen_random_uuid(),
       %(now)s - interval '1 day' - i * interval '1 minute',
       %(now)s - interval '1 day' - i * interval '1 minute' + interval '30 minutes',
       'Available', 1, %(now)s, %(now)s
FROM generate_series(1, %(count)s) AS i
"""


def make_slot(
    start_offset: timedelta,
    status: SlotStatus = SlotStatus.AVAILABLE,
    *,
    as_of: datetime = AS_OF,
    version: int = 1,
    slot_id: UUID | None = None,
    tenant_id: UUID | None = None,
) -> Slot:
    """A slot starting `start_offset` after `as_of` (negative = in the past)."""
    start = as_of + start_offset
    created = as_of - timedelta(days=30)
    return Slot(
        id=slot_id or uuid4(),
        tenant_id=tenant_id or uuid4(),
        consultant_id=uuid4(),
        start_at=start,
        end_at=start + timedelta(minutes=30),
        status=status,
        version=version,
        created_at=created,
        updated_at=created,
    )


def past_slots(count: int, status: SlotStatus = SlotStatus.AVAILABLE) -> list[Slot]:
    """`count` slots, one minute apart, the oldest first, all started before AS_OF."""
    return [make_slot(timedelta(minutes=-(count - i)), status) for i in range(count)]
