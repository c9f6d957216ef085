"""`slot-expiration slots publish|book|showcase|list|archive` as a person and a script use
them: JSON for scripts, exit 3 and one `CAL_SLOT_*` line for a rule rejection, 2 for
wrong usage, 1 when the database cannot be used."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest

from slot_expiration.cli.slot_input import parse_range
from slot_expiration.cli.slot_output import slot_json
from slot_expiration.domain import SlotStatus
from slot_expiration.slots import SlotOperations
from tests.e2e.command import PASSWORD, Finished, run_command
from tests.support.database import SlotDatabase

pytestmark = pytest.mark.e2e

RULE, USAGE, FAILURE = 3, 2, 1
TENANT, CONSULTANT = str(uuid4()), str(uuid4())
# The commands use the real clock: slots start tomorrow, on the hour.
BASE = (datetime.now(UTC) + timedelta(days=1)).replace(minute=0, second=0, microsecond=0)
SLOT_FIELDS = {"id", "tenant_id", "consultant_id", "start_at", "end_at", "status", "version"}


def span(start_hours: float, minutes: int = 30) -> str:
    start = BASE + timedelta(hours=start_hours)
    return f"{start.isoformat()}/{(start + timedelta(minutes=minutes)).isoformat()}"


async def slots(url: str, *args: str, env: dict[str, str] | None = None) -> Finished:
    return await run_command("slots", *args, "--database-url", url, env=env)


async def slots_publish(url: str, *args: str, env: dict[str, str] | None = None) -> Finished:
    """`slots publish` for the test's tenant and consultant, with `args`."""
    return await slots(
        url, "publish", "--tenant", TENANT, "--consultant", CONSULTANT, *args, env=env
    )


async def published(url: str, *spans: str, consultant: str = CONSULTANT) -> list[dict[str, Any]]:
    """Arranged through the Python API (a command start costs a second); the slots as
    the commands print them."""
    batch = [parse_range(text) for text in spans]
    async with SlotOperations.connect(url) as ops:
        slots = await ops.publish(UUID(TENANT), UUID(consultant), batch)
    return [slot_json(slot) for slot in slots]


async def act(url: str, book: str | None = None, archive: str | None = None) -> None:
    """Book and archive through the Python API, to arrange a test."""
    async with SlotOperations.connect(url) as ops:
        if book:
            await ops.book(UUID(TENANT), UUID(book))
        if archive:
            await ops.archive(UUID(TENANT), UUID(archive))


async def publish(url: str, *spans: str, consultant: str = CONSULTANT) -> list[dict[str, Any]]:
    args = [arg for s in spans for arg in ("--slot", s)]
    done = await slots(
        url, "publish", "--tenant", TENANT, "--consultant", consultant, *args, "--json"
    )
    assert done.returncode == 0, done.describe()
    published: list[dict[str, Any]] = json.loads(done.stdout)
    return published


def assert_rejected(done: Finished, code: str) -> str:
    """Exit 3, nothing on stdout, exactly one stderr line starting with the code."""
    assert done.returncode == RULE, done.describe()
    assert done.stdout == "", done.describe()
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.describe()
    assert lines[0].startswith(f"{code}: "), done.describe()
    assert "Traceback" not in done.stderr
    return lines[0]


def assert_usage_error(done: Finished, *mentions: str) -> None:
    assert done.returncode == USAGE, done.describe()
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.describe()
    assert lines[0].startswith("slot-expiration: error: "), done.describe()
    for mention in mentions:
        assert mention in lines[0], done.describe()


# --- publish --------------------------------------------------------------------------


async def test_publish_prints_the_slots_as_a_json_array_and_writes_them(
    db: SlotDatabase,
) -> None:
    printed = await publish(db.url, span(2), span(1))

    assert [p["start_at"] for p in printed] == [
        (BASE + timedelta(hours=h)).isoformat() for h in (2, 1)
    ]
    for slot in printed:
        assert set(slot) >= SLOT_FIELDS
        assert (slot["tenant_id"], slot["consultant_id"]) == (TENANT, CONSULTANT)
        assert (slot["status"], slot["version"]) == ("Available", 1)
    rows = await db.rows()
    assert {str(i) for i in rows} == {p["id"] for p in printed}


async def test_publish_reads_a_file_of_start_end_lines_and_prints_lines_without_json(
    db: SlotDatabase, tmp_path: Path
) -> None:
    listing = tmp_path / "slots.txt"
    listing.write_text(f"# Monday\n{span(1)}\n\n{span(2)}\n{span(3)}\n")

    done = await slots_publish(db.url, "--from-file", str(listing))

    assert done.returncode == 0, done.describe()
    lines = done.stdout.splitlines()
    assert lines[0] == "published 3 slot(s)"
    assert all("Available" in line and "v1" in line for line in lines[1:])
    assert len(await db.rows()) == 3


