"""The `reason` of a failed cycle in logs and spans, by its kind: a stable contract."""

from __future__ import annotations

from typing import Final

from slot_expiration.cycle import FailureKind

FAILURE_REASONS: Final = {
    FailureKind.TRANSIENT: "error",
    FailureKind.STOPPED: "error",
    FailureKind.BUDGET_EXCEEDED: "budget_exceeded",
    FailureKind.MISCONFIGURED: "misconfigured",
    FailureKind.CLOCK_SKEW: "clock_skew",
}
