"""A database's message as the product keeps and shows it: bounded, its full length noted.

A constraint or a trigger may put anything in a message, a whole row or a document (217 KB
was seen): kept whole, one such message would make every page and listing that shows it as
large. The quarantine and the cycle history store at most MAX_MESSAGE_CHARS characters of
it, and the views show no more (messages stored before the bound included)."""

from __future__ import annotations

from typing import Final

MAX_MESSAGE_CHARS: Final = 500


def excerpt(text: str, length: int | None = None, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`text` when it fits in `limit` characters; else its start and its full length, in
    `limit` characters at most: `new row violates …… (217345 characters)`.

    `length` is the whole message's length when `text` is only its start (a view reads
    no more of a long message than it shows)."""
    whole = len(text) if length is None else length
    if whole <= limit:
        return text
    note = f"… ({whole} characters)"
    return text[: max(limit - len(note), 0)] + note