async def test_an_overlapping_publication_exits_3_naming_the_slot_in_the_way(
    db: SlotDatabase,
) -> None:
    (existing,) = await published(db.url, span(1, 60))

    done = await slots_publish(db.url, "--slot", span(1.5), "--slot", span(5))

    line = assert_rejected(done, "CAL_SLOT_OVERLAP")
    assert existing["id"] in line
    assert len(await db.rows()) == 1


async def test_501_slots_from_a_file_exit_3_as_too_large_and_nothing_is_written(
    db: SlotDatabase, tmp_path: Path
) -> None:
    listing = tmp_path / "many.txt"
    listing.write_text("".join(f"{span(h)}\n" for h in range(501)))

    done = await slots_publish(db.url, "--from-file", str(listing))

    assert_rejected(done, "CAL_SLOT_BATCH_TOO_LARGE")
    assert await db.rows() == {}


@pytest.mark.parametrize(
    ("slot", "code"),
    [
        (
            f"{BASE.isoformat()}/{(BASE - timedelta(minutes=1)).isoformat()}",
            "CAL_SLOT_INVALID_RANGE",
        ),
        ("2020-01-01T10:00:00Z/2020-01-01T10:30:00Z", "CAL_SLOT_START_IN_PAST"),
        (span(24 * 91), "CAL_SLOT_BEYOND_HORIZON"),
        (span(1, 111 * 24 * 60), "CAL_SLOT_TOO_LONG"),
    ],
    ids=["end-before-start", "in-the-past", "beyond-90-days", "111-days-long"],
)
async def test_a_slot_breaking_a_publication_rule_exits_3_with_its_code(
    db: SlotDatabase, slot: str, code: str
) -> None:
    done = await slots(
        db.url, "publish", "--tenant", TENANT, "--consultant", CONSULTANT, "--slot", slot
    )

    assert_rejected(done, code)
    assert await db.rows() == {}


async def test_an_empty_file_exits_3_as_an_empty_batch(db: SlotDatabase, tmp_path: Path) -> None:
    listing = tmp_path / "none.txt"
    listing.write_text("# nothing this week\n")

    done = await slots_publish(db.url, "--from-file", str(listing))

    assert_rejected(done, "CAL_SLOT_BATCH_EMPTY")


async def test_the_horizon_is_an_option_and_a_variable(db: SlotDatabase) -> None:
    far = span(24 * 10)
    by_flag = await slots_publish(db.url, "--slot", far, "--horizon-days", "7")
    by_variable = await slots_publish(
        db.url, "--slot", far, env={"SLOT_EXPIRATION_HORIZON_DAYS": "7"}
    )

    assert_rejected(by_flag, "CAL_SLOT_BEYOND_HORIZON")
    assert_rejected(by_variable, "CAL_SLOT_BEYOND_HORIZON")


# --- book -----------------------------------------------------------------------------


async def test_book_prints_the_booked_slot_with_version_2(db: SlotDatabase) -> None:
    (slot,) = await published(db.url, span(3))

    done = await slots(db.url, "book", slot["id"], "--tenant", TENANT, "--json")

    assert done.returncode == 0, done.describe()
    booked = json.loads(done.stdout)
    assert (booked["id"], booked["status"], booked["version"]) == (slot["id"], "Booked", 2)
    assert (await db.statuses())[UUID(slot["id"])] is SlotStatus.BOOKED


async def test_booking_twice_exits_3_not_available(db: SlotDatabase) -> None:
    (slot,) = await published(db.url, span(3))
    first = await slots(db.url, "book", slot["id"], "--tenant", TENANT)

    again = await slots(db.url, "book", slot["id"], "--tenant", TENANT)

    assert first.returncode == 0, first.describe()
    assert first.stdout.startswith(f"booked: {slot['id']}")
    assert "it is Booked" in assert_rejected(again, "CAL_SLOT_NOT_AVAILABLE")


async def test_booking_another_tenants_slot_reads_exactly_like_an_unknown_id(
    db: SlotDatabase,
) -> None:
    (slot,) = await published(db.url, span(3))
    unknown = str(uuid4())
    other = str(uuid4())

    foreign = await slots(db.url, "book", slot["id"], "--tenant", other)
    missing = await slots(db.url, "book", unknown, "--tenant", other)

    foreign_line = assert_rejected(foreign, "CAL_SLOT_NOT_AVAILABLE")
    missing_line = assert_rejected(missing, "CAL_SLOT_NOT_AVAILABLE")
    assert foreign_line.replace(slot["id"], "<id>") == missing_line.replace(unknown, "<id>")


