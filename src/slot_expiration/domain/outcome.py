"""How a cycle ended: one word for every reader. The cycle, the loop and `once` decide it;
logs, metrics, traces, the history, `status` and `ui` read it, each by its value."""

from __future__ import annotations

import logging
from enum import StrEnum


class CycleOutcome(StrEnum):
    """The value is the metric's `outcome` label, the log's `reason`, the history's `outcome`
    (a CHECK constraint lists them, migration 0009's now: a new one needs a migration)."""

    SUCCESS = "success"
    FAILED = "failed"  # an infrastructure error: time may cure it, the next tick retries
    BUDGET_EXCEEDED = "budget_exceeded"  # past its budget: the batch in flight rolled back
    MISCONFIGURED = "misconfigured"  # a login, a grant, a table or column: a person must act
    CLOCK_SKEW = "clock_skew"  # the worker's clock ahead of the database's: a person must act
    INTERRUPTED = "interrupted"  # stopped (a signal): the batch in flight rolled back
    # An operator paused every replica (`slot-expiration pause`): the cycle found the pause
    # in force before its first batch and expired nothing. Not a failure: the replicas obey.
    PAUSED = "paused"

    @property
    def needs_a_person(self) -> bool:
        """Retrying cannot cure it: the replica is unready and the alert fires."""
        return self in (CycleOutcome.MISCONFIGURED, CycleOutcome.CLOCK_SKEW)

    @property
    def is_failure(self) -> bool:
        """The cycle did not do its work: neither a success nor a pause obeyed."""
        return self not in (CycleOutcome.SUCCESS, CycleOutcome.PAUSED)

    @property
    def log_level(self) -> int:
        """The level of the line that says how the cycle ended."""
        return logging.ERROR if self.is_failure else logging.INFO
