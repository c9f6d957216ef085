"""The deployment's pause: a row in slot_expiration_pauses that every replica reads at each
tick (store, pause.sql); `slot-expiration pause` and `resume` write it, the cycle, `status`
and the page read it."""

from slot_expiration.pause.store import (
    LIMIT_WITHOUT_END,
    LONGEST,
    PAUSES,
    REASON_MAX_CHARS,
    AlreadyPausedError,
    EndedPause,
    Pause,
    PauseStore,
    moment_text,
    span_text,
)

__all__ = [
    "LIMIT_WITHOUT_END",
    "LONGEST",
    "PAUSES",
    "REASON_MAX_CHARS",
    "AlreadyPausedError",
    "EndedPause",
    "Pause",
    "PauseStore",
    "moment_text",
    "span_text",
]
