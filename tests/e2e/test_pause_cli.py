"""`slot-expiration pause` and `resume`, as an operator runs them with the installed wheel:
`once` obeys the pause and says so, `status --check` says WARNING and then CRITICAL past the
pause's end, `resume` lets the next cycle expire; bad input is one line, a non-zero exit and
nothing written."""

from __future__ import annotations

import json

import pytest

from slot_expiration.domain import SlotStatus
from tests.e2e.command import run_command
from tests.support.database import SlotDatabase
from tests.support.roles import PasswordRole
from tests.support.slots import AS_OF, past_slots

pytestmark = pytest.mark.e2e

REASON = "calendar database upgrade, ticket OPS-1234"


async def _pauses(db: SlotDatabase) -> list[tuple[str, str | None]]:
    cursor = await db.conn.execute(
        "SELECT reason, resumed_by FROM slot_expiration_pauses ORDER BY paused_at"
    )
    return [(row[0], row[1]) for row in await cursor.fetchall()]


async def _current_user(db: SlotDatabase) -> str:
    cursor = await db.conn.execute("SELECT current_user")
    row = await cursor.fetchone()
    assert row is not None
    return str(row[0])


async def test_pause_stops_every_cycle_until_resume_and_status_says_who_until_when_and_why(
    db: SlotDatabase,
) -> None:
    url = ("--database-url", db.url)
    once = ("once", "--json", "--as-of", AS_OF.isoformat(), *url)
    await run_command(*once)  # a success in the history: nothing else to judge
    slots = await db.insert(past_slots(4))
    user = await _current_user(db)

    paused = await run_command("pause", "--for", "30m", "--reason", REASON, *url)
    check = await run_command("status", "--check", *url)
    report = await run_command("status", *url)
    reported = await run_command("status", "--json", *url)
    obeyed = await run_command(*once)
    said = await run_command("once", "--as-of", AS_OF.isoformat(), *url)
    statuses_while_paused = await db.statuses()
    resumed = await run_command("resume", *url)
    expired = await run_command(*once)
    again = await run_command("resume", *url)

    assert paused.returncode == 0, paused.describe()
    assert paused.stdout.startswith(f"paused by {user} until ")
    assert f": {REASON}; every replica expires nothing from its next tick on" in paused.stdout
    assert check.returncode == 1, check.describe()
    assert check.stdout.startswith(f"WARNING: paused by {user} until ")
    assert f"left: {REASON}" in check.stdout
    assert f"\npause          paused by {user} until " in report.stdout
    pause = json.loads(reported.stdout)["pause"]
    assert (pause["paused_by"], pause["reason"], pause["limit_seconds"]) == (user, REASON, 1800)
    assert pause["outlived"] is False
    assert obeyed.returncode == 0, obeyed.describe()
    result = json.loads(obeyed.stdout)
    assert (result["outcome"], result["expired_count"]) == ("paused", 0)
    assert result["pause"]["reason"] == REASON
    assert said.returncode == 0, said.describe()
    assert said.stdout.startswith(f"paused by {user} until ")
    assert "this cycle expired nothing" in said.stdout
    assert set(statuses_while_paused.values()) == {SlotStatus.AVAILABLE}
    assert resumed.returncode == 0, resumed.describe()
    assert resumed.stdout.startswith("resumed after ")
    assert json.loads(expired.stdout)["expired_count"] == len(slots)
    assert set((await db.statuses()).values()) == {SlotStatus.EXPIRED}
    assert again.returncode == 0, again.describe()
    assert again.stdout.startswith("not paused, nothing changed: the last pause (")
    assert await _pauses(db) == [(REASON, user)]


async def test_status_check_is_critical_once_a_pause_outlived_its_end(db: SlotDatabase) -> None:
    url = ("--database-url", db.url)
    await run_command("once", *url)  # a success in the history: nothing else to judge
    paused = await run_command("pause", "--for", "90s", "--reason", REASON, *url)
    # Two minutes later on the database's clock: the pause began two minutes ago.
    await db.execute(
        "UPDATE slot_expiration_pauses SET paused_at = paused_at - interval '2 minutes', "
        "paused_until = paused_until - interval '2 minutes'"
    )

    check = await run_command("status", "--check", *url)

    assert paused.returncode == 0, paused.describe()
    assert check.returncode == 2, check.describe()
    assert check.stdout.startswith("CRITICAL: paused by ")
    assert f"s past its end: {REASON}" in check.stdout


