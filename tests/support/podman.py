"""The worker's image under podman: built by ./scripts/image (the one command users run), started
with the flags this machine needs (the same function the script uses), watched from outside."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from uuid import uuid4

from tests.support.artifact import IMAGE_VARIABLE, REPOSITORY, suite_wheel

# A build from nothing (a Debian base made with mmdebstrap, the locked wheels downloaded).
BUILD_TIMEOUT_SECONDS = 900
COMMAND_TIMEOUT_SECONDS = 60.0
POLL_SECONDS = 0.1


class PodmanUnavailableError(AssertionError):
    """podman cannot run here: the image tests fail (they never pass by skipping)."""


def machine_args() -> list[str]:
    """podman's flags for this machine (runtime, ulimits), from scripts/lib/setup.sh."""
    done = subprocess.run(
        ["bash", "-c", "source scripts/lib/setup.sh && podman_machine_args"],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return done.stdout.split("\n")[:-1]


def image_under_test() -> str:
    """The image ./scripts/test built (SUITE_IMAGE), else one built now by ./scripts/image
    --offline from the installed wheel; its name is the script's last line."""
    named = os.environ.get(IMAGE_VARIABLE)
    if named:
        return named
    if shutil.which("podman") is None:
        raise PodmanUnavailableError("podman is not installed: ./scripts/test installs it")
    wheel = suite_wheel()
    done = subprocess.run(
        ["./scripts/image", "--offline", *(["--wheel", str(wheel)] if wheel else [])],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        check=False,
        timeout=BUILD_TIMEOUT_SECONDS,
    )
    if done.returncode != 0:
        raise PodmanUnavailableError(f"./scripts/image failed:\n{done.stderr[-4000:]}")
    return done.stdout.strip().splitlines()[-1]


@dataclass(frozen=True, slots=True)
class Done:
    returncode: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        return f"exit {self.returncode}\n--- stdout\n{self.stdout}--- stderr\n{self.stderr}"


async def podman(*args: str, timeout_seconds: float = COMMAND_TIMEOUT_SECONDS) -> Done:
    process = await asyncio.create_subprocess_exec(
        "podman",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(timeout_seconds):
            out, err = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(
            f"podman {' '.join(args)}: no answer in {timeout_seconds:g} s"
        ) from None
    assert process.returncode is not None
    return Done(process.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


def run_args(
    image: str,
    env: Mapping[str, str],
    name: str | None = None,
    entrypoint: str | None = None,
) -> list[str]:
    """As an operator runs it hardened: the host's loopback (the suite's PostgreSQL listens
    there), a read-only root file system, no capability."""
    variables = [part for key, value in env.items() for part in ("--env", f"{key}={value}")]
    named = ["--name", name] if name else []
    other_entrypoint = ["--entrypoint", entrypoint] if entrypoint else []
    return [
        *machine_args(),
        "--network=host",
        "--read-only",
        "--cap-drop=ALL",
        *named,
        *other_entrypoint,
        *variables,
        image,
    ]


async def run_once(
    image: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    entrypoint: str | None = None,
) -> Done:
    """`podman run --rm IMAGE args...` to its end."""
    return await podman("run", "--rm", *run_args(image, env or {}, entrypoint=entrypoint), *args)


@dataclass(frozen=True, slots=True)
class Container:
    name: str

    async def logs(self) -> Done:
        return await podman("logs", self.name)

    async def inspect(self) -> dict[str, object]:
        done = await podman("inspect", self.name)
        assert done.returncode == 0, done.describe()
        (found,) = json.loads(done.stdout)
        assert isinstance(found, dict)
        return found

    async def until_logged(self, text: str, timeout_seconds: float = 30.0) -> str:
        """Poll the logs until a line holds `text`; that line."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            logs = await self.logs()
            lines = [line for line in (logs.stdout + logs.stderr).splitlines() if text in line]
            if lines:
                return lines[0]
            state = (await self.inspect())["State"]
            assert isinstance(state, dict)
            if not state.get("Running"):
                raise AssertionError(f"exited before logging {text!r}: {logs.describe()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not logged in {timeout_seconds:g} s")
            await asyncio.sleep(POLL_SECONDS)

    async def stop_with(self, signal_name: str) -> int:
        """Send a signal and wait for the exit; the exit status."""
        sent = await podman("kill", "--signal", signal_name, self.name)
        assert sent.returncode == 0, sent.describe()
        waited = await podman("wait", self.name)
        assert waited.returncode == 0, waited.describe()
        return int(waited.stdout.strip())


@asynccontextmanager
async def started(
    image: str, *args: str, env: Mapping[str, str] | None = None
) -> AsyncIterator[Container]:
    """`podman run --detach`; whatever happens, the container is removed after the block."""
    name = f"slot-expiration-test-{uuid4().hex[:10]}"
    done = await podman("run", "--detach", *run_args(image, env or {}, name), *args)
    assert done.returncode == 0, done.describe()
    try:
        yield Container(name)
    finally:
        with suppress(AssertionError):
            await podman("rm", "--force", "--time", "0", name)


def process_uid(pid: int) -> int:
    """The real user id of a process, as the host's kernel sees it."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for {pid}")