async def test_a_slot_inside_the_lead_time_exits_3_and_the_lead_time_is_an_option(
    db: SlotDatabase,
) -> None:
    soon = datetime.now(UTC) + timedelta(minutes=45)
    (slot,) = await published(
        db.url, f"{soon.isoformat()}/{(soon + timedelta(minutes=30)).isoformat()}"
    )

    refused = await slots(db.url, "book", slot["id"], "--tenant", TENANT)
    by_variable = await slots(
        db.url,
        "book",
        slot["id"],
        "--tenant",
        TENANT,
        env={"SLOT_EXPIRATION_MIN_LEAD_TIME_MINUTES": "120"},
    )
    booked = await slots(
        db.url, "book", slot["id"], "--tenant", TENANT, "--min-lead-time-minutes", "30"
    )

    assert_rejected(refused, "CAL_SLOT_LEAD_TIME_VIOLATION")
    assert_rejected(by_variable, "CAL_SLOT_LEAD_TIME_VIOLATION")
    assert booked.returncode == 0, booked.describe()


async def test_a_slot_the_worker_expired_is_refused_gone_from_views_and_its_time_is_free(
    db: SlotDatabase,
) -> None:
    """The spec's race, expiry first, through the commands a person types."""
    (slot,) = await published(db.url, span(2))
    start = slot["start_at"]
    expired = await run_command(
        "once", "--as-of", start, "--allow-future-as-of", "--database-url", db.url
    )
    assert expired.returncode == 0, expired.describe()

    refused = await slots(db.url, "book", slot["id"], "--tenant", TENANT)
    shown = await slots(db.url, "showcase", "--tenant", TENANT, "--json")
    working = await slots(db.url, "list", "--tenant", TENANT, "--consultant", CONSULTANT, "--json")
    history = await slots(
        db.url,
        "list",
        "--tenant",
        TENANT,
        "--consultant",
        CONSULTANT,
        "--status",
        "Expired",
        "--json",
    )
    again = await publish(db.url, span(2))

    assert "it is Expired" in assert_rejected(refused, "CAL_SLOT_NOT_AVAILABLE")
    assert json.loads(shown.stdout) == []
    assert json.loads(working.stdout) == []
    assert [s["id"] for s in json.loads(history.stdout)] == [slot["id"]]
    assert again[0]["status"] == "Available"


# --- showcase and list ----------------------------------------------------------------


async def test_a_script_pages_through_the_showcase_with_the_json_cursors(
    db: SlotDatabase,
) -> None:
    all_slots = await published(db.url, *(span(h) for h in range(1, 8)))
    seen: list[str] = []
    after: list[str] = []
    for _ in range(5):
        done = await slots(db.url, "showcase", "--tenant", TENANT, "--limit", "3", "--json", *after)
        assert done.returncode == 0, done.describe()
        page = json.loads(done.stdout)
        seen += [s["id"] for s in page]
        if len(page) < 3:
            break
        after = ["--after", page[-1]["cursor"]]

    assert seen == [s["id"] for s in all_slots]


async def test_the_showcase_text_ends_with_the_next_page_option(db: SlotDatabase) -> None:
    await published(db.url, *(span(h) for h in range(1, 4)))

    first = await slots(db.url, "showcase", "--tenant", TENANT, "--limit", "2")
    cursor = first.stdout.splitlines()[-1].removeprefix("more: --after ")
    second = await slots(db.url, "showcase", "--tenant", TENANT, "--limit", "2", "--after", cursor)

    assert first.stdout.splitlines()[0] == "2 bookable slot(s)"
    assert first.stdout.splitlines()[-1].startswith("more: --after ")
    assert second.stdout.splitlines()[0] == "1 bookable slot(s)"
    assert "more:" not in second.stdout


async def test_the_showcase_filters_by_consultant_and_start_window(db: SlotDatabase) -> None:
    other = str(uuid4())
    await published(db.url, span(1), span(2), span(3))
    theirs = await published(db.url, span(2), consultant=other)

    done = await slots(
        db.url,
        "showcase",
        "--tenant",
        TENANT,
        "--consultant",
        other,
        "--from",
        (BASE + timedelta(hours=1.5)).isoformat(),
        "--to",
        (BASE + timedelta(hours=2.5)).isoformat(),
        "--json",
    )

    assert [s["id"] for s in json.loads(done.stdout)] == [theirs[0]["id"]]


