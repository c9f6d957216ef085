""" "Nothing lost, nothing done twice": the books a fault test keeps on every row.

A test takes a snapshot of the rows before the fault and names the rows the
worker owes an expiry (`due`). After the fault and the recovery it compares:

- a due row that is not Expired at the end is *lost*;
- a row whose version rose by more than one was *done twice*;
- any other change (a due row expired with a version that did not rise by
  exactly one, a row that was not due and changed at all) is a *stray write*;
- the rows that became Expired must equal what the worker's cycles reported
  (the sum of their `expired_count`): a commit nobody reported, or a report
  without a commit, shows here.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from uuid import UUID

from slot_expiration.domain import SlotStatus
from tests.support.database import Row


@dataclass(frozen=True, slots=True)
class Audit:
    rows_at_risk: int
    lost: tuple[UUID, ...]
    done_twice: tuple[UUID, ...]
    stray: tuple[UUID, ...]
    became_expired: int
    reported_expired: int

    @property
    def rows_kept(self) -> bool:
        """Nothing lost, nothing done twice, no stray write (the counts aside)."""
        return not self.lost and not self.done_twice and not self.stray

    @property
    def unreported(self) -> int:
        """Rows that became Expired beyond what the cycles reported (negative: fewer)."""
        return self.became_expired - self.reported_expired

    @property
    def clean(self) -> bool:
        return self.rows_kept and self.unreported == 0

    def describe(self) -> str:
        return (
            f"lost {len(self.lost)} {list(self.lost)[:5]}, "
            f"done twice {len(self.done_twice)} {list(self.done_twice)[:5]}, "
            f"stray writes {len(self.stray)} {list(self.stray)[:5]}, "
            f"became Expired {self.became_expired}, cycles reported {self.reported_expired}"
        )


@dataclass(frozen=True, slots=True)
class Ledger:
    """The rows as they were before the fault, and which of them the worker owes."""

    before: Mapping[UUID, Row]
    due: frozenset[UUID]

    @classmethod
    def of(cls, before: Mapping[UUID, Row], due: Iterable[UUID]) -> Ledger:
        due = frozenset(due)
        unknown = due - before.keys()
        assert not unknown, f"due rows missing from the snapshot: {sorted(unknown)[:5]}"
        assert all(before[i].status is SlotStatus.AVAILABLE for i in due), "due rows: Available"
        return cls(before=dict(before), due=due)

    def audit(self, after: Mapping[UUID, Row], reported_expired: int, rows_at_risk: int) -> Audit:
        verdicts: dict[str, list[UUID]] = {"lost": [], "done twice": [], "stray": []}
        for slot_id, old in self.before.items():
            verdict = _verdict(old, after.get(slot_id), owed=slot_id in self.due)
            if verdict is not None:
                verdicts[verdict].append(slot_id)
        lost, twice, stray = verdicts["lost"], verdicts["done twice"], verdicts["stray"]
        return Audit(
            rows_at_risk=rows_at_risk,
            lost=tuple(lost),
            done_twice=tuple(twice),
            stray=tuple(stray),
            became_expired=_became_expired(self.before, after),
            reported_expired=reported_expired,
        )

    def pending(self, statuses: Mapping[UUID, SlotStatus]) -> Collection[UUID]:
        """Due rows not Expired yet (recovery is done when this is empty)."""
        return [i for i in self.due if statuses.get(i) is not SlotStatus.EXPIRED]


def _verdict(old: Row, new: Row | None, *, owed: bool) -> str | None:
    if new is None:  # a deleted row is lost, whatever it was
        return "lost"
    rise = new.version - old.version
    if rise > 1:
        return "done twice"
    if owed and new.status is not SlotStatus.EXPIRED:
        return "lost"
    if (owed and rise != 1) or (not owed and _changed(old, new)):
        return "stray"
    return None


def _changed(old: Row, new: Row) -> bool:
    return (old.status, old.version, old.updated_at) != (new.status, new.version, new.updated_at)


def _became_expired(before: Mapping[UUID, Row], after: Mapping[UUID, Row]) -> int:
    return sum(
        1
        for slot_id, old in before.items()
        if old.status is SlotStatus.AVAILABLE
        and slot_id in after
        and after[slot_id].status is SlotStatus.EXPIRED
    )
