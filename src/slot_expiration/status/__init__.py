"""`slot-expiration status`: what the on-call engineer looks at first."""

from slot_expiration.status.render import render_text
from slot_expiration.status.report import (
    FAILED_SHOWN,
    Quarantine,
    StatusReport,
    Unreadable,
    collect_status,
)

__all__ = [
    "FAILED_SHOWN",
    "Quarantine",
    "StatusReport",
    "Unreadable",
    "collect_status",
    "render_text",
]