async def test_the_agent_list_shows_the_working_view_and_other_statuses_when_asked(
    db: SlotDatabase,
) -> None:
    available, booked, archived = await published(db.url, span(1), span(2), span(3))
    await act(db.url, book=booked["id"], archive=archived["id"])

    working = await slots(db.url, "list", "--tenant", TENANT, "--consultant", CONSULTANT, "--json")
    archived_only = await slots(
        db.url,
        "list",
        "--tenant",
        TENANT,
        "--consultant",
        CONSULTANT,
        "--status",
        "archived",
        "--json",
    )
    text = await slots(db.url, "list", "--tenant", TENANT, "--consultant", CONSULTANT)

    assert [(s["id"], s["status"]) for s in json.loads(working.stdout)] == [
        (available["id"], "Available"),
        (booked["id"], "Booked"),
    ]
    assert [s["id"] for s in json.loads(archived_only.stdout)] == [archived["id"]]
    assert text.stdout.splitlines()[0] == "2 slot(s)"


# --- archive --------------------------------------------------------------------------


async def test_archive_prints_the_archived_slot_and_refuses_a_booked_one(
    db: SlotDatabase,
) -> None:
    free, taken = await published(db.url, span(1), span(2))
    await act(db.url, book=taken["id"])

    archived = await slots(db.url, "archive", free["id"], "--tenant", TENANT, "--json")
    forbidden = await slots(db.url, "archive", taken["id"], "--tenant", TENANT)
    unknown = await slots(db.url, "archive", str(uuid4()), "--tenant", TENANT)

    assert archived.returncode == 0, archived.describe()
    assert (json.loads(archived.stdout)["status"], json.loads(archived.stdout)["version"]) == (
        "Archived",
        2,
    )
    line = assert_rejected(forbidden, "CAL_SLOT_FORBIDDEN_TRANSITION")
    assert "from Booked to Archived" in line
    assert_rejected(unknown, "CAL_SLOT_NOT_FOUND")


# --- usage and failures ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "mention"),
    [
        (["publish", "--tenant", TENANT, "--consultant", CONSULTANT], "--slot"),
        (
            ["publish", "--tenant", TENANT, "--consultant", CONSULTANT, "--slot", "tomorrow"],
            "--slot",
        ),
        (
            ["publish", "--tenant", "not-a-uuid", "--consultant", CONSULTANT, "--slot", span(1)],
            "--tenant",
        ),
        (
            ["publish", "--tenant", TENANT, "--consultant", CONSULTANT, "--from-file", "/nope"],
            "--from-file",
        ),
        (["book", "not-a-uuid", "--tenant", TENANT], "SLOT_ID"),
        (
            ["book", str(uuid4()), "--tenant", TENANT, "--min-lead-time-minutes", "-1"],
            "--min-lead-time-minutes",
        ),
        (["showcase", "--tenant", TENANT, "--after", "garbage"], "--after"),
        (["showcase", "--tenant", TENANT, "--limit", "0"], "--limit"),
        (["showcase", "--tenant", TENANT, "--from", "next week"], "--from"),
        (["list", "--tenant", TENANT, "--consultant", CONSULTANT, "--status", "Gone"], "--status"),
        (["archive", str(uuid4())], "--tenant"),
    ],
    ids=[
        "no-slots",
        "bad-slot",
        "bad-tenant",
        "missing-file",
        "bad-slot-id",
        "negative-lead",
        "bad-cursor",
        "zero-limit",
        "bad-from",
        "bad-status",
        "no-tenant",
    ],
)
async def test_wrong_usage_exits_2_with_one_line_and_writes_nothing(
    db: SlotDatabase, args: list[str], mention: str
) -> None:
    done = await slots(db.url, *args)

    assert_usage_error(done, mention)
    assert await db.rows() == {}


async def test_both_slot_and_from_file_is_a_usage_error(db: SlotDatabase, tmp_path: Path) -> None:
    listing = tmp_path / "one.txt"
    listing.write_text(f"{span(1)}\n")

    done = await slots_publish(db.url, "--slot", span(2), "--from-file", str(listing))

    assert_usage_error(done, "--slot", "--from-file")


async def test_a_malformed_line_in_the_file_is_a_usage_error_naming_the_line(
    db: SlotDatabase, tmp_path: Path
) -> None:
    listing = tmp_path / "bad.txt"
    listing.write_text(f"{span(1)}\n{span(2)}\nnot a slot\n")

    done = await slots_publish(db.url, "--from-file", str(listing))

    assert_usage_error(done, "line 3")
    assert await db.rows() == {}


def not_utf8(tmp_path: Path) -> str:
    listing = tmp_path / "latin1.txt"
    listing.write_bytes(f"{span(1)}\n# consultation caf".encode() + b"\xe9\n")
    return str(listing)


