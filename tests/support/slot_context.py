"""Driving the slot context from tests: a clock the test moves, ranges relative to it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from slot_expiration.slots import SlotOperations, SlotPolicy, SlotRange
from tests.support.slots import AS_OF

SLOT_LENGTH = timedelta(minutes=30)


@dataclass
class Clock:
    """`now` for the operations: it moves only when the test moves it."""

    now: datetime = AS_OF

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


def in_minutes(start: float, length: float = 30, *, base: datetime = AS_OF) -> SlotRange:
    """A slot starting `start` minutes after `base`, `length` minutes long."""
    begin = base + timedelta(minutes=start)
    return SlotRange(begin, begin + timedelta(minutes=length))


def every_hour(count: int, *, first: float = 120, base: datetime = AS_OF) -> list[SlotRange]:
    """`count` half-hour slots, one an hour, the first `first` minutes after `base`."""
    return [in_minutes(first + 60 * i, base=base) for i in range(count)]


@asynccontextmanager
async def operations(
    url: str, clock: Clock | None = None, policy: SlotPolicy | None = None
) -> AsyncIterator[SlotOperations]:
    async with SlotOperations.connect(url, policy or SlotPolicy(), clock or Clock()) as ops:
        yield ops
