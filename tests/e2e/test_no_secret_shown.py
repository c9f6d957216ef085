"""No secret of any kind is ever shown: every parameter libpq holds a secret in (the
password, the key file's passphrase `sslpassword`, `oauth_client_secret`, the SCRAM keys),
wherever it comes from (the URL's userinfo, its query string, PGPASSWORD, a service file),
stays out of every command's output: stdout, stderr (the logs), the page, /metrics,
/healthz, /readyz, the traces sent and the cycle history written, on a database that
answers and on one that does not.

The secrets are drawn by Hypothesis; the server trusts its loopback clients, so libpq
sends none of them anywhere and every command does its work.
"""

from __future__ import annotations

import asyncio
import base64
import html
import json
import signal
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote, quote_plus, urlsplit
from uuid import uuid4

import aiohttp
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.e2e.command import Finished, run_command, started
from tests.e2e.endpoint import HTTP_TIMEOUT, endpoint_url
from tests.e2e.test_traces import otlp_receiver

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

# Where libpq's documentation says each secret may be given (besides the URL's query).
PASSWORD_PLACES = ("userinfo", "query", "PGPASSWORD", "service file")
OTHER_PLACES = ("query", "service file")
SECRETS = ("password", "sslpassword", "oauth_client_secret", "scram_client_key", "scram_server_key")
SERVICE = "calendar"
TENANT, CONSULTANT = str(uuid4()), str(uuid4())

# What a number is written with: a secret of these alone (`0000000000`) is found by chance in
# /metrics, in a float's repr (`process_cpu_seconds_total 0.43000000000000005`), with no
# secret shown.
_NUMBER_CHARACTERS = frozenset("0123456789.+-eE")
# No white space: a service file ends a value at the line's end and trims it.
_SECRET_TEXT = st.text(
    alphabet=st.characters(
        codec="utf-8", exclude_categories=("Cc", "Cs", "Zs", "Zl", "Zp"), exclude_characters="\x85"
    ),
    min_size=10,
    max_size=24,
).filter(lambda text: not set(text) <= _NUMBER_CHARACTERS)
# libpq checks that a SCRAM key is base64 of 32 bytes before it connects.
_SCRAM_KEY = st.binary(min_size=32, max_size=32).map(lambda raw: base64.b64encode(raw).decode())


@dataclass(frozen=True, slots=True)
class Given:
    secrets: dict[str, str]  # parameter -> its value
    places: dict[str, str]  # parameter -> where it is given

    def url(self, base: str, tmp: Path) -> str:
        """`base` (a URL without password) with the secrets given where drawn."""
        parts = urlsplit(base)
        userinfo = parts.username or ""
        query = []
        for name, value in self.secrets.items():
            place = self.places[name]
            if place == "userinfo":
                userinfo += ":" + quote(value, safe="")
            elif place == "query":
                query.append(f"{name}={quote(value, safe='')}")
        if self.service_file(tmp) is not None:
            query.append(f"service={SERVICE}")
        netloc = f"{userinfo}@{parts.hostname}:{parts.port}"
        return f"postgresql://{netloc}{parts.path}" + ("?" + "&".join(query) if query else "")

    def service_file(self, tmp: Path) -> Path | None:
        lines = [
            f"{name}={value}"
            for name, value in self.secrets.items()
            if self.places[name] == "service file"
        ]
        if not lines:
            return None
        path = tmp / "pg_service.conf"
        path.write_text(f"[{SERVICE}]\n" + "\n".join(lines) + "\n", encoding="utf-8")
        return path

    def env(self, tmp: Path) -> dict[str, str]:
        env = {}
        if self.places["password"] == "PGPASSWORD":  # noqa: S105 - a place, not a password
            env["PGPASSWORD"] = self.secrets["password"]
        service_file = self.service_file(tmp)
        if service_file is not None:
            env["PGSERVICEFILE"] = str(service_file)
        return env


@st.composite
def secrets_given(draw: st.DrawFn) -> Given:
    values = {
        name: draw(_SCRAM_KEY if name.startswith("scram_") else _SECRET_TEXT) for name in SECRETS
    }
    places = {
        name: draw(st.sampled_from(PASSWORD_PLACES if name == "password" else OTHER_PLACES))
        for name in SECRETS
    }
    return Given(values, places)


def shown_forms(secret: str) -> set[str]:
    """The ways an output could carry a secret: as it is, percent-encoded (a URL), escaped
    in JSON or HTML."""
    return {
        secret,
        quote(secret, safe=""),
        quote(secret),
        quote_plus(secret),
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        html.escape(secret),
    }


def leaks(given: Given, outputs: dict[str, str]) -> list[str]:
    found = []
    for where, text in outputs.items():
        for name, secret in given.secrets.items():
            if any(form in text for form in shown_forms(secret)):
                found.append(f"{name} ({given.places[name]}) in {where}")
    return found


async def _get(url: str) -> str:
    async with aiohttp.ClientSession(timeout=HTTP_TIMEOUT) as session, session.get(url) as reply:
        return f"{reply.status} {await reply.text()}"


def _outputs(name: str, done: Finished) -> dict[str, str]:
    return {f"{name} stdout": done.stdout, f"{name} stderr": done.stderr}


