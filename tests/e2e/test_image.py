"""The container image users deploy, built by ./scripts/image and run by podman against the
suite's loopback PostgreSQL, hardened as the deploy kit runs it (read-only root, no
capability, user 10001): every command an operator starts from it.

Where podman cannot run at all, these tests fail saying so: they never pass by skipping.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest

from slot_expiration.domain import SlotStatus
from tests.support.artifact import REPOSITORY, build_wheel, installed_package, suite_wheel
from tests.support.database import SlotDatabase
from tests.support.podman import (
    BUILD_TIMEOUT_SECONDS,
    PodmanUnavailableError,
    image_under_test,
    process_uid,
    run_once,
    started,
)
from tests.support.roles import PasswordRole
from tests.support.slots import AS_OF, past_slots

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(BUILD_TIMEOUT_SECONDS + 180)]

VERSION = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]["version"]
HTTP_TIMEOUT = aiohttp.ClientTimeout(total=10)
IMAGE_USER = 10001
# The package's files with their SHA-256, as the image's own Python sees them.
HASH_FILES = """
import hashlib, json, pathlib, slot_expiration
root = pathlib.Path(slot_expiration.__file__).parent
files = [p for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
print(json.dumps({p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                  for p in files}))
"""
FIND_BENCHMARK = "import importlib.util as u; print(u.find_spec('benchmarks'))"


@pytest.fixture(scope="session")
def image() -> Iterator[str]:
    try:
        yield image_under_test()
    except PodmanUnavailableError as exc:
        pytest.fail(f"the image cannot be built or run here: {exc}")


def _hashes(root: Path) -> dict[str, str]:
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def _as(database_url: str, user: str) -> str:
    """The URL as another role, its password left to PGPASSWORD (never in a URL)."""
    parts = urlsplit(database_url)
    return parts._replace(netloc=f"{user}@{parts.hostname}:{parts.port}").geturl()


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession(timeout=HTTP_TIMEOUT) as session, session.get(url) as reply:
        return reply.status, await reply.text()


async def test_the_image_holds_the_tested_wheel_its_version_and_no_benchmark(image: str) -> None:
    version = await run_once(image, "--version")
    files = await run_once(image, "-c", HASH_FILES, entrypoint="python")
    benchmark = await run_once(image, "-c", FIND_BENCHMARK, entrypoint="python")

    assert version.returncode == 0, version.describe()
    assert version.stdout.strip() == f"slot-expiration, version {VERSION}"
    assert files.returncode == 0, files.describe()
    assert json.loads(files.stdout) == _hashes(installed_package())
    assert benchmark.stdout.strip() == "None", benchmark.describe()


async def test_the_image_migrates_grants_and_expires_due_slots_as_the_granted_role(
    image: str, empty_database_url: str, role: PasswordRole
) -> None:
    owner = {"SLOT_EXPIRATION_DATABASE_URL": empty_database_url}
    worker = {
        "SLOT_EXPIRATION_DATABASE_URL": _as(empty_database_url, role.name),
        "PGPASSWORD": role.password,
    }

    migrated = await run_once(image, "migrate", env=owner)
    granted = await run_once(image, "grant", "--role", role.name, env=owner)
    async with SlotDatabase.open(empty_database_url) as db:
        due = await db.insert(past_slots(7))
        once = await run_once(image, "once", "--json", "--as-of", AS_OF.isoformat(), env=worker)
        statuses = await db.statuses()

    assert migrated.returncode == 0, migrated.describe()
    assert granted.returncode == 0, granted.describe()
    assert once.returncode == 0, once.describe()
    assert json.loads(once.stdout)["expired_count"] == 7
    assert {statuses[slot.id] for slot in due} == {SlotStatus.EXPIRED}
    assert role.password not in migrated.stderr + granted.stderr + once.stderr


async def test_run_in_the_image_is_ready_exports_metrics_as_user_10001_and_stops_on_sigterm(
    image: str, database_url: str
) -> None:
    env = {
        "SLOT_EXPIRATION_DATABASE_URL": database_url,
        "SLOT_EXPIRATION_METRICS_ADDR": "127.0.0.1:0",  # a free port, logged once bound
    }

    async with started(image, "run", env=env) as worker:
        serving = json.loads(await worker.until_logged('"endpoint.serving"'))
        base = str(serving["url"]).rstrip("/")
        await worker.until_logged('"cycle.completed"')
        health, _ = await _get(f"{base}/healthz")
        ready, _ = await _get(f"{base}/readyz")
        metrics_status, metrics = await _get(f"{base}/metrics")
        details = await worker.inspect()
        state, config = details["State"], details["Config"]
        assert isinstance(state, dict)
        assert isinstance(config, dict)
        uid = process_uid(int(state["Pid"]))
        exit_status = await worker.stop_with("TERM")
        logs = await worker.logs()

    assert (health, ready, metrics_status) == (200, 200, 200)
    assert f'calendar_slot_expiration_build_info{{version="{VERSION}"}} 1.0' in metrics
    assert uid == IMAGE_USER
    assert config["User"] == f"{IMAGE_USER}:{IMAGE_USER}"
    assert exit_status == 0, logs.describe()
    assert '"worker.stopped"' in logs.stderr


async def test_ui_in_the_image_serves_the_page_with_its_stylesheet(
    image: str, database_url: str
) -> None:
    stylesheet = (installed_package() / "ui" / "templates" / "page.css").read_text()

    async with started(image, "ui", "--addr", "127.0.0.1:0", "--database-url", database_url) as ui:
        line = await ui.until_logged("ui: serving http://")
        page_url = line.split("serving ", 1)[1].split(" ", 1)[0]
        status, page = await _get(page_url)

    assert status == 200, page[:500]
    assert f"<style>{stylesheet}</style>" in page


def _podman(*args: str) -> str:
    return subprocess.run(
        ["podman", *args], capture_output=True, check=True, text=True, timeout=120
    ).stdout


def test_a_second_build_of_the_same_commit_reuses_every_layer_and_leaves_no_dangling_image(
    image: str, tmp_path: Path
) -> None:
    """The wheel is built again (the same bytes: its dates are the commit's), and the image
    with it: every step after FROM comes from the cache, the image is the one under test,
    and neither build left an image without a name (the build stage's included)."""
    wheel = build_wheel(tmp_path)
    tested = suite_wheel()
    if tested is not None:
        assert wheel.read_bytes() == tested.read_bytes(), "the wheel is not reproducible"
    before = _podman("image", "inspect", "--format", "{{.Id}}", image).strip()

    done = subprocess.run(
        ["./scripts/image", "--offline", "--wheel", str(wheel), "--also-tag", image],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_SECONDS,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    steps = [line for line in done.stderr.splitlines() if re.search(r"STEP \d+/\d+: ", line)]
    rebuilt = [line for line in steps if " FROM " not in line]
    assert len(re.findall(r"(?m)^--> Using cache ", done.stderr)) == len(rebuilt), done.stderr
    assert _podman("image", "inspect", "--format", "{{.Id}}", image).strip() == before
    made = set(re.findall(r"(?m)^--> (?:Using cache )?([0-9a-f]{11,64})$", done.stderr))
    dangling = _podman("images", "--filter", "dangling=true", "--quiet", "--no-trunc").split()
    left = [d for d in dangling if any(d.removeprefix("sha256:").startswith(m) for m in made)]
    assert not left, f"images left without a name: {left}"