def four_gib(tmp_path: Path) -> str:
    listing = tmp_path / "huge.txt"
    with listing.open("wb") as sparse:
        sparse.truncate(4 * 1024**3)  # takes no disk space
    return str(listing)


@pytest.mark.parametrize(
    ("path_of", "mention"),
    [
        (not_utf8, "line 2 is not UTF-8: byte 0xe9"),
        (lambda _: "/dev/zero", "line 1 is longer than 4096 bytes"),
        (four_gib, "is 4294967296 bytes, over the limit of 1048576 bytes"),
    ],
    ids=["not-utf8", "dev-zero", "4-GiB-file"],
)
async def test_a_file_that_is_not_utf8_or_too_large_exits_2_at_once_and_writes_nothing(
    db: SlotDatabase, tmp_path: Path, path_of: Callable[[Path], str], mention: str
) -> None:
    # Before the limits: a traceback for the first, gigabytes of memory for the others.
    done = await run_command(
        "slots",
        "publish",
        "--tenant",
        TENANT,
        "--consultant",
        CONSULTANT,
        "--from-file",
        path_of(tmp_path),
        "--database-url",
        db.url,
        timeout_seconds=10,
    )

    assert_usage_error(done, "--from-file", mention)
    assert "Traceback" not in done.stderr
    assert await db.rows() == {}


async def test_no_database_url_is_a_usage_error() -> None:
    done = await run_command("slots", "showcase", "--tenant", TENANT)

    assert_usage_error(done, "SLOT_EXPIRATION_DATABASE_URL")


async def test_an_unreachable_database_exits_1_with_one_line_and_no_password(
    closed_port: int,
) -> None:
    url = f"postgresql://calendar:{PASSWORD}@127.0.0.1:{closed_port}/calendar"

    done = await run_command(
        "slots", "book", str(uuid4()), "--tenant", TENANT, "--database-url", url
    )

    assert done.returncode == FAILURE, done.describe()
    assert len(done.stderr.splitlines()) == 1, done.describe()
    assert done.stderr.startswith("slot-expiration: error: cannot connect to the database")
    assert PASSWORD not in done.stderr


async def test_a_bad_value_of_an_option_a_slots_command_does_not_read_never_breaks_it(
    db: SlotDatabase,
) -> None:
    booked, archived = await published(db.url, span(3), span(4))
    horizon = {"SLOT_EXPIRATION_HORIZON_DAYS": "abc"}
    lead_time = {"SLOT_EXPIRATION_MIN_LEAD_TIME_MINUTES": "abc"}
    tenant = ("--tenant", TENANT)
    consultant = ("--consultant", CONSULTANT)

    done = [
        await slots(db.url, "showcase", *tenant, env=horizon),
        await slots(db.url, "list", *tenant, *consultant, env=horizon | lead_time),
        await slots(db.url, "book", booked["id"], *tenant, env=horizon),
        await slots(db.url, "archive", archived["id"], *tenant, env=horizon | lead_time),
        await slots(db.url, "publish", *tenant, *consultant, "--slot", span(5), env=lead_time),
    ]
    reading_it = await slots(
        db.url, "publish", *tenant, *consultant, "--slot", span(7), env=horizon
    )

    assert [d.returncode for d in done] == [0] * 5, [d.describe() for d in done]
    assert_usage_error(reading_it, "SLOT_EXPIRATION_HORIZON_DAYS")


@pytest.mark.parametrize(
    ("command", "variables"),
    [
        ("publish", {"SLOT_EXPIRATION_DATABASE_URL", "SLOT_EXPIRATION_HORIZON_DAYS"}),
        ("book", {"SLOT_EXPIRATION_DATABASE_URL", "SLOT_EXPIRATION_MIN_LEAD_TIME_MINUTES"}),
        ("showcase", {"SLOT_EXPIRATION_DATABASE_URL", "SLOT_EXPIRATION_MIN_LEAD_TIME_MINUTES"}),
        ("list", {"SLOT_EXPIRATION_DATABASE_URL"}),
        ("archive", {"SLOT_EXPIRATION_DATABASE_URL"}),
    ],
)
async def test_help_of_each_slots_command_lists_its_environment_variables(
    command: str, variables: set[str]
) -> None:
    done = await run_command("slots", command, "--help")

    assert done.returncode == 0, done.describe()
    assert done.stdout.startswith(f"Usage: slot-expiration slots {command} ")
    words = set(done.stdout.replace("[", " ").replace("]", " ").split())
    assert variables <= words, done.stdout
    assert "--json" in words
