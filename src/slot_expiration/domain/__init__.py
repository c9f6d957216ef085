"""The availability slot as far as the expiration worker needs it."""

from slot_expiration.domain.slot import Slot, SlotRef, SlotStatus

__all__ = ["Slot", "SlotRef", "SlotStatus"]
