"""How long a poison row waits before the worker tries it again."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True, slots=True)
class PoisonBackoff:
    """The first retry comes `base_seconds` after the first failure (one interval by
    default: the spec's "left for the next cycle"); the wait doubles per failure up
    to `max_seconds`. Both from --poison-backoff-seconds and --poison-backoff-max-seconds."""

    base_seconds: float
    max_seconds: float

    def __post_init__(self) -> None:
        if not 0 < self.base_seconds <= self.max_seconds:
            raise ValueError("need 0 < base_seconds <= max_seconds")

    def delay(self, attempts: int) -> timedelta:
        """The wait after the `attempts`-th failure (1 for the first)."""
        if attempts < 1:
            raise ValueError("attempts counts failures: at least 1")
        # Past 2**62 the product overflows floats' exact range; the cap is reached long before.
        doublings = min(attempts - 1, 62)
        return timedelta(seconds=min(self.base_seconds * 2.0**doublings, self.max_seconds))
