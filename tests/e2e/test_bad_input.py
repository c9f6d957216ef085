"""Everything a user can get wrong: one line on stderr, the right exit status, no writes.

Usage and option errors exit 2 (nothing was attempted); a database that
cannot be used exits 1 (see slot_expiration/cli/errors.py). Every URL carries
a password, and no output may ever show it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from slot_expiration.embedded import EmbeddedPostgres
from tests.conftest import scratch_database
from tests.e2e.command import PASSWORD, public_relations, run_command, with_password
from tests.support.database import INSERT_SLOT, SlotDatabase
from tests.support.slots import AS_OF, past_slots

pytestmark = pytest.mark.e2e

USAGE, FAILURE = 2, 1


@dataclass(frozen=True, slots=True)
class Targets:
    """The URLs a case can point at, all with a password."""

    seeded: str  # a migrated database with slots that any cycle would expire
    empty: str  # a database without the schema ("" unless the case asks for one)
    server: EmbeddedPostgres
    closed_port: int

    def on_server(self, database: str) -> str:
        return with_password(self.server.url_for(database))

    def as_role(self, role: str) -> str:
        return with_password(self.seeded, user=role)

    def unreachable(self) -> str:
        return f"postgresql://postgres:{PASSWORD}@127.0.0.1:{self.closed_port}/calendar"


Build = Callable[[Targets], list[str]]


def _no_env(targets: Targets) -> dict[str, str]:
    return {}


@dataclass(frozen=True, slots=True)
class Case:
    id: str
    args: Build
    code: int
    says: str  # a regular expression the error line must match
    env: Callable[[Targets], dict[str, str]] = field(default=_no_env)
    needs_empty_database: bool = False


def _minutes_from_now(minutes: int) -> str:
    return (datetime.now(UTC) + timedelta(minutes=minutes)).isoformat()


def once(*extra: str) -> Build:
    return lambda t: ["once", "--database-url", t.seeded, "--as-of", AS_OF.isoformat(), *extra]


CASES = [
    Case("no-url", lambda t: ["once"], USAGE, r"no database URL.*SLOT_EXPIRATION_DATABASE_URL"),
    Case(
        "wrong-scheme",
        lambda t: ["once", "--database-url", t.seeded.replace("postgresql://", "mysql://")],
        USAGE,
        r"postgresql://",
    ),
    Case(
        "wrong-scheme-in-env",
        lambda t: ["run"],
        USAGE,
        r"postgresql://",
        env=lambda t: {"SLOT_EXPIRATION_DATABASE_URL": t.seeded.replace("postgresql", "http")},
    ),
    Case(
        "port-out-of-range",
        lambda t: ["once", "--database-url", t.unreachable().replace(str(t.closed_port), "99999")],
        USAGE,
        r"port",
    ),
    Case("batch-size-0", once("--batch-size", "0"), USAGE, r"(?i)batch[-_]size"),
    Case("batch-size-10001", once("--batch-size", "10001"), USAGE, r"(?i)batch[-_]size"),
    Case("batch-size-abc", once("--batch-size", "abc"), USAGE, r"(?i)batch[-_]size"),
    Case(
        "batch-size-abc-in-env",
        lambda t: ["once"],
        USAGE,
        r"SLOT_EXPIRATION_BATCH_SIZE",
        env=lambda t: {
            "SLOT_EXPIRATION_DATABASE_URL": t.seeded,
            "SLOT_EXPIRATION_BATCH_SIZE": "abc",
        },
    ),
    Case("as-of-garbage", once("--as-of", "garbage"), USAGE, r"--as-of: expected an ISO-8601"),
    Case(
        # One typo would expire every bookable slot: a future clock needs the explicit flag.
        "as-of-far-future",
        lambda t: ["once", "--database-url", t.seeded, "--as-of", "9000-12-31T23:59:59Z"],
        USAGE,
        r"--as-of .*future.*--allow-future-as-of",
    ),
    Case(
        # Before the year 1 in UTC: neither the history nor status could read it back.
        "as-of-before-the-first-year",
        lambda t: ["once", "--database-url", t.seeded, "--as-of", "0001-01-01T00:00:00+14:00"],
        USAGE,
        r"--as-of: expected an ISO-8601 date-time from 0001-01-02T00:00:00Z to "
        r"9999-12-30T23:59:59Z",
    ),
    Case(
        "as-of-at-the-end-of-time",
        lambda t: [
            "once",
            "--database-url",
            t.seeded,
            "--allow-future-as-of",
            "--as-of",
            "9999-12-31T23:59:59-14:00",
        ],
        USAGE,
        r"--as-of: expected an ISO-8601 date-time",
    ),
    Case(
        # A URL pasted into the wrong option: the error says what was expected, never
        # what was typed (the run checks that the password appears nowhere).
        "as-of-a-url",
        lambda t: ["once", "--database-url", t.seeded, "--as-of", t.seeded],
        USAGE,
        r"^slot-expiration: error: --as-of: expected an ISO-8601 date-time[^/]*$",
    ),
    Case(
        "as-of-two-minutes-ahead",
        lambda t: ["once", "--database-url", t.seeded, "--as-of", _minutes_from_now(2)],
        USAGE,
        r"--allow-future-as-of",
    ),
    Case(
        "max-batches-negative",
        once("--max-batches-per-cycle", "-1"),
        USAGE,
        r"--max-batches-per-cycle",
    ),
    Case(
        "batch-pause-negative",
        once("--batch-pause-seconds", "-1"),
        USAGE,
        r"--batch-pause-seconds",
    ),
    Case("nice-ratio-negative", once("--drain-nice-ratio", "-1"), USAGE, r"--drain-nice-ratio"),
    Case("nice-ratio-nan", once("--drain-nice-ratio", "nan"), USAGE, r"--drain-nice-ratio"),
    Case(
        "replica-lag-negative",
        once("--max-replica-lag-seconds", "-1"),
        USAGE,
        r"--max-replica-lag-seconds",
    ),
    Case(
        "lock-timeout-zero", once("--lock-timeout-seconds", "0"), USAGE, r"--lock-timeout-seconds"
    ),
    Case(
        "backoff-max-below-base",
        once("--poison-backoff-seconds", "600", "--poison-backoff-max-seconds", "60"),
        USAGE,
        r"--poison-backoff-max-seconds must be at least --poison-backoff-seconds",
    ),
    Case(
        "synchronous-commit-maybe",
        once("--synchronous-commit", "maybe"),
        USAGE,
        r"--synchronous-commit.*'maybe' is not one of 'off', 'local', 'remote_write', 'on'",
    ),
    Case(
        "synchronous-commit-maybe-in-env",
        lambda t: ["run"],
        USAGE,
        r"SLOT_EXPIRATION_SYNCHRONOUS_COMMIT",
        env=lambda t: {
            "SLOT_EXPIRATION_DATABASE_URL": t.seeded,
            "SLOT_EXPIRATION_SYNCHRONOUS_COMMIT": "maybe",
        },
    ),
    Case(
        "prepared-statements-maybe-in-env",
        lambda t: ["once"],
        USAGE,
        r"SLOT_EXPIRATION_PREPARED_STATEMENTS",
        env=lambda t: {
            "SLOT_EXPIRATION_DATABASE_URL": t.seeded,
            "SLOT_EXPIRATION_PREPARED_STATEMENTS": "maybe",
        },
    ),
    Case(
        # A URL pasted into the wrong variable: its error quotes the value, never the password.
        "url-in-the-batch-size-variable",
        lambda t: ["once"],
        USAGE,
        r"SLOT_EXPIRATION_BATCH_SIZE",
        env=lambda t: {
            "SLOT_EXPIRATION_DATABASE_URL": t.seeded,
            "SLOT_EXPIRATION_BATCH_SIZE": t.seeded,
        },
    ),
    Case(
        "backoff-abc-in-env",
        lambda t: ["once"],
        USAGE,
        r"SLOT_EXPIRATION_POISON_BACKOFF_SECONDS",
        env=lambda t: {
            "SLOT_EXPIRATION_DATABASE_URL": t.seeded,
            "SLOT_EXPIRATION_POISON_BACKOFF_SECONDS": "abc",
        },
    ),
    Case(
        "run-interval-negative",
        lambda t: ["run", "--database-url", t.seeded, "--interval-seconds", "-1"],
        USAGE,
        r"(?i)interval",
    ),
    Case(
        "unknown-command",
        lambda t: ["frobnicate", "--database-url", t.seeded],
        USAGE,
        r"frobnicate",
    ),
    Case("unknown-option", once("--frobnicate"), USAGE, r"--frobnicate"),
    Case(
        "unreachable",
        lambda t: ["once", "--database-url", t.unreachable()],
        FAILURE,
        r"cannot connect to the database",
    ),
    Case(
        # libpq takes the password from the query string as well as from the userinfo.
        "password-in-query-string",
        lambda t: [
            "once",
            "--database-url",
            f"postgresql://postgres@127.0.0.1:{t.closed_port}/calendar?password={PASSWORD}",
        ],
        FAILURE,
        r"cannot connect to the database",
    ),
    Case(
        # libpq accepts an empty port and a port parameter (`once` does, see the error).
        "migrate-empty-port",
        lambda t: [
            "migrate",
            "--database-url",
            f"postgresql://postgres:{PASSWORD}@127.0.0.1:/calendar?port={t.closed_port}",
        ],
        FAILURE,
        r"cannot connect to the database",
    ),
    Case(
        # A libpq multi-host (failover) URL, which the options accept: both hosts are down.
        "migrate-multi-host-url",
        lambda t: [
            "migrate",
            "--database-url",
            f"postgresql://postgres:{PASSWORD}@127.0.0.1:{t.closed_port},"
            f"127.0.0.1:{t.closed_port}/calendar",
        ],
        FAILURE,
        r"cannot connect to the database",
    ),
    Case(
        "unknown-database",
        lambda t: ["once", "--database-url", t.on_server("no_such_db")],
        FAILURE,
        r"no_such_db",
    ),
    Case(
        "unknown-role",
        lambda t: ["once", "--database-url", t.as_role("no_such_role")],
        FAILURE,
        r"no_such_role",
    ),
    Case(
        "migrate-unknown-role",
        lambda t: ["migrate", "--database-url", t.as_role("no_such_role")],
        FAILURE,
        r"no_such_role",
    ),
    Case(
        "once-without-schema",
        lambda t: ["once", "--database-url", t.empty],
        FAILURE,
        r"slot-expiration migrate",
        needs_empty_database=True,
    ),
]


@pytest.fixture(scope="module")
def seeded_url(pg_server: EmbeddedPostgres) -> Iterator[str]:
    """One seeded database for the whole table: no case may change a row of it."""
    with scratch_database(pg_server, "bad_input") as url:
        seed(url)
        yield with_password(url)


def seed(url: str) -> None:
    with psycopg.connect(url) as conn, conn.cursor() as cursor:
        params = [asdict(slot) | {"status": slot.status.value} for slot in past_slots(5)]
        cursor.executemany(INSERT_SLOT, params)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
async def test_bad_input_fails_with_one_line_and_writes_nothing(
    case: Case,
    request: pytest.FixtureRequest,
    pg_server: EmbeddedPostgres,
    seeded_url: str,
    closed_port: int,
) -> None:
    empty = ""
    if case.needs_empty_database:
        empty = with_password(request.getfixturevalue("empty_database_url"))
    targets = Targets(seeded=seeded_url, empty=empty, server=pg_server, closed_port=closed_port)
    async with SlotDatabase.open(seeded_url) as db:
        before = await db.rows()
        assert len(before) == 5

        done = await run_command(*case.args(targets), env=case.env(targets))

        assert done.returncode == case.code, done.describe()
        assert done.stdout == "", done.describe()
        lines = done.stderr.splitlines()
        assert len(lines) == 1, done.describe()
        assert lines[0].startswith("slot-expiration: error: "), done.describe()
        assert "Traceback" not in done.stderr
        assert re.search(case.says, lines[0]), done.describe()
        assert PASSWORD not in done.stderr, done.describe()
        assert await db.rows() == before
    if empty:
        assert await public_relations(empty) == set()


SPLIT_PASSWORD = ("s3cret", "PW")  # written with an '@' between, unencoded


@pytest.mark.parametrize(
    "command",
    [
        ["once"],
        ["run"],
        ["migrate"],
        ["status"],
        ["grant", "--role", "worker"],
        ["quarantine", "list"],
        ["slots", "showcase", "--tenant", "8c1e7d54-2f0e-4a7e-9d9a-1c1f2b3c4d5e"],
    ],
    ids=lambda command: " ".join(command[:2]),  # the subcommand, not its arguments
)
async def test_a_password_with_an_unencoded_at_is_refused_before_any_connection(
    command: list[str], closed_port: int
) -> None:
    # libpq would read the password as "s3cret" and the host as "PW@127.0.0.1" (looked
    # up, and quoted by every error); hostaddr keeps any lookup off the network.
    url = (
        f"postgresql://postgres:{'@'.join(SPLIT_PASSWORD)}@127.0.0.1:{closed_port}/calendar"
        "?hostaddr=127.0.0.1"
    )

    done = await run_command(*command, "--database-url", url)

    assert done.returncode == USAGE, done.describe()
    (line,) = done.stderr.splitlines()
    assert line.startswith("slot-expiration: error: --database-url / SLOT_EXPIRATION_DATABASE_URL")
    assert "percent-encode each '@' and '/'" in line
    assert not any(part in done.stderr for part in SPLIT_PASSWORD), done.describe()


async def test_a_connection_error_shows_the_url_rebuilt_without_masking_the_rest(
    pg_server: EmbeddedPostgres,
) -> None:
    # Masking the text "x" once printed `does not e***ist`.
    url = f"postgresql://postgres:x@127.0.0.1:{pg_server.port}/no_such_db?application_name=xx"

    done = await run_command("once", "--database-url", url)

    assert done.returncode == FAILURE, done.describe()
    (line,) = done.stderr.splitlines()
    shown = f"postgresql://postgres:***@127.0.0.1:{pg_server.port}/no_such_db?application_name=xx"
    assert line.startswith(f"slot-expiration: error: cannot connect to the database ({shown}): ")
    assert 'database "no_such_db" does not exist' in line


async def test_a_url_typed_where_a_choice_is_expected_is_shown_without_its_password(
    seeded_url: str,
) -> None:
    done = await run_command("once", "--database-url", seeded_url, "--log-format", seeded_url)

    assert done.returncode == USAGE, done.describe()
    assert PASSWORD not in done.stderr
    assert "postgres:***@127.0.0.1" in done.stderr, done.describe()


@pytest.mark.parametrize(
    "typed",
    [
        ["once", "host=db.internal sslpassword=Sekret42"],
        ["once", "--log-format", "sslpassword=Sekret42"],
        ["status", "--check", "oauth_client_secret=Sekret42"],
    ],
    ids=["extra-argument", "choice", "status-check"],
)
async def test_text_naming_a_secret_parameter_is_never_quoted_back(typed: list[str]) -> None:
    """click quotes an unexpected argument or a value outside a choice: one holding a libpq
    secret (key=value, as libpq's connection strings write it) is shown as ***."""
    done = await run_command(*typed)

    assert done.returncode != 0, done.describe()
    assert "Sekret42" not in done.stdout + done.stderr, done.describe()
    assert "***" in done.stdout + done.stderr, done.describe()
