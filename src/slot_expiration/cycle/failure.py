"""Why a cycle failed, in the words every sink (logs, metrics, readiness, traces) uses."""

from __future__ import annotations

from enum import StrEnum

from slot_expiration.store import ErrorFamily, SlotStoreError


class ClockSkewError(Exception):
    """The worker's clock runs ahead of the database's by more than the tolerance: its
    AsOf would expire slots that can still be booked, so the cycle expires nothing."""

    def __init__(self, skew_seconds: float, tolerance_seconds: float) -> None:
        super().__init__(
            f"the worker's clock is {skew_seconds:.1f} s ahead of the database's "
            f"(tolerance {tolerance_seconds:g} s, --max-clock-skew-seconds): it would expire "
            "slots that can still be booked, so this cycle expired nothing; fix the host's clock"
        )
        self.skew_seconds = skew_seconds


class FailureKind(StrEnum):
    """The kind of a failed cycle."""

    TRANSIENT = "transient"  # time may cure it: retried at the next tick
    MISCONFIGURED = "misconfigured"  # a person must act: a login, a grant, a table
    CLOCK_SKEW = "clock_skew"  # a person must act: the host's clock
    BUDGET_EXCEEDED = "budget_exceeded"  # ran past its budget: rolled back
    STOPPED = "stopped"  # abandoned at shutdown: rolled back

    @property
    def needs_a_person(self) -> bool:
        return self in (FailureKind.MISCONFIGURED, FailureKind.CLOCK_SKEW)


def failure_kind(error: BaseException, *, budget_exceeded: bool) -> FailureKind:
    if budget_exceeded:
        return FailureKind.BUDGET_EXCEEDED
    if isinstance(error, ClockSkewError):
        return FailureKind.CLOCK_SKEW
    if isinstance(error, SlotStoreError) and error.family is ErrorFamily.MISCONFIGURED:
        return FailureKind.MISCONFIGURED
    if isinstance(error, CycleCancelledError):
        return FailureKind.STOPPED
    return FailureKind.TRANSIENT


def sqlstate_of(error: BaseException) -> str | None:
    """The SQLSTATE behind a failure, if the database gave (or implied) one."""
    return error.sqlstate if isinstance(error, SlotStoreError) else None


class CycleCancelledError(Exception):
    """The cycle was abandoned at shutdown; its batch in flight rolled back whole."""
