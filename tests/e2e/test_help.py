"""`--help` is the user's manual: each worker option names its environment variable."""

from __future__ import annotations

import pytest

from tests.e2e.command import run_command

pytestmark = pytest.mark.e2e

URL, BATCH, CYCLE, LOGS = (
    "SLOT_EXPIRATION_DATABASE_URL",
    "SLOT_EXPIRATION_BATCH_SIZE",
    "SLOT_EXPIRATION_MAX_CYCLE_SECONDS",
    "SLOT_EXPIRATION_LOG_FORMAT",
)
INTERVAL, GRACE = "SLOT_EXPIRATION_INTERVAL_SECONDS", "SLOT_EXPIRATION_SHUTDOWN_GRACE_SECONDS"
METRICS = "SLOT_EXPIRATION_METRICS_ADDR"
CYCLE_SAFETY = {
    "SLOT_EXPIRATION_MAX_BATCHES_PER_CYCLE",
    "SLOT_EXPIRATION_LOCK_TIMEOUT_SECONDS",
    "SLOT_EXPIRATION_POISON_BACKOFF_SECONDS",
    "SLOT_EXPIRATION_POISON_BACKOFF_MAX_SECONDS",
    "SLOT_EXPIRATION_PREPARED_STATEMENTS",
}


@pytest.mark.parametrize(
    ("command", "variables"),
    [
        ("migrate", {URL}),
        ("grant", {URL}),
        ("once", {URL, BATCH, CYCLE, LOGS, *CYCLE_SAFETY}),
        ("run", {URL, BATCH, INTERVAL, CYCLE, GRACE, LOGS, METRICS, *CYCLE_SAFETY}),
        ("status", {URL}),
    ],
)
async def test_help_of_each_worker_command_lists_its_environment_variables(
    command: str, variables: set[str]
) -> None:
    done = await run_command(command, "--help")

    assert done.returncode == 0, done.describe()
    assert done.stderr == ""
    assert done.stdout.startswith(f"Usage: slot-expiration {command} ")
    # Whole words: the help may wrap lines, never break a variable's name.
    words = set(done.stdout.replace("[", " ").replace("]", " ").split())
    assert variables <= words, done.stdout


async def test_help_of_the_program_lists_every_command() -> None:
    done = await run_command("--help")

    assert done.returncode == 0, done.describe()
    commands = done.stdout.partition("Commands:")[2].split()
    assert {"migrate", "grant", "once", "run", "demo", "status", "slots"} <= set(commands), (
        done.stdout
    )
