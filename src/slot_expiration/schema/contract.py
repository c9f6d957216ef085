"""What the role of a cycle lacks, and who must act on it: contract.sql's worker_problems,
read once per cycle (after its clock), and the one error that says it, with its remedy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from slot_expiration.db.errors import (
    INSUFFICIENT_PRIVILEGE,
    UNDEFINED_COLUMN,
    UNDEFINED_TABLE,
    MisconfiguredStoreError,
    Remedy,
    SchemaMissingError,
)
from slot_expiration.db.session import Session

SLOT_TABLE: Final = "availability_slots"


@dataclass(frozen=True, slots=True)
class WorkerProblems:
    """What the current role lacks to run a cycle (empty: nothing), each line with who must
    act on it (its remedy's word); built from worker_problems' columns by name."""

    role: str
    problems: Sequence[str]
    problem_kinds: Sequence[str]

    def has(self, remedy: Remedy) -> bool:
        return remedy.value in self.problem_kinds

    def error(self) -> MisconfiguredStoreError:
        """The one line that says what the role lacks and how it is fixed: the calendar's
        table changed (restored by hand), the worker's own schema missing or altered
        (`migrate` creates or repairs it), a grant missing, or a policy hiding rows."""
        problems = "; ".join(self.problems)
        if self.has(Remedy.CALENDAR):
            return SchemaMissingError(problems, UNDEFINED_COLUMN, Remedy.CALENDAR)
        if self.has(Remedy.MIGRATE):
            return SchemaMissingError(problems, UNDEFINED_TABLE, Remedy.MIGRATE)
        fixes = [_ADVICE[remedy](self.role) for remedy in _ADVICE if self.has(remedy)]
        return MisconfiguredStoreError(
            f"role {self.role} cannot run a cycle: {problems}; {'; '.join(fixes)}",
            INSUFFICIENT_PRIVILEGE,
            remedy=Remedy(self.problem_kinds[0]),
        )


_ADVICE: Final = {
    Remedy.GRANT: lambda role: (
        f"as the owner of {SLOT_TABLE}, run `slot-expiration grant --role {role}`"
    ),
    Remedy.ROW_SECURITY: lambda role: (
        f"a permissive policy that shows it every row (CREATE POLICY ... ON {SLOT_TABLE} "
        f"TO {role} USING (true)), or ALTER ROLE {role} BYPASSRLS (a superuser can)"
    ),
    Remedy.RESTRICTIVE_POLICY: lambda role: (
        "a restrictive policy narrows every role it applies to, whatever the permissive "
        f"ones show: apply it to the calendar's roles but not {role} (ALTER POLICY ... ON "
        f"{SLOT_TABLE} TO ...), or ALTER ROLE {role} BYPASSRLS (a superuser can)"
    ),
}


async def worker_problems(session: Session) -> WorkerProblems:
    """What the session's role lacks to run a cycle (contract.sql, worker_problems)."""
    return await session.record("worker_problems", WorkerProblems)
