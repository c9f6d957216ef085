"""One cycle of the worker: one batch, one result."""

from slot_expiration.cycle.expiry_cycle import ExpiryCycle, StoreFactory
from slot_expiration.cycle.result import CycleResult, ItemFailure

__all__ = ["CycleResult", "ExpiryCycle", "ItemFailure", "StoreFactory"]
