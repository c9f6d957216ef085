"""A drain's progress bar, on a terminal only: Click's bar from the backlog the drain counted
at its start to what it expired, with its rate and ETA beside it (expiry/drain.py).

Off a terminal there is no bar: stderr carries the JSON (or console) log lines only. On one,
the log lines still print, above the bar: each erases the bar's line before it is written,
and the bar draws itself again below it as the next batch moves it (Click redraws a line
only when it changed; a line written between two batches by another thread leaves the bar
off until the next batch).
"""

from __future__ import annotations

import io
import threading
from typing import TYPE_CHECKING, Final, TextIO, cast

import click

from slot_expiration.expiry import BatchCommitted, CycleEnded, DrainProgress, DrainStarted
from slot_expiration.loop import Event
from slot_expiration.options import CycleOptions
from slot_expiration.status.wording import age_text, rate_text

if TYPE_CHECKING:
    from click._termui_impl import ProgressBar  # what click.progressbar returns

# Back to the line's start, and erase it: where a log line goes while the bar is drawn.
ERASE_LINE: Final = "\r\033[K"


def drain_bar(options: CycleOptions, terminal: TextIO) -> DrainBar | None:
    """A bar for a drain's cycles (`--max-batches-per-cycle` other than 1) when `terminal`
    is one; None otherwise: a cycle of one batch, or a pipe, a file, a log collector."""
    if options.max_batches_per_cycle == 1 or not terminal.isatty():
        return None
    return DrainBar(terminal)


def pace_text(drain: DrainProgress) -> str:
    """`8,812 rows/s, ETA 6s` (`ETA >1m 4s` when the count at the start stopped at its cap);
    `starting` before any time has passed, the rate alone until a row was expired."""
    rate, eta = drain.rows_per_second, drain.eta_seconds
    if rate is None:
        return "starting"
    text = rate_text(rate)
    if eta is not None:
        text += f", ETA {'>' if drain.capped else ''}{age_text(eta)}"
    return text


class DrainSeen:
    """A sink that keeps the drain's latest progress: what is left of the count at its
    start, which `once`'s last line reads where the count after the cycle stopped at its
    cap, or where no count followed (a cycle interrupted, or past its budget)."""

    def __init__(self) -> None:
        self.latest: DrainProgress | None = None

    def __call__(self, event: Event) -> None:
        match event:
            case DrainStarted(_, backlog):  # nothing expired yet
                self.latest = DrainProgress(backlog, expired=0, seconds=0.0)
            case BatchCommitted(_, _, DrainProgress() as drain):
                self.latest = drain


class DrainBar:
    """A sink: each drain's cycle draws a bar from its DrainStarted (a backlog counted), moves
    it at each batch committed, and leaves its last state on the terminal when the cycle
    ends, however it ended. `lines` is the stream the log lines are written to meanwhile."""

    def __init__(self, terminal: TextIO) -> None:
        self._terminal = terminal
        self._bar: ProgressBar[str] | None = None
        self._drain: DrainProgress | None = None
        # The native-stderr reader logs from a thread of its own.
        self._lock = threading.Lock()
        # Any text stream will do for the log lines: TextIO's whole protocol is not needed.
        self.lines: TextIO = cast(TextIO, _LinesAbove(self))

    def __call__(self, event: Event) -> None:
        match event:
            case DrainStarted(_, backlog) if backlog > 0:
                self._start(event)
            case BatchCommitted(_, _, DrainProgress() as drain):
                self._advance(drain)
            case CycleEnded(result):
                self._end(f"ended in {age_text(result.duration_ms / 1000.0)}")

    def _start(self, started: DrainStarted) -> None:
        at_least = "at least " if started.capped else ""
        bar: ProgressBar[str] = click.progressbar(
            length=started.backlog,
            label=f"draining {at_least}{started.backlog:,} due",
            show_eta=False,  # the drain's own ETA, as the logs give it, is in the item
            show_pos=True,
            show_percent=True,
            item_show_func=lambda text: text,
            width=0,  # the terminal's width, less the label and the figures
            file=self._terminal,
        )
        with self._lock:
            self._bar, self._drain = bar, None
            self._draw(bar, "starting")

    def _advance(self, drain: DrainProgress) -> None:
        with self._lock:
            if self._bar is None:
                return
            done = 0 if self._drain is None else self._drain.expired
            self._drain = drain
            self._bar.update(drain.expired - done, pace_text(drain))

    def _end(self, how: str) -> None:
        with self._lock:
            bar, self._bar = self._bar, None
            if bar is None:
                return
            # A changed line: Click draws it again even where a log line had just erased it.
            pace = "" if self._drain is None else f"{pace_text(self._drain)}, "
            self._draw(bar, f"{pace}{how}")
            bar.render_finish()

    @staticmethod
    def _draw(bar: ProgressBar[str], item: str) -> None:
        """The bar with `item` beside it, where it stands (Click's update draws only a step
        forward)."""
        bar.current_item = item
        bar.render_progress()

    def write_line(self, text: str, *, at_line_start: bool) -> None:
        with self._lock:
            if self._bar is not None and at_line_start:
                self._terminal.write(ERASE_LINE)
            self._terminal.write(text)

    def flush(self) -> None:
        self._terminal.flush()


class _LinesAbove(io.TextIOBase):
    """The log lines' stream while a bar may be drawn: each line starts by erasing the
    bar's (a line may come in pieces: structlog writes the text, then its newline)."""

    def __init__(self, bar: DrainBar) -> None:
        super().__init__()
        self._bar = bar
        self._at_line_start = True

    def write(self, text: str) -> int:
        if text:
            self._bar.write_line(text, at_line_start=self._at_line_start)
            self._at_line_start = text.endswith("\n")
        return len(text)

    def flush(self) -> None:
        self._bar.flush()

    def writable(self) -> bool:
        return True
