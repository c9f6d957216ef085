"""How much one cycle may do."""

from __future__ import annotations

from dataclasses import dataclass, field

from slot_expiration.cycle.backoff import PoisonBackoff


@dataclass(frozen=True, slots=True)
class CycleLimits:
    batch_size: int = 500
    max_batches: int = 1  # 0: until the backlog is empty (or the budget runs low)
    batch_pause_seconds: float = 0.0  # between two batches of a drain
    backoff: PoisonBackoff = field(default_factory=PoisonBackoff)
    # A worker clock further ahead of the database's than this refuses to expire.
    max_clock_skew_seconds: float = 30.0
