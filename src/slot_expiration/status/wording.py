"""Words for counts and times, as a person reads them: "1 attempt", "2 attempts", "3m 4s"."""

from __future__ import annotations


def count_of(count: int, singular: str, plural: str | None = None) -> str:
    """`1 session`, `0 sessions`, `2 entries` (give `plural` when it is not singular + s)."""
    word = singular if count == 1 else (plural or f"{singular}s")
    return f"{count} {word}"


def due_text(count: int, capped: bool) -> str:
    """`1 Available slot has started`, `5 Available slots have started`, `at least 100000
    Available slots have started` (a count stopped at its cap)."""
    if capped:
        return f"at least {count} Available slots have started"
    verb = "has" if count == 1 else "have"
    return f"{count_of(count, 'Available slot')} {verb} started"


def one_line(text: str) -> str:
    """A database's message on one line: newlines and runs of blanks become one space."""
    return " ".join(text.split())


def age_text(seconds: float) -> str:
    """3d 4h 5m, 4h 5m, 5m 6s or 6s."""
    whole = int(seconds)
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h {minutes}m"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {secs}s" if minutes else f"{secs}s"


def size_text(size_bytes: int) -> str:
    """512 bytes, 340.0 kB, 1.2 GB (powers of 1024, as PostgreSQL's pg_size_pretty)."""
    value, unit = float(size_bytes), "bytes"
    for larger in ("kB", "MB", "GB", "TB"):
        if value < 1024:
            break
        value, unit = value / 1024, larger
    return f"{size_bytes} bytes" if unit == "bytes" else f"{value:.1f} {unit}"


def rate_text(rows_per_second: float) -> str:
    """`8,812 rows/s`; `0.4 rows/s` below ten (a whole number would say 0)."""
    figure = f"{rows_per_second:,.0f}" if rows_per_second >= 10 else f"{rows_per_second:.1f}"
    return f"{figure} rows/s"


def left_text(count: int, capped: bool) -> str:
    """`51,500 left`; `at least 100,000 left` (a count stopped at its cap)."""
    return f"{'at least ' if capped else ''}{count:,} left"
