"""`slot-expiration demo`: a private server, the real worker, and nothing left behind."""

from __future__ import annotations

import re
import shutil
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from slot_expiration.domain import SlotStatus
from tests.e2e.command import (
    Running,
    child_server_data_dir,
    eventually,
    kill_servers_in,
    processes_mentioning,
    run_command,
    started,
)
from tests.e2e.endpoint import get, sample
from tests.support.database import SlotDatabase

pytestmark = pytest.mark.e2e

DEMO_TIMEOUT_SECONDS = 90.0
SERVER_LINE = re.compile(r"^embedded PostgreSQL on 127\.0\.0\.1:\d+ \(data in (?P<data>.+)\)$")
SEEDED_LINE = re.compile(r"^seeded \d+ slots; (?P<backlog>\d+) are Available with a past start$")
CYCLE_LINE = re.compile(
    r"^  cycle (?P<n>\d+): expired\s+(?P<expired>\d+), skipped \(locked\) \d+, "
    r"\s*[\d.]+ ms, backlog left (?P<left>-?\d+)$"
)
STATUSES = ("Available", "Booked", "Expired", "Archived")
PUBLISHED_LINE = re.compile(
    r"^published (?P<total>\d+) slots for \d+ consultants through the publish operation, "
    r"its clock set back to \d{4}-\d\d-\d\d \d\d:\d\d UTC; "
    r"booked (?P<booked>\d+), archived (?P<archived>\d+)$"
)
REFUSED_LINE = re.compile(
    r"^booking the oldest past slot (?P<id>[0-9a-f-]{36}) now: refused, "
    r"CAL_SLOT_NOT_AVAILABLE: slot (?P=id) is not available for booking: it is Expired$"
)


def data_dir_of(lines: list[str]) -> Path:
    for line in lines:
        if match := SERVER_LINE.match(line):
            return Path(match["data"])
    raise AssertionError(f"no 'data in <path>' line in: {lines}")


def counts_table(lines: list[str]) -> dict[str, tuple[int, int]]:
    """The before/after table at the end: {status: (before, after)}."""
    header = next(
        i for i, line in enumerate(lines) if line.split() == ["status", "before", "after"]
    )
    table: dict[str, tuple[int, int]] = {}
    for line in lines[header + 1 : header + 1 + len(STATUSES)]:
        status, before, after = line.split()
        table[status] = (int(before), int(after))
    assert tuple(table) == STATUSES, lines
    return table


async def assert_server_gone(data_dir: Path) -> None:
    """No process runs on the demo's data folder any more, and the folder is removed."""
    root = data_dir.parent

    def gone() -> bool:
        return not processes_mentioning(str(root))

    # A server stopped with `pg_ctl -w` is gone already; the deadline only bounds a failure.
    try:
        await eventually(gone, "gone", timeout_seconds=3)
    except AssertionError:
        left = "\n".join(" ".join(args) for args in processes_mentioning(str(root)).values())
        raise AssertionError(f"the demo left processes on {root}:\n{left}") from None
    assert not root.exists(), f"the demo left its data folder {root}"


@asynccontextmanager
async def cleaned_up(root: Path) -> AsyncIterator[None]:
    """Whatever the test found, leave no server nor data folder of its demo behind."""
    try:
        yield
    finally:
        await kill_servers_in(root)
        shutil.rmtree(root, ignore_errors=True)


async def test_demo_seeds_runs_the_worker_shows_counts_and_stops_its_server() -> None:
    done = await run_command(
        "demo", "--interval-seconds", "1", timeout_seconds=DEMO_TIMEOUT_SECONDS
    )

    lines = done.stdout.splitlines()
    data_dir = data_dir_of(lines)
    async with cleaned_up(data_dir.parent):
        assert done.returncode == 0, done.describe()
        assert done.stderr == "", done.describe()
        published = next(m for line in lines if (m := PUBLISHED_LINE.match(line)))
        seeded = next(m for line in lines if (m := SEEDED_LINE.match(line)))
        cycles = [m for line in lines if (m := CYCLE_LINE.match(line))]
        assert [int(m["n"]) for m in cycles] == list(range(1, len(cycles) + 1))
        assert cycles, done.describe()
        expired = sum(int(m["expired"]) for m in cycles)
        assert expired == int(seeded["backlog"])  # the whole backlog, within --max-cycles
        assert int(cycles[-1]["left"]) == 0
        table = counts_table(lines)
        assert table["Expired"][1] > table["Expired"][0]
        assert table["Available"][1] < table["Available"][0]
        assert table["Expired"][1] - table["Expired"][0] == expired
        assert table["Available"][0] - table["Available"][1] == expired
        assert table["Booked"][0] == table["Booked"][1] == int(published["booked"])
        assert table["Archived"][0] == table["Archived"][1] == int(published["archived"])
        assert sum(before for before, _ in table.values()) == int(published["total"])
        assert any(REFUSED_LINE.match(line) for line in lines), done.describe()
        assert lines[-1] == "stopping the embedded PostgreSQL"
        await assert_server_gone(data_dir)


