"""A drain's progress as the installed command shows it: a bar on a terminal (a real
pseudo-terminal), none off one (JSON log lines only), the last line saying why it stopped
and what is left, and the page's rate and ETA in a real browser."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import select
import signal
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from tests.e2e.command import PROGRAM, clean_env, run_command, started
from tests.support.browser import chromium
from tests.support.database import SlotDatabase
from tests.support.slots import DUE_BACKLOG

pytestmark = pytest.mark.e2e

TERMINAL_TIMEOUT_SECONDS = 60.0
# Click's bar and the lines erased above it: the terminal's control sequences.
CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
DRAIN = ("--max-batches-per-cycle", "0", "--batch-size", "500", "--drain-batch-size", "500")


async def _due(db: SlotDatabase, count: int) -> None:
    await db.conn.execute(DUE_BACKLOG, {"now": datetime.now(UTC), "count": count})


def _on_a_terminal(*args: str, stop_at: str | None = None) -> tuple[int, str]:
    """`slot-expiration <args>` with its stdout and stderr on a pseudo-terminal; its exit
    status and all it wrote there. Once it wrote `stop_at`, it gets SIGTERM."""
    leader, follower = pty.openpty()
    process = None
    try:
        process = subprocess.Popen(
            [str(PROGRAM), *args],
            stdin=subprocess.DEVNULL,
            stdout=follower,
            stderr=follower,
            env=clean_env({"COLUMNS": "160"}),
        )
        os.close(follower)
        follower = -1
        chunks: list[bytes] = []
        deadline = time.monotonic() + TERMINAL_TIMEOUT_SECONDS
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([leader], [], [], left)[0]:
                continue  # the deadline passed: the assertion below says what was seen
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the last writer closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
            if stop_at is not None and stop_at.encode() in b"".join(chunks):
                process.send_signal(signal.SIGTERM)
                stop_at = None
        shown = b"".join(chunks).decode()
        assert process.poll() is not None or left > 0, f"still running after the deadline: {shown}"
        return process.wait(TERMINAL_TIMEOUT_SECONDS), shown
    finally:
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        os.close(leader)
        if follower >= 0:
            os.close(follower)


async def test_a_drain_on_a_terminal_shows_a_bar_with_its_rate_and_eta_then_why_it_stopped(
    db: SlotDatabase,
) -> None:
    await _due(db, 3_000)

    code, shown = await asyncio.to_thread(_on_a_terminal, "once", *DRAIN, "--database-url", db.url)

    assert code == 0, shown
    assert "\r\x1b[?25l" in shown  # Click's bar, redrawn in place, cursor hidden meanwhile
    plain = CONTROL.sub("", shown).replace("\r\n", "\n")
    frames = [frame for line in plain.split("\n") for frame in line.split("\r")]
    bars = [frame for frame in frames if frame.startswith("draining 3,000 due")]
    assert len(bars) >= 3, shown  # drawn at the start, moved by the batches, left at the end
    assert any(re.search(r"\d+/3000 .*\d+%.* rows/s, ETA ", bar) for bar in bars), shown
    assert re.search(r"3000/3000 +100%.* rows/s, ETA 0s, ended in ", bars[-1]), bars[-1]
    # The log lines still print, each on a line of its own above the bar.
    assert sum('"event": "batch.selected"' in frame for frame in frames) == 7, shown
    lines = [line for line in plain.split("\n") if line.strip()]
    assert lines[-2].startswith("expired 3000 in 7 batches, "), shown
    assert lines[-1] == "drained: nothing left due", shown


async def test_run_on_a_terminal_draws_a_bar_for_each_drain(db: SlotDatabase) -> None:
    await _due(db, 3_000)

    code, shown = await asyncio.to_thread(
        _on_a_terminal,
        "run",
        *DRAIN,
        "--interval-seconds",
        "1",
        "--database-url",
        db.url,
        stop_at="ended in ",
    )

    assert code == 0, shown
    plain = CONTROL.sub("", shown).replace("\r\n", "\n")
    frames = [frame for line in plain.split("\n") for frame in line.split("\r")]
    bars = [frame for frame in frames if frame.startswith("draining 3,000 due")]
    assert re.search(r"3000/3000 +100%.* rows/s, ETA 0s, ended in ", bars[-1]), shown
    assert '"event": "worker.stopped"' in plain, shown


async def test_off_a_terminal_there_is_no_bar_only_json_lines_that_carry_rate_and_eta(
    db: SlotDatabase,
) -> None:
    await _due(db, 3_000)

    done = await run_command("once", *DRAIN, "--database-url", db.url)

    assert done.returncode == 0, done.describe()
    assert "draining" not in done.stderr
    assert "\x1b" not in done.stderr + done.stdout
    events = done.log_events()  # every stderr line a JSON object: no bar among them
    (count,) = [e for e in events if e["event"] == "drain.started"]
    assert count["backlog"] == 3_000
    batches = [e for e in events if e["event"] == "batch.selected"]
    assert [e["left"] for e in batches] == [2_500, 2_000, 1_500, 1_000, 500, 0, 0]
    assert all(e["rows_per_second"] > 0 for e in batches)
    assert all(e["eta_seconds"] >= 0 for e in batches)
    assert batches[-1]["eta_seconds"] == 0
    assert done.stdout.splitlines()[-1] == "drained: nothing left due"


async def test_a_drain_stopped_at_its_batch_limit_says_so_and_how_many_are_left(
    db: SlotDatabase,
) -> None:
    await _due(db, 3_000)

    done = await run_command(
        "once", *DRAIN[2:], "--max-batches-per-cycle", "2", "--database-url", db.url
    )

    assert done.returncode == 0, done.describe()
    assert done.stdout.splitlines() == [
        done.stdout.splitlines()[0],
        "stopped at the batch limit (2 batches): 2,000 left; "
        "run again or raise --max-batches-per-cycle",
    ]


async def test_a_drain_stopped_at_its_budget_past_the_counts_cap_says_about_how_many_are_left(
    db: SlotDatabase,
) -> None:
    # 300,000 due: a second's budget drains a part (the whole takes seconds), leaving more
    # than the 100,000 the count after a cycle stops at.
    await _due(db, 300_000)

    done = await run_command(
        "once", "--max-batches-per-cycle", "0", "--max-cycle-seconds", "1", "--database-url", db.url
    )

    assert done.returncode == 0, done.describe()
    did, stopped = done.stdout.splitlines()
    counted = re.match(r"expired (\d+)", did)
    assert counted is not None, done.stdout
    expired = int(counted[1])
    assert stopped == (
        f"stopped at the cycle budget (1 s): about {300_000 - expired:,} left; "
        "run again or raise --max-cycle-seconds"
    ), done.stdout


async def test_the_page_and_status_show_the_drains_rate_and_eta(
    db: SlotDatabase, tmp_path: Path
) -> None:
    await _due(db, 3_000)
    once = await run_command(
        "once", *DRAIN[2:], "--max-batches-per-cycle", "2", "--database-url", db.url
    )
    assert once.returncode == 0, once.describe()
    status = await run_command("status", "--database-url", db.url)
    assert status.returncode == 0, status.describe()

    async with started("ui", "--addr", "127.0.0.1:0", "--database-url", db.url) as ui:
        await ui.until(lambda: ui.printed("ui: serving http://"), "serving the page")
        (line,) = [line for line in ui.stdout_lines if "ui: serving " in line]
        page = line.split("serving ", 1)[1].split(" ", 1)[0]

        def look() -> str:
            with chromium(tmp_path / "profile") as driver:
                driver.get(page)
                return str(driver.find_element(By.ID, "drain").text)

        shown = await asyncio.to_thread(look)

    said = re.compile(r"^[\d,.]+ rows/s over the last 15m 0s, 2,000 left, ETA \d")
    assert said.match(shown), shown
    (drain,) = [line for line in status.stdout.splitlines() if line.startswith("drain ")]
    assert said.match(drain.split(maxsplit=1)[1]), status.stdout
