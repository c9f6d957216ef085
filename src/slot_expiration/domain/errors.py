"""The base of every rule rejection of the slot context."""

from __future__ import annotations

from typing import ClassVar


class SlotRuleError(Exception):
    """A request the slot's rules refuse (a guard, an overlap, a forbidden transition).

    `code` is stable (`CAL_SLOT_*`): callers and scripts branch on it, never on
    the message. Nothing was written when one is raised.
    """

    code: ClassVar[str]

    def describe(self) -> str:
        """One line: the code first, then what was refused."""
        return f"{self.code}: {self}"
