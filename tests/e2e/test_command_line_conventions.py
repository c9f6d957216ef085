"""The command line's conventions: a usage error is one line on stderr and exit 2, whatever
is missing; `once` and `run` write only JSON records on stderr (or the final error line),
whatever writes there, libpq included; a setting they cannot act on is said once."""

from __future__ import annotations

import signal

import pytest

from tests.e2e.command import run_command, started

pytestmark = pytest.mark.e2e

USAGE = 2


@pytest.mark.parametrize(
    ("args", "commands"),
    [
        ((), "demo, grant, migrate, once, pause, quarantine, resume, run, slots, status, ui"),
        (("slots",), "archive, book, list, publish, showcase"),
        (("quarantine",), "list, park, retry"),
    ],
    ids=["slot-expiration", "slots", "quarantine"],
)
async def test_a_missing_command_is_one_usage_line_on_stderr_and_exit_2(
    args: tuple[str, ...], commands: str
) -> None:
    done = await run_command(*args)

    assert done.returncode == USAGE, done.describe()
    assert done.stdout == "", done.describe()
    (line,) = done.stderr.splitlines()
    program = " ".join(("slot-expiration", *args))
    assert line == (
        f"slot-expiration: error: missing command, one of: {commands}; "
        f"usage: {program} [OPTIONS] COMMAND [ARGS]... (--help for more)"
    )


async def test_libpqs_own_warning_reaches_stderr_as_a_json_record(secret_url: str) -> None:
    """libpq prints this itself (C's stderr) when its password file is not a plain file,
    as PGPASSFILE=/dev/null is in many containers; the URL here has a password, so libpq
    needs none from the file: the warning comes before it is known."""
    no_password = secret_url.replace(":s3cretPW@", "@")
    assert no_password != secret_url

    done = await run_command("once", "--database-url", no_password, env={"PGPASSFILE": "/dev/null"})

    assert done.returncode == 0, done.describe()
    events = done.log_events()  # every line a JSON object, or the test fails here
    native = [e for e in events if e["event"] == "native.stderr"]
    assert native, done.describe()
    assert native[0]["level"] == "warning"
    assert native[0]["detail"] == 'password file "/dev/null" is not a plain file'


async def test_run_writes_libpqs_warnings_as_records_too(secret_url: str) -> None:
    no_password = secret_url.replace(":s3cretPW@", "@")
    args = ("run", "--interval-seconds", "1", "--database-url", no_password)

    async with started(*args, env={"PGPASSFILE": "/dev/null"}) as worker:
        await worker.until(lambda: worker.logged("cycle.completed"), "a cycle completed")
        worker.send_signal(signal.SIGTERM)
        done = await worker.wait()

    assert done.returncode == 0, done.describe()
    native = [e for e in done.log_events() if e["event"] == "native.stderr"]
    assert native, done.describe()
    assert {e["detail"] for e in native} == {'password file "/dev/null" is not a plain file'}


async def test_an_exporter_the_worker_cannot_use_is_one_warning_record(secret_url: str) -> None:
    env = {"OTEL_TRACES_EXPORTER": "zipkin"}

    done = await run_command("once", "--database-url", secret_url, env=env)

    assert done.returncode == 0, done.describe()
    events = done.log_events()
    warned = [e for e in events if e["event"] == "traces.unsupported_exporter"]
    assert len(warned) == 1, done.describe()
    assert warned[0]["level"] == "warning"
    assert "zipkin" in warned[0]["detail"]
    assert "OTLP only" in warned[0]["detail"]


async def test_otlp_and_none_are_exporters_it_knows_and_warn_of_nothing(secret_url: str) -> None:
    done = await run_command(
        "once", "--database-url", secret_url, env={"OTEL_TRACES_EXPORTER": "none"}
    )

    assert done.returncode == 0, done.describe()
    assert not [e for e in done.log_events() if e["level"] == "warning"], done.describe()