async def _worker_outputs(url: str, env: dict[str, str]) -> dict[str, str]:
    """`run` until its first cycle has ended, its endpoint's three pages, its logs."""
    async with started("run", "--interval-seconds", "1", "--database-url", url, env=env) as run:
        base = await endpoint_url(run)
        await run.until(lambda: run.logged("cycle.completed"), "a cycle completed")
        pages = {
            f"run {path}": await _get(base + path) for path in ("/metrics", "/healthz", "/readyz")
        }
        run.send_signal(signal.SIGTERM)
        done = await run.wait()
    assert done.returncode == 0, done.describe()
    return pages | _outputs("run", done)


async def _page(url: str, env: dict[str, str]) -> dict[str, str]:
    async with started("ui", "--addr", "127.0.0.1:0", "--database-url", url, env=env) as ui:
        await ui.until(lambda: ui.printed("ui: serving http://"), "serving the page")
        (line,) = [line for line in ui.stdout_lines if "ui: serving " in line]
        page = await _get(line.split("serving ", 1)[1].split(" ", 1)[0])
    return {
        "ui page": page,
        "ui stdout": "\n".join(ui.stdout_lines),
        "ui stderr": "\n".join(ui.stderr_lines),
    }


async def _traced_once(url: str, env: dict[str, str]) -> dict[str, str]:
    async with otlp_receiver() as (endpoint, received):
        traced = env | {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}
        done = await run_command("once", "--json", "--database-url", url, env=traced)
    assert done.returncode == 0, done.describe()
    spans = b"".join(received.bodies).decode(errors="replace")
    assert received.bodies, "no trace was sent"
    return _outputs("once (traced)", done) | {"traces": spans}


def _history(plain_url: str) -> str:
    with psycopg.connect(plain_url) as conn:
        rows = conn.execute("SELECT * FROM slot_expiration_cycles").fetchall()
        failures = conn.execute("SELECT * FROM slot_expiration_failures").fetchall()
    return repr(rows) + repr(failures)


COMMANDS: list[tuple[str, ...]] = [
    ("migrate",),
    ("grant", "--role", "postgres", "--dry-run"),
    ("once", "--json"),
    ("status",),
    ("status", "--json"),
    ("status", "--check"),
    ("status", "--check", "--json"),
    ("quarantine", "list"),
    ("slots", "publish", "--tenant", TENANT, "--consultant", CONSULTANT, "--slot"),
    ("slots", "showcase", "--tenant", TENANT),
    ("slots", "list", "--tenant", TENANT, "--consultant", CONSULTANT),
    ("demo", "--interval-seconds", "1"),
]
UNREACHABLE: list[tuple[str, ...]] = [
    ("migrate",),
    ("once",),
    ("status",),
    ("status", "--check"),
    ("quarantine", "list"),
    ("ui", "--addr", "127.0.0.1:0"),
    ("demo",),
]


def _args(command: tuple[str, ...], slot_number: int) -> tuple[str, ...]:
    if command[-1] != "--slot":
        return command
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(
        days=1, hours=slot_number
    )
    return (*command, f"{start.isoformat()}/{(start + timedelta(minutes=30)).isoformat()}")


async def every_output(
    given: Given, plain_url: str, closed: str, tmp: Path, n: int
) -> dict[str, str]:
    """Every command's output with the secrets given: the database's commands in order (each
    may read what one before wrote), the commands refused by a closed port meanwhile (they
    depend on nothing, and each is a process of its own to start)."""
    url, env = given.url(plain_url, tmp), given.env(tmp)
    unreachable = given.url(closed, tmp)

    async def on_the_database() -> dict[str, str]:
        outputs: dict[str, str] = {}
        for command in COMMANDS:
            done = await run_command(*_args(command, n), "--database-url", url, env=env)
            assert done.returncode in (0, 1, 2), done.describe()  # status --check: WARNING is 1
            outputs |= _outputs(" ".join(command[:2]), done)
        outputs |= await _traced_once(url, env)
        outputs |= await _worker_outputs(url, env)
        return outputs | await _page(url, env)

    async def refused(command: tuple[str, ...]) -> dict[str, str]:
        done = await run_command(*command, "--database-url", unreachable, env=env)
        assert done.returncode != 0, done.describe()
        assert "cannot connect" in done.stdout + done.stderr, done.describe()
        return _outputs(f"{' '.join(command[:2])} (unreachable)", done)

    parts = await asyncio.gather(on_the_database(), *(refused(c) for c in UNREACHABLE))
    return {key: text for part in parts for key, text in part.items()} | {
        "history": _history(plain_url)
    }


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(given=secrets_given())
def test_no_command_shows_any_secret_libpq_is_given_wherever_it_comes_from(
    given: Given, database_url: str, closed_port: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tmp = tmp_path_factory.mktemp("secrets")
    closed = f"postgresql://postgres@127.0.0.1:{closed_port}/calendar?hostaddr=127.0.0.1"
    number = len(list(tmp.parent.iterdir()))  # a new slot for each example's publish

    outputs = asyncio.run(every_output(given, database_url, closed, tmp, number))

    assert not leaks(given, outputs), "\n".join(leaks(given, outputs))
    assert "***" in outputs["once (unreachable) stderr"]  # the URL is shown, its secrets not


def test_the_leak_check_finds_a_secret_in_each_form_an_output_could_carry_it() -> None:
    given = Given({"sslpassword": "Sé cret/42&"}, {"sslpassword": "query"})

    for form in shown_forms("Sé cret/42&"):
        assert leaks(given, {"stderr": f"...{form}..."}) == ["sslpassword (query) in stderr"]
