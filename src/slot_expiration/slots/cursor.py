"""The showcase's page cursor: where the previous page ended, as an opaque string.

Keyset pagination: a page lists the slots after (start_at, id) of the last
slot shown, so pages stay consistent while slots are booked or published
between two calls, and no page costs more than its own rows.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Self
from uuid import UUID

from slot_expiration.domain import Slot

_SEPARATOR = "|"


class InvalidCursorError(ValueError):
    """A string that is not a cursor this product handed out."""

    def __init__(self) -> None:
        super().__init__("not a showcase cursor: pass the cursor of the previous page as it is")


@dataclass(frozen=True, slots=True, order=True)
class ShowcaseCursor:
    start_at: datetime
    id: UUID

    @classmethod
    def after(cls, slot: Slot) -> Self:
        return cls(slot.start_at.astimezone(UTC), slot.id)

    def encode(self) -> str:
        raw = f"{self.start_at.astimezone(UTC).isoformat()}{_SEPARATOR}{self.id}"
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> Self:
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
            start, separator, slot_id = raw.partition(_SEPARATOR)
            moment = datetime.fromisoformat(start)
            if not separator or moment.tzinfo is None:
                raise InvalidCursorError
            return cls(moment, UUID(slot_id))
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise InvalidCursorError from None
