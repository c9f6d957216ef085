"""The page gives the deployment's verdict first, the one `status --check` gives, in every state
an on-call meets: healthy, stuck, failing for hours, misconfigured, a fresh install, the
database down. Each state is seeded, then the page is read in a real headless Chromium and
`status --check` run against the same database: their verdicts must be the same line (the
seconds that pass between the two reads aside). A screenshot of each state is kept
(build/test-artifacts/ui-<state>.png; `scripts/ui-screenshot` writes docs/images/ too)."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from slot_expiration.domain import CycleOutcome
from slot_expiration.history.housekeeping import Housekeeping, record_cycle
from slot_expiration.history.store import CycleRecord
from tests.e2e.command import run_command, with_password
from tests.e2e.test_ui import serving
from tests.support.browser import chromium, full_page_png
from tests.support.database import SlotDatabase
from tests.support.history import cycle_record
from tests.support.slots import DUE_BACKLOG, make_slot
from tests.support.tcp_proxy import FreezableProxy

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[2]
ARTIFACTS = ROOT / "build" / "test-artifacts"
REFUSED = "connection to server at 127.0.0.1 failed: Connection refused"
GRANT = (
    "role slot_worker cannot run a cycle: no UPDATE (status) on availability_slots; as the "
    "owner of availability_slots, run `slot-expiration grant --role slot_worker`"
)

# The first error cell of the recent cycles, measured against the window (its table scrolls
# sideways when too wide, which would leave the error off screen).
ERROR_IN_VIEW = """
const cell = document.querySelector("td.message");
if (!cell || !cell.textContent.trim()) { return false; }
const box = cell.getBoundingClientRect();
return box.left >= 0 && box.right <= document.documentElement.clientWidth;
"""


@dataclass(frozen=True, slots=True)
class Looked:
    level: str  # the verdict's class on the page: ok, warning, critical, unknown
    summary: str  # the verdict's line on the page
    text: str  # the page's whole text
    first_section: str  # the id of the first section of <main>
    links: list[str]  # where the verdict's links lead
    error_in_view: bool  # the first error cell of the recent cycles lies wholly in the window
    png: bytes


def _cycles(
    now: datetime,
    hours: float,
    backlog: Callable[[int], int],
    outcome: Callable[[int, str], CycleOutcome] = lambda step, instance: CycleOutcome.SUCCESS,
    expired: Callable[[int], int] = lambda step: 500,
) -> list[CycleRecord]:
    """Two replicas' cycles every 5 minutes over the last `hours`, the oldest first; step 1
    is the latest. `backlog(step)` what each left, `outcome(step, instance)` how it ended,
    `expired(step)` how many a success expired (at most the backlog and what started since)."""
    records = []
    for step in range(round(hours * 12), 0, -1):
        ended = now - timedelta(minutes=5 * step) + timedelta(seconds=20)
        for instance, offset in (("worker-a:4711", 0), ("worker-b:4712", 90)):
            ended_as = outcome(step, instance)
            failed = ended_as is not CycleOutcome.SUCCESS
            records.append(
                cycle_record(
                    ended + timedelta(seconds=offset),
                    ended_as,
                    instance=instance,
                    expired=0 if failed else min(expired(step), backlog(step) + 40),
                    backlog=None if ended_as is CycleOutcome.FAILED else backlog(step),
                    sqlstate={
                        CycleOutcome.FAILED: "08001",
                        CycleOutcome.MISCONFIGURED: "42501",
                    }.get(ended_as),
                    error=REFUSED if ended_as is CycleOutcome.FAILED else GRANT,
                )
            )
    return records


async def _record(db: SlotDatabase, records: list[CycleRecord]) -> None:
    history = Housekeeping(db.url, timedelta(days=14))
    for record in records:
        await record_cycle(history, record)


async def _healthy(db: SlotDatabase, now: datetime) -> None:
    """Six hours of two replicas draining a small backlog every 5 minutes."""
    await db.insert([make_slot(timedelta(minutes=-m), as_of=now) for m in (1, 2, 3, 4)])
    await _record(db, _cycles(now, 6, lambda step: 3 + step % 5))


async def _stuck(db: SlotDatabase, now: datetime) -> None:
    """A backlog that rose to 6000 and has stood there for the last hour and a half: the
    cycles succeed, expiring nothing (its rows are locked elsewhere)."""
    await db.conn.execute(DUE_BACKLOG, {"now": now, "count": 6_000})
    await _record(
        db, _cycles(now, 6, lambda step: 6_000 if step <= 18 else max(0, 9_000 - 100 * step))
    )


async def _failing(db: SlotDatabase, now: datetime) -> None:
    """Every cycle of both replicas has failed the same way for the last 3 hours and more."""
    await db.insert([make_slot(timedelta(minutes=-m), as_of=now) for m in range(1, 41)])

    def outcome(step: int, instance: str) -> CycleOutcome:
        return CycleOutcome.FAILED if step <= 37 else CycleOutcome.SUCCESS

    await _record(db, _cycles(now, 6, lambda step: 40, outcome))


async def _misconfigured(db: SlotDatabase, now: datetime) -> None:
    """worker-b lost a grant 10 minutes ago; worker-a still works."""
    await db.insert([make_slot(timedelta(minutes=-m), as_of=now) for m in (1, 2)])

    def outcome(step: int, instance: str) -> CycleOutcome:
        bad = instance == "worker-b:4712" and step <= 2
        return CycleOutcome.MISCONFIGURED if bad else CycleOutcome.SUCCESS

    await _record(db, _cycles(now, 6, lambda step: 2, outcome))


async def _paused(db: SlotDatabase, now: datetime) -> None:
    """Paused 36 minutes ago for two hours and a half (a database upgrade): both replicas'
    cycles since were recorded `paused`, the last success before it 40 minutes ago."""
    await db.insert([make_slot(timedelta(minutes=-m), as_of=now) for m in (1, 2, 3)])

    def outcome(step: int, instance: str) -> CycleOutcome:
        return CycleOutcome.PAUSED if step <= 7 else CycleOutcome.SUCCESS

    await _record(db, _cycles(now, 6, lambda step: 3, outcome))
    await db.execute(
        "INSERT INTO slot_expiration_pauses (paused_at, paused_by, paused_until, reason) "
        "VALUES (%s, 'ops', %s, 'calendar database upgrade, ticket OPS-1234')",
        now - timedelta(minutes=36),
        now + timedelta(hours=2, minutes=54),
    )


async def _fresh(db: SlotDatabase, now: datetime) -> None:
    """Migrated, and nothing has run yet."""
    del db, now


Seed = Callable[[SlotDatabase, datetime], Awaitable[None]]
RUNBOOK = "https://runbooks.example.com/slot-expiration#"
HUNG, MISCONFIGURED = "worker-hung-or-backlog-growing", "the-worker-is-misconfigured"
PAUSED = "the-worker-is-paused"
STATES: dict[str, tuple[Seed, str, str, list[str]]] = {
    # state: (seed, the page's verdict class, the start of the verdict's line, the runbook's
    # sections its findings lead to)
    "healthy": (_healthy, "ok", "OK: last success ", []),
    "stuck": (_stuck, "warning", "WARNING: backlog 6000 > 5000, not down over 30m 0s", [HUNG]),
    "failing": (_failing, "critical", "CRITICAL: no successful cycle for 3h ", [HUNG]),
    "misconfigured": (
        _misconfigured,
        "critical",
        "CRITICAL: worker-b:4712 is misconfigured: role slot_worker cannot run a cycle",
        [MISCONFIGURED],
    ),
    "paused": (_paused, "warning", "WARNING: paused by ops until ", [PAUSED]),
    "fresh": (
        _fresh,
        "critical",
        "CRITICAL: no cycle in the history: no worker has run here yet",
        [HUNG],
    ),
}


def _look(page: str, profile: Path) -> Looked:
    with chromium(profile) as driver:
        driver.get(page)
        verdict = driver.find_element(By.ID, "verdict")
        first = driver.find_element(By.CSS_SELECTOR, "main > section")
        return Looked(
            level=(verdict.get_attribute("class") or "").removeprefix("verdict "),
            summary=str(driver.find_element(By.ID, "verdict-summary").text),
            text=str(driver.find_element(By.TAG_NAME, "body").text),
            first_section=first.get_attribute("id") or "",
            links=[a.get_attribute("href") or "" for a in verdict.find_elements(By.TAG_NAME, "a")],
            error_in_view=bool(driver.execute_script(ERROR_IN_VIEW)),
            png=full_page_png(driver),
        )


def _save(state: str, png: bytes) -> None:
    """A test artifact, always; docs/images/ui-<state>.png too when scripts/ui-screenshot
    asks (UI_SCREENSHOTS: the folder)."""
    assert png.startswith(b"\x89PNG")
    folders = [
        ARTIFACTS,
        *([Path(os.environ["UI_SCREENSHOTS"])] if "UI_SCREENSHOTS" in os.environ else []),
    ]
    for folder in folders:
        path = folder if folder.is_absolute() else ROOT / folder
        path.mkdir(parents=True, exist_ok=True)
        (path / f"ui-{state}.png").write_bytes(png)


def _same_line(page: str, check: str) -> bool:
    """A verdict's line with its durations' numbers left out: the page and the check read a
    moment apart."""
    return re.sub(r"\b\d+([dhms])\b", r"#\1", page) == re.sub(r"\b\d+([dhms])\b", r"#\1", check)


@pytest.mark.parametrize("state", STATES)
async def test_the_pages_verdict_comes_first_and_is_the_checks_in_each_state(
    db: SlotDatabase, secret_url: str, tmp_path: Path, state: str
) -> None:
    seed, level, line, sections = STATES[state]
    await seed(db, datetime.now(UTC))

    async with serving(secret_url) as page:
        looked = await asyncio.to_thread(_look, page, tmp_path / "profile")
    check = await run_command("status", "--check", "--database-url", secret_url)

    _save(state, looked.png)
    assert looked.first_section == "verdict"
    assert looked.level == level
    assert looked.summary.startswith(line), looked.summary
    (checked,) = check.stdout.splitlines()
    assert _same_line(looked.summary, checked), (looked.summary, checked)
    assert check.returncode == {"ok": 0, "warning": 1, "critical": 2}[level]
    # What to do: the runbook's part on verdicts, then each finding's section.
    assert looked.links == [f"{RUNBOOK}what-the-verdict-says"] + [RUNBOOK + s for s in sections]


async def test_a_failing_deployments_page_folds_its_identical_failures_into_one_row(
    db: SlotDatabase, secret_url: str, tmp_path: Path
) -> None:
    await _failing(db, datetime.now(UTC))

    async with serving(secret_url) as page:
        looked = await asyncio.to_thread(_look, page, tmp_path / "profile")

    assert re.search(r"failed 74\u00d7 since \d\d:\d\d UTC", looked.text), looked.text
    assert looked.text.count(REFUSED) == 1
    assert "Last success\n3h " in looked.text
    assert looked.error_in_view  # at 1280 px, the folded row's replicas one per line


async def test_a_paused_deployments_page_shows_the_pause_and_folds_its_paused_cycles(
    db: SlotDatabase, secret_url: str, tmp_path: Path
) -> None:
    await _paused(db, datetime.now(UTC))

    async with serving(secret_url) as page:
        looked = await asyncio.to_thread(_look, page, tmp_path / "profile")

    assert re.search(
        r"\nPause\npaused by ops until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC, for \d+m \d+s so far: "
        r"calendar database upgrade, ticket OPS-1234\n",
        looked.text,
    ), looked.text
    assert re.search(r"paused 14\u00d7 since \d\d:\d\d UTC", looked.text), looked.text


async def test_with_the_database_down_the_pages_verdict_is_the_checks_unknown(
    db: SlotDatabase, secret_url: str, tmp_path: Path
) -> None:
    await _healthy(db, datetime.now(UTC))
    async with FreezableProxy.serving(secret_url) as proxy:
        through = proxy.url_through(secret_url)
        async with serving(through) as page:
            await proxy.close()  # the database is gone: every connection is refused
            looked = await asyncio.to_thread(_look, page, tmp_path / "profile")
            check = await run_command("status", "--check", "--database-url", through)

    _save("database-down", looked.png)
    assert (looked.first_section, looked.level) == ("verdict", "unknown")
    assert looked.summary.startswith("UNKNOWN: cannot connect to the database (postgresql://")
    assert check.returncode == 3
    assert check.stdout.splitlines() == [looked.summary]


async def test_a_database_never_migrated_is_served_and_its_verdict_is_the_checks_critical(
    empty_database_url: str, tmp_path: Path
) -> None:
    """`ui` refused to start there, and `status --check` said UNKNOWN."""
    url = with_password(empty_database_url)

    async with serving(url) as page:
        looked = await asyncio.to_thread(_look, page, tmp_path / "profile")
    check = await run_command("status", "--check", "--database-url", url)

    _save("never-migrated", looked.png)
    assert (looked.first_section, looked.level) == ("verdict", "critical")
    assert looked.summary == (
        "CRITICAL: the database was never migrated: run `slot-expiration migrate` (it creates "
        "availability_slots and the worker's tables)"
    )
    assert check.returncode == 2
    assert check.stdout.splitlines() == [looked.summary]
    assert looked.links == [f"{RUNBOOK}what-the-verdict-says", f"{RUNBOOK}{MISCONFIGURED}"]
    assert "Schema\nnone: the database was never migrated" in looked.text


# -- the page at 1280 px and on a phone (390 px) --------------------------------------------

# Test-side SQL: `count` due slots in quarantine, each rejected with a message as a check
# constraint words it, the row quoted (as much as the quarantine keeps: 500 characters).
REJECTED = """
WITH slots AS (
    INSERT INTO availability_slots
    SELECT gen_random_uuid(), gen_random_uuid(), gen_random_uuid(),
           now() - i * interval '1 minute', now() - i * interval '1 minute' + interval '30 minutes',
           'Available', 1, now(), now()
    FROM generate_series(1, %(count)s) AS i
    RETURNING id, tenant_id
)
INSERT INTO slot_expiration_failures
    (slot_id, attempts, first_failed_at, last_failed_at, next_attempt_at, sqlstate, message)
