"""Why a cycle failed: the one exception that carries a failed cycle's partial result, and
the outcome each cause gives."""

from __future__ import annotations

from slot_expiration.db import CommitInDoubtError, ErrorFamily, StoreError
from slot_expiration.domain import CycleOutcome
from slot_expiration.expiry.events import CycleEnded, describe


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


class CycleFailed(Exception):  # noqa: N818 - named as the end it carries (CycleEnded)
    """A cycle that did not complete: how (`outcome`), why (`error`, also the message and
    the cause), what its committed batches did (`partial`) and whether a batch was in flight
    (it rolled back). The same facts the cycle's CycleEnded event carried."""

    def __init__(self, ended: CycleEnded) -> None:
        assert ended.error is not None, "a cycle that failed has a cause"
        super().__init__(describe(ended.error))
        self.ended = ended

    @property
    def outcome(self) -> CycleOutcome:
        return self.ended.result.outcome

    @property
    def error(self) -> BaseException:
        assert self.ended.error is not None
        return self.ended.error

    @property
    def batch_in_doubt(self) -> bool:
        """Whether the batch in flight sent its COMMIT and never heard back: it may have
        committed (else a batch in flight rolled back)."""
        error: BaseException | None = self.error
        while error is not None:
            if isinstance(error, CommitInDoubtError):
                return True
            error = error.__cause__
        return False


def outcome_of(error: BaseException) -> CycleOutcome:
    """How a cycle that raised `error` ended (past its budget is the budget's to say)."""
    if isinstance(error, ClockSkewError):
        return CycleOutcome.CLOCK_SKEW
    if isinstance(error, StoreError) and error.family is ErrorFamily.MISCONFIGURED:
        return CycleOutcome.MISCONFIGURED
    return CycleOutcome.FAILED


def sqlstate_of(error: BaseException | None) -> str | None:
    """The SQLSTATE behind a failure, if the database gave (or implied) one."""
    return error.sqlstate if isinstance(error, StoreError) else None
