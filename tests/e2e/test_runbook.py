"""Every command and SQL block of docs/runbooks/slot-expiration.md works: run in the runbook's
order against a database with a backlog and a poison slot, beside a running worker."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from slot_expiration.domain import SlotStatus
from tests.e2e.command import PROGRAM, clean_env, started
from tests.e2e.endpoint import endpoint_url
from tests.support.database import SlotDatabase
from tests.support.promtool import RUNBOOK
from tests.support.slots import make_slot

pytestmark = pytest.mark.e2e

STEP_TIMEOUT_SECONDS = 60.0
_FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True, slots=True)
class Step:
    kind: str  # "bash": one command line; "sql": one psql script
    text: str


def runbook_steps() -> list[Step]:
    steps: list[Step] = []
    for language, body in _FENCE.findall(RUNBOOK.read_text(encoding="utf-8")):
        if language == "bash":
            lines = [line.strip() for line in body.splitlines()]
            steps += [Step("bash", line) for line in lines if line and not line.startswith("#")]
        elif language == "sql":
            steps.append(Step("sql", body))
        else:
            assert language == "text", f"runbook block of unknown kind {language!r}"
    return steps


def test_the_runbook_quotes_commands_and_sql_for_both_scenarios() -> None:
    steps = runbook_steps()
    commands = [step.text for step in steps if step.kind == "bash"]

    assert "slot-expiration status" in commands
    assert "slot-expiration status --json" in commands
    assert any(c.startswith('curl -s "$METRICS/healthz"') for c in commands)
    assert any("slot_expiration_failures" in step.text for step in steps if step.kind == "sql")
    assert len([step for step in steps if step.kind == "sql"]) >= 8


async def _run(step: Step, env: dict[str, str]) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of one runbook step."""
    args: tuple[str, ...]
    if step.kind == "bash":
        args, stdin = ("bash", "-o", "pipefail", "-c", step.text), b""  # no terminal: EOF
    else:
        url = '"$SLOT_EXPIRATION_DATABASE_URL"'
        script = f'psql {url} -X -q -v ON_ERROR_STOP=1 -v slot_id="$SLOT_ID" -f -'
        args, stdin = ("bash", "-c", script), step.text.encode()
    process = await asyncio.create_subprocess_exec(
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        async with asyncio.timeout(STEP_TIMEOUT_SECONDS):
            output, errors = await process.communicate(stdin)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"runbook step still running after 60 s:\n{step.text}") from None
    text = output.decode(errors="replace")
    return process.returncode or 0, text, errors.decode(errors="replace")


async def _install_expiry_refusal(db: SlotDatabase, slot_id: str) -> None:
    """The database refuses this slot's expiry (and nothing else about it), as a rule would."""
    await db.execute(
        "CREATE FUNCTION refuse_expiry() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF NEW.id = '{slot_id}' AND NEW.status = 'Expired' THEN "
        "RAISE EXCEPTION 'slot refuses to expire'; END IF; RETURN NEW; END $$"
    )
    await db.execute(
        "CREATE TRIGGER refuse_expiry BEFORE UPDATE ON availability_slots "
        "FOR EACH ROW EXECUTE FUNCTION refuse_expiry()"
    )


async def test_every_runbook_command_and_sql_block_works_in_order(
    db: SlotDatabase, secret_url: str
) -> None:
    now = datetime.now(UTC)
    poison = make_slot(timedelta(hours=-6), as_of=now)
    await db.insert([poison, *(make_slot(timedelta(minutes=-m), as_of=now) for m in range(1, 30))])
    await _install_expiry_refusal(db, str(poison.id))
    run = ("run", "--interval-seconds", "3600", "--batch-size", "5")

    async with started(*run, "--database-url", secret_url) as worker:
        metrics = await endpoint_url(worker)
        await worker.until(lambda: worker.logged("cycle.completed"), "the first cycle")
        env = clean_env(
            {
                "PATH": f"{PROGRAM.parent}{os.pathsep}{os.environ['PATH']}",
                "SLOT_EXPIRATION_DATABASE_URL": secret_url,
                "METRICS": metrics,
                "SLOT_ID": str(poison.id),
            }
        )
        outputs: list[str] = []
        for step in runbook_steps():
            code, output, errors = await _run(step, env)
            assert code == 0, f"runbook step failed ({code}):\n{step.text}\n{output}\n{errors}"
            outputs.append(output)
        worker.send_signal(signal.SIGTERM)
        done = await worker.wait()

    assert done.returncode == 0, done.describe()
    first_status = outputs[runbook_steps().index(Step("bash", "slot-expiration status"))]
    assert f"slot {poison.id} of tenant" in first_status  # the poison slot is listed
    assert any('"live": true' in output for output in outputs)
    assert any(json.loads(o)["failed_count"] == 1 for o in outputs if o.startswith('{"expired'))
    assert (await db.statuses())[poison.id] is SlotStatus.ARCHIVED  # the runbook's last fix