METRICS_LINE = re.compile(
    r"^worker: metrics on (?P<url>http://127\.0\.0\.1:\d+)/metrics \(also /healthz, /readyz\)$"
)


async def test_the_demo_serves_metrics_while_it_runs_and_prints_where() -> None:
    async with started("demo", "--interval-seconds", "30", "--max-cycles", "2") as demo:
        await demo.until(lambda: demo.printed("cycle 1"), "the first cycle printed")
        data_dir = data_dir_of(demo.stdout_lines)
        async with cleaned_up(data_dir.parent):
            url = next(m["url"] for line in demo.stdout_lines if (m := METRICS_LINE.match(line)))
            cycle = next(m for line in demo.stdout_lines if (m := CYCLE_LINE.match(line)))
            status, metrics = await get(f"{url}/metrics")
            health, _ = await get(f"{url}/healthz")
            ready, _ = await get(f"{url}/readyz")
            demo.send_signal(signal.SIGINT)
            done = await demo.wait(timeout_seconds=20)
            await assert_server_gone(data_dir)

    assert done.returncode in (0, 130), done.describe()
    assert (status, health, ready) == (200, 200, 200)
    assert sample(metrics, "calendar_slot_expiration_items_total") == int(cycle["expired"])
    assert sample(metrics, "calendar_slot_expiration_backlog") == int(cycle["left"])


async def test_sigint_while_the_demo_waits_for_its_next_tick_stops_it_and_its_server() -> None:
    async with started("demo", "--interval-seconds", "30", "--max-cycles", "5") as demo:
        await demo.until(lambda: demo.printed("cycle 1"), "the first cycle printed")
        data_dir = data_dir_of(demo.stdout_lines)
        async with cleaned_up(data_dir.parent):
            demo.send_signal(signal.SIGINT)
            done = await demo.wait(timeout_seconds=20)  # well before the next 30 s tick

            assert done.returncode in (0, 130), done.describe()
            assert "cycle 2" not in done.stdout
            assert "Traceback" not in done.stderr
            await assert_server_gone(data_dir)


async def test_sigint_while_the_demo_starts_its_server_leaves_no_server_behind() -> None:
    async with started("demo", "--interval-seconds", "30") as demo:
        data_dir = await _server_being_started(demo)
        async with cleaned_up(data_dir.parent):
            demo.send_signal(signal.SIGINT)
            done = await demo.wait(timeout_seconds=30)

            assert done.returncode in (0, 130), done.describe()
            assert "Traceback" not in done.stderr
            await assert_server_gone(data_dir)


async def _server_being_started(demo: Running) -> Path:
    """The data folder of the server the demo has just launched (likely not ready yet)."""
    found: list[Path] = []

    def launched() -> bool:
        if (data_dir := child_server_data_dir(demo.pid)) is not None:
            found.append(data_dir)
        return bool(found)

    # A tight poll: the window between launch and "ready" is a fraction of a second.
    await eventually(launched, "the server launched", 30, alive=demo, poll_seconds=0.005)
    return found[0]


async def test_demo_ignores_the_worker_database_url_in_the_environment(
    db: SlotDatabase, secret_url: str
) -> None:
    """The demo writes demo rows: only into a database named on its own command line."""
    done = await run_command(
        "demo",
        "--interval-seconds",
        "1",
        env={"SLOT_EXPIRATION_DATABASE_URL": secret_url},
        timeout_seconds=DEMO_TIMEOUT_SECONDS,
    )

    lines = done.stdout.splitlines()
    if any(SERVER_LINE.match(line) for line in lines):
        async with cleaned_up(data_dir_of(lines).parent):
            await assert_server_gone(data_dir_of(lines))
    assert done.returncode == 0, done.describe()
    assert await db.rows() == {}, "the demo seeded and expired the database in the environment"
    assert lines[0].startswith("embedded PostgreSQL on "), done.describe()


async def test_the_demo_runs_twice_on_one_database_through_the_slot_operations(
    db: SlotDatabase,
) -> None:
    """Each run publishes for new agencies and consultants: nothing of the first run is in
    the way of the second (the publish operation would refuse an overlap)."""
    runs = [
        await run_command(
            "demo",
            "--interval-seconds",
            "1",
            "--database-url",
            db.url,
            timeout_seconds=DEMO_TIMEOUT_SECONDS,
        )
        for _ in range(2)
    ]

    for done in runs:
        assert done.returncode == 0, done.describe()
        assert any(REFUSED_LINE.match(line) for line in done.stdout.splitlines())
    statuses = list((await db.statuses()).values())
    assert len(statuses) == 2 * 2_350
    assert statuses.count(SlotStatus.EXPIRED) == 2 * 1_800