SELECT id, 3, now() - interval '2 hours', now(), now() + interval '20 minutes', '23514',
       left('new row for relation "availability_slots" violates check constraint '
            || '"slot_expiry_audited" DETAIL: Failing row contains (' || id || ', '
            || tenant_id || ', ' || repeat('Available, 2026-12-02 11:00:00+00, ', 12) || ')', 500)
FROM slots
"""

# Every table: whether it scrolls sideways inside its box, whether that box stays inside its
# card, and each cell's rendered width and whether its text overflows it.
LAYOUT = """
const view = document.documentElement.clientWidth;
return {
  view: view,
  page_overflow: document.documentElement.scrollWidth - view,
  verdict_right: document.getElementById("verdict").getBoundingClientRect().right,
  tables: [...document.querySelectorAll("div.table")].map(box => {
    const card = box.closest("section").getBoundingClientRect();
    const own = box.getBoundingClientRect();
    return {
      card: box.closest("section").querySelector("h2").textContent.trim(),
      scrolls: box.scrollWidth > box.clientWidth + 1,
      widths: [box.scrollWidth, box.clientWidth],
      inside_card: own.left >= card.left - 0.5 && own.right <= card.right + 0.5,
      cells: [...box.querySelectorAll("tbody th, tbody td")].map(cell => ({
        kind: cell.className,
        width: cell.getBoundingClientRect().width,
        cut: cell.scrollWidth > cell.clientWidth + 1,
        text: cell.textContent.trim().slice(0, 40),
      })),
    };
  }),
};
"""
# A message or an error readable at 1280 px: some 30 characters a line, not 4.
MESSAGE_MIN_PX = 240
PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True}


def _layout(page: str, profile: Path, phone: bool, state: str) -> dict[str, Any]:
    with chromium(profile) as driver:
        if phone:
            driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", PHONE)
        driver.get(page)
        found: dict[str, Any] = driver.execute_script(LAYOUT)
        if phone:
            height = int(driver.execute_script("return document.documentElement.scrollHeight"))
            driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", PHONE | {"height": height})
            _save(state, driver.get_screenshot_as_png())
        else:
            _save(state, full_page_png(driver))
        return found


async def test_every_column_is_readable_at_1280_px_and_tables_scroll_in_their_card_on_a_phone(
    db: SlotDatabase, secret_url: str, tmp_path: Path, closed_port: int
) -> None:
    """0.3.0 cut the quarantine's Message column to some 4 characters at 1280 px and left a
    folded failure's error at the card's edge."""
    await _failing(db, datetime.now(UTC))
    await db.conn.execute(REJECTED, {"count": 3})
    replicas = ("--replicas", f"127.0.0.1:{closed_port},localhost:{closed_port}")

    async with serving(secret_url, args=replicas) as page:
        wide = await asyncio.to_thread(_layout, page, tmp_path / "wide", False, "columns-1280")
        phone = await asyncio.to_thread(_layout, page, tmp_path / "phone", True, "phone-390")

    assert wide["view"] == 1280
    assert wide["page_overflow"] <= 0
    assert {t["card"] for t in wide["tables"]} == {"Replicas", "Recent cycles", "Quarantine"}
    for table in wide["tables"]:
        assert not table["scrolls"], (table["card"], table["widths"])  # within the card
        assert table["inside_card"], table["card"]
        for cell in table["cells"]:
            assert not cell["cut"], (table["card"], cell)
            if "message" in cell["kind"] and cell["text"]:
                assert cell["width"] >= MESSAGE_MIN_PX, (table["card"], cell)
    assert phone["view"] == PHONE["width"]
    assert phone["page_overflow"] <= 0  # the page itself never scrolls sideways
    assert phone["verdict_right"] <= PHONE["width"]
    for table in phone["tables"]:
        assert table["inside_card"], table["card"]
    assert any(table["scrolls"] for table in phone["tables"])  # a wide one scrolls inside
