"""`slot-expiration ui`: the page in a real headless Chromium (JavaScript on and off),
everything escaped, bounded, read-only, optional basic authentication (its verdict in each
state: test_ui_verdicts.py)."""

from __future__ import annotations

import asyncio
import base64
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

import aiohttp
import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By

from slot_expiration.domain import CycleOutcome
from slot_expiration.embedded import EmbeddedPostgres
from slot_expiration.history.housekeeping import Housekeeping, record_cycle
from slot_expiration.history.store import CycleRecord
from slot_expiration.schema.grants import GrantMode, grant_privileges
from tests.e2e.command import PASSWORD, Running, run_command, started
from tests.support.browser import chromium, full_page_png
from tests.support.database import SlotDatabase
from tests.support.history import cycle_record
from tests.support.roles import password_role
from tests.support.slots import make_slot

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[2]
ARTIFACT = ROOT / "build" / "test-artifacts" / "ui.png"  # the six hours below, for a look
HTTP_TIMEOUT = aiohttp.ClientTimeout(total=15)
HOSTILE = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"
UI_ENV = {"SLOT_EXPIRATION_UI_USER": "oncall", "SLOT_EXPIRATION_UI_PASSWORD": "ui-Secret-7"}


@dataclass(frozen=True, slots=True)
class Seeded:
    quarantined: UUID  # a slot the database keeps rejecting
    parked: UUID
    instance: str  # the worker instance of the latest success


async def _seed(db: SlotDatabase, now: datetime, message: str = "") -> Seeded:
    """Six hours of two replicas' cycles (a backlog that rose and was drained, a grant
    revoked for a while on one), and two quarantined slots, one of them parked."""
    poison = make_slot(timedelta(hours=-7), as_of=now)
    parked = make_slot(timedelta(hours=-5), as_of=now)
    due = [make_slot(timedelta(minutes=-m), as_of=now) for m in (1, 2)]
    await db.insert([poison, parked, *due])
    check = 'violates check constraint "ck_slots_consultant_active"'
    await _quarantine(
        db,
        poison.id,
        now - timedelta(minutes=12),
        (4, "23514"),
        message or f'new row for relation "availability_slots" {check}',
    )
    await _quarantine(
        db,
        parked.id,
        now - timedelta(hours=2),
        (7, "P0001"),
        "slot refuses to expire",
        parked_at=now - timedelta(hours=1),
    )
    housekeeping = Housekeeping(db.url, timedelta(days=14))
    for record in _six_hours(now):
        await record_cycle(housekeeping, record)
    return Seeded(poison.id, parked.id, "worker-a:4711")


def _six_hours(now: datetime) -> list[CycleRecord]:
    records = []
    for step in range(72, 0, -1):  # every 5 minutes, the oldest first
        ended = now - timedelta(minutes=5 * step) + timedelta(seconds=20)
        backlog = max(0, 6_400 - abs(step - 40) * 260) if 18 < step < 62 else 3 + step % 4
        for instance, offset in (("worker-a:4711", 0), ("worker-b:4712", 90)):
            outcome = CycleOutcome.SUCCESS
            if instance == "worker-b:4712" and 5 <= step <= 6:
                outcome = CycleOutcome.MISCONFIGURED
            records.append(
                cycle_record(
                    ended + timedelta(seconds=offset),
                    outcome,
                    instance=instance,
                    expired=0 if outcome is not CycleOutcome.SUCCESS else min(500, backlog + 40),
                    backlog=backlog,
                    sqlstate="42501" if outcome is CycleOutcome.MISCONFIGURED else None,
                    error="role slot_worker cannot run a cycle: no UPDATE (version) on "
                    "availability_slots",
                )
            )
    return records


async def _quarantine(
    db: SlotDatabase,
    slot_id: UUID,
    failed_at: datetime,
    failure: tuple[int, str],  # attempts, SQLSTATE
    message: str,
    *,
    parked_at: datetime | None = None,
) -> None:
    attempts, sqlstate = failure
    await db.conn.execute(
        "INSERT INTO slot_expiration_failures (slot_id, attempts, first_failed_at, "
        "last_failed_at, next_attempt_at, sqlstate, message, parked_at) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        (
            slot_id,
            attempts,
            failed_at - timedelta(hours=6),
            failed_at,
            failed_at + timedelta(hours=1),
            sqlstate,
            message,
            parked_at,
        ),
    )


@asynccontextmanager
async def serving(
    url: str, env: dict[str, str] | None = None, args: tuple[str, ...] = ()
) -> AsyncIterator[str]:
    """`slot-expiration ui` (with `args`) on a free port; yields the page's URL it printed."""
    async with started("ui", "--addr", "127.0.0.1:0", *args, "--database-url", url, env=env) as ui:
        yield await _page_url(ui)


