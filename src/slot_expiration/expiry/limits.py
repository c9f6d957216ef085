"""How much one cycle may do."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from slot_expiration.quarantine import PoisonBackoff


@dataclass(frozen=True, slots=True)
class CycleLimits:
    """Built from a cycle's options (worker.cycle_limits), whose model holds every default."""

    batch_size: int  # a cycle's first batch (the spec's)
    drain_batch_size: int | None  # a drain's later batches; None: batch_size
    max_batches: int  # 0: until the backlog is empty (or the budget runs low)
    batch_pause_seconds: float  # between two batches of a drain
    backoff: PoisonBackoff
    # A worker clock further ahead of the database's than this refuses to expire.
    max_clock_skew_seconds: float
    # How long a quarantine entry that ended is kept (`quarantine list --history`), as
    # the cycle history is: the cycle's tail purges the older ones.
    quarantine_retention: timedelta
    # Drain mode: wait while a streaming standby is further behind (0: never look).
    max_replica_lag_seconds: float = 0.0
    # Drain mode: after a batch of t seconds, rest this many times t.
    drain_nice_ratio: float = 0.0
    # Drain mode: a batch slower per row than the recent fastest by more than this many
    # times rests the drain (0: never).
    drain_max_slowdown: float = 0.0

    def size_of_batch(self, number: int) -> int:
        """Rows asked for by a cycle's `number`-th batch (1 for the first)."""
        if number == 1 or self.drain_batch_size is None:
            return self.batch_size
        return self.drain_batch_size