async def test_a_second_pause_is_refused_and_replace_swaps_it(db: SlotDatabase) -> None:
    url = ("--database-url", db.url)
    await run_command("pause", "--reason", REASON, *url)

    refused = await run_command("pause", "--for", "2h", "--reason", "another", *url)
    replaced = await run_command("pause", "--replace", "--for", "2h", "--reason", "longer", *url)

    assert refused.returncode == 1, refused.describe()
    (line,) = refused.stderr.splitlines()
    assert line.startswith("slot-expiration: error: already paused by ")
    assert f"no end given: {REASON}; nothing changed" in line
    assert replaced.returncode == 0, replaced.describe()
    assert replaced.stdout.startswith("replaced: paused by ")
    assert [reason for reason, _ in await _pauses(db)] == [REASON, "longer"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--for", "30x"], "Invalid value for '--for': a duration such as 90s, 30m, 2h or 1h30m"),
        (["--for", "0s"], "above 0 and at most 7d"),
        (["--for", "8d"], "above 0 and at most 7d"),
        (["--for", "-5m"], "Invalid value for '--for'"),
        (["--reason", ""], "Invalid value for '--reason': say why, in a few words"),
        (["--reason", "  \t "], "Invalid value for '--reason': say why, in a few words"),
        (["--reason", "a bell\a"], "Invalid value for '--reason': one line"),
        (["--reason", "x" * 501], "one line of at most 500 printable characters"),
        ([], "Missing option '--reason'"),
    ],
    ids=[
        "unit",
        "zero",
        "too-long",
        "negative",
        "empty",
        "blank",
        "control",
        "long-reason",
        "no-reason",
    ],
)
async def test_bad_input_is_one_line_exit_2_and_nothing_written(
    db: SlotDatabase, args: list[str], said: str
) -> None:
    given = args if "--reason" in args or not args else [*args, "--reason", REASON]
    done = await run_command("pause", *given, "--database-url", db.url)

    assert done.returncode == 2, done.describe()
    (line,) = done.stderr.splitlines()
    assert line.startswith("slot-expiration: error: ")
    assert said in line
    assert await _pauses(db) == []


@pytest.mark.parametrize("command", ["pause", "resume"])
async def test_without_a_database_url_each_says_so_in_one_line(command: str) -> None:
    args = ["--reason", REASON] if command == "pause" else []
    done = await run_command(command, *args)

    assert done.returncode == 2, done.describe()
    assert done.stderr.splitlines() == [
        "slot-expiration: error: no database URL: pass --database-url or set "
        "SLOT_EXPIRATION_DATABASE_URL"
    ]


@pytest.mark.parametrize("command", ["pause", "resume"])
async def test_a_database_never_migrated_is_refused_in_one_line_naming_migrate(
    empty_database_url: str, command: str
) -> None:
    args = ["--reason", REASON] if command == "pause" else []
    done = await run_command(command, *args, "--database-url", empty_database_url)

    assert done.returncode == 1, done.describe()
    (line,) = done.stderr.splitlines()
    assert line.startswith("slot-expiration: error: ")
    assert "slot-expiration migrate" in line
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("command", ["pause", "resume"])
async def test_the_workers_role_may_not_pause_nor_resume_and_nothing_changes(
    db: SlotDatabase, role: PasswordRole, command: str
) -> None:
    await run_command("grant", "--role", role.name, "--database-url", db.url)
    await run_command("pause", "--reason", REASON, "--database-url", db.url)
    before = await _pauses(db)
    args = ["--replace", "--reason", "mine"] if command == "pause" else []

    done = await run_command(command, *args, "--database-url", role.url_for(db.url))

    assert done.returncode == 1, done.describe()
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"slot-expiration: error: role {role.name} may not pause or resume")
    assert "run it as the role `migrate` runs as" in line
    assert role.password not in done.stdout + done.stderr
    assert await _pauses(db) == before