async def _page_url(ui: Running) -> str:
    await ui.until(lambda: ui.printed("ui: serving http://"), "serving the page")
    (line,) = [line for line in ui.stdout_lines if "ui: serving " in line]
    return line.split("serving ", 1)[1].split(" ", 1)[0]


async def _get(url: str, **headers: str) -> tuple[int, dict[str, str], str]:
    async with (
        aiohttp.ClientSession(timeout=HTTP_TIMEOUT) as session,
        session.get(url, headers=headers) as reply,
    ):
        return reply.status, dict(reply.headers), await reply.text()


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _text(driver: WebDriver) -> str:
    return str(driver.find_element(By.TAG_NAME, "body").text)


async def test_the_page_shows_cycles_backlog_quarantine_and_schema_in_a_real_browser(
    db: SlotDatabase, tmp_path: Path
) -> None:
    seeded = await _seed(db, datetime.now(UTC))

    async with serving(db.url) as page:

        def look() -> tuple[str, str, list[str], int, str, bytes]:
            with chromium(tmp_path / "profile") as driver:
                driver.get(page)
                lang = driver.find_element(By.TAG_NAME, "html").get_attribute("lang") or ""
                scopes = [
                    th.get_attribute("scope") or ""
                    for th in driver.find_elements(By.CSS_SELECTOR, "thead th")
                ]
                dots = len(driver.find_elements(By.CSS_SELECTOR, "svg circle"))
                # A rule of the installed page.css, applied: the stylesheet shipped and loaded.
                radius = driver.execute_script(
                    "return getComputedStyle(document.querySelector('section')).borderRadius"
                )
                return lang, _text(driver), scopes, dots, str(radius), full_page_png(driver)

        lang, text, scopes, dots, radius, png = await asyncio.to_thread(look)

    assert lang == "en"
    assert "Recent cycles" in text
    assert f"{seeded.instance}" in text
    assert "misconfigured" in text  # worker-b's revoked grant, with why
    assert "no UPDATE (version)" in text
    assert str(seeded.quarantined) in text
    assert "parked since" in text
    assert "ck_slots_consultant_active" in text
    assert "What to read next" in text
    assert "in quarantine since" in text
    assert set(scopes) == {"col"}
    assert dots >= 60  # the backlog's points over six hours
    assert radius == "6px"  # page.css: section { border-radius: 6px }
    assert png.startswith(b"\x89PNG")
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACT.write_bytes(png)


# Test-side SQL: `count` slots in quarantine whose messages were stored whole, 217 KB each
# (as a release before the bound stored them).
LONG_MESSAGES = """
WITH slots AS (
    INSERT INTO availability_slots
    SELECT gen_random_uuid(), gen_random_uuid(), gen_random_uuid(),
           now() - i * interval '1 minute', now() - i * interval '1 minute' + interval '30 minutes',
           'Available', 1, now(), now()
    FROM generate_series(1, %(count)s) AS i
    RETURNING id
)
INSERT INTO slot_expiration_failures
    (slot_id, attempts, first_failed_at, last_failed_at, next_attempt_at, sqlstate, message)
SELECT id, 2, now(), now(), now() + interval '5 minutes', '23514',
       'new row violates check constraint: ' || repeat('x', 217000)
FROM slots
"""
PAGE_BYTES = 200_000


@pytest.mark.parametrize("count", [1, 100])
async def test_rejection_messages_of_217_kb_leave_the_page_and_the_listing_under_200_kb(
    db: SlotDatabase, secret_url: str, count: int
) -> None:
    await _seed(db, datetime.now(UTC))
    await db.conn.execute(LONG_MESSAGES, {"count": count})

    async with serving(db.url) as page:
        status, _, html = await _get(page)
    listing = await run_command("quarantine", "list", "--database-url", secret_url)
    as_json = await run_command("quarantine", "list", "--json", "--database-url", secret_url)

    assert status == 200
    assert len(html.encode()) < PAGE_BYTES
    assert "… (217035 characters)" in html
    assert len(listing.stdout.encode()) < PAGE_BYTES, listing.describe()[:300]
    assert len(as_json.stdout.encode()) < PAGE_BYTES
    assert "… (217035 characters)" in listing.stdout


async def test_the_page_works_with_javascript_off(db: SlotDatabase, tmp_path: Path) -> None:
    seeded = await _seed(db, datetime.now(UTC))
    probe = (
        "data:text/html,<p id=p>off</p>"
        "<script>document.getElementById('p').textContent='on'</script>"
    )

    async with serving(db.url) as page:

        def look() -> tuple[str, str]:
            with chromium(tmp_path / "profile", javascript=False) as driver:
                driver.get(probe)
                scripting = _text(driver)
                driver.get(page)
                return scripting, _text(driver)

        scripting, text = await asyncio.to_thread(look)

    assert scripting == "off"  # this browser runs no script at all
    assert str(seeded.quarantined) in text
    assert seeded.instance in text
    assert "Backlog over the last hours" in text


async def test_a_hostile_message_and_instance_are_shown_as_text_never_run(
    db: SlotDatabase, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    await _seed(db, now, message=HOSTILE)
    await record_cycle(
        Housekeeping(db.url, timedelta(days=14)),
        cycle_record(now, CycleOutcome.FAILED, instance="<b id=evil>evil</b>", error=HOSTILE),
    )

    async with serving(db.url) as page:
        status, _, html = await _get(page)

        def look() -> tuple[str, str, int, int]:
            with chromium(tmp_path / "profile") as driver:
                driver.get(page)
                return (
                    driver.title,
                    _text(driver),
                    len(driver.find_elements(By.CSS_SELECTOR, "script, img")),
                    len(driver.find_elements(By.ID, "evil")),
                )

        title, text, injected, evil = await asyncio.to_thread(look)

    assert status == 200
    assert HOSTILE not in html
    assert "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;" in html
    assert (title.endswith(" · slot-expiration"), injected, evil) == (True, 0, 0)
    assert "pwned" not in title
    assert "<script>document.title='pwned'</script>" in text  # shown, as text
    assert "<b id=evil>evil</b>" in text


async def test_the_page_runs_as_the_read_only_role_and_reads_every_part(
    db: SlotDatabase, pg_server: EmbeddedPostgres
) -> None:
    seeded = await _seed(db, datetime.now(UTC))
    with password_role(pg_server) as role:
        await grant_privileges(db.url, role.name, GrantMode.READ_ONLY)

        async with serving(role.url_for(db.url)) as page:
            status, headers, html = await _get(page)

    assert status == 200
    assert "cannot read" not in html
    assert str(seeded.quarantined) in html
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert headers["Cache-Control"] == "no-store"


async def test_with_credentials_set_the_page_asks_for_them(db: SlotDatabase) -> None:
    seeded = await _seed(db, datetime.now(UTC))

    async with serving(db.url, env=UI_ENV) as page:
        anonymous = await _get(page)
        wrong = await _get(page, Authorization=_basic("oncall", "guess"))
        right = await _get(page, Authorization=_basic("oncall", "ui-Secret-7"))
        elsewhere = await _get(page + "metrics", Authorization=_basic("oncall", "ui-Secret-7"))

    assert (anonymous[0], wrong[0]) == (401, 401)
    assert anonymous[1]["WWW-Authenticate"].startswith('Basic realm="slot-expiration"')
    assert str(seeded.quarantined) not in anonymous[2] + wrong[2]
    assert right[0] == 200
    assert str(seeded.quarantined) in right[2]
    assert elsewhere[0] == 404


async def test_an_unreachable_database_at_start_is_one_line_and_exit_1(closed_port: int) -> None:
    url = f"postgresql://calendar:{PASSWORD}@127.0.0.1:{closed_port}/calendar"

    done = await run_command("ui", "--addr", "127.0.0.1:0", "--database-url", url)

    assert done.returncode == 1, done.describe()
    (line,) = done.stderr.splitlines()
    assert line.startswith("slot-expiration: error: cannot connect to the database")
    assert PASSWORD not in done.stderr


async def test_a_port_in_use_is_one_line_and_exit_1(db: SlotDatabase) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        done = await run_command("ui", "--addr", f"127.0.0.1:{port}", "--database-url", db.url)

    assert done.returncode == 1, done.describe()
    assert done.stderr.splitlines() == [
        f"slot-expiration: error: cannot serve the page on 127.0.0.1:{port} (--addr): "
        "the port is already in use"
    ]


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["--addr", "localhost"], {}, "--addr / SLOT_EXPIRATION_UI_ADDR"),
        ([], {"SLOT_EXPIRATION_UI_USER": "oncall"}, "SLOT_EXPIRATION_UI_PASSWORD"),
    ],
    ids=["no port", "a user without a password"],
)
async def test_a_wrong_option_is_one_line_and_exit_2(
    db: SlotDatabase, args: list[str], env: dict[str, str], named: str
) -> None:
    done = await run_command("ui", *args, "--database-url", db.url, env=env)

    assert done.returncode == 2, done.describe()
    (line,) = done.stderr.splitlines()
    assert named in line


async def test_listening_beyond_the_loopback_without_credentials_warns(db: SlotDatabase) -> None:
    everywhere = "0.0.0.0:0"
    async with started("ui", "--addr", everywhere, "--database-url", db.url) as ui:
        await _page_url(ui)

    assert any("without authentication" in line for line in ui.stderr_lines)
