"""The Containerfile: linted by hadolint, shaped as docs/deploy.md says, installing only from
the wheels ./scripts/image puts in its context. The image itself is built by ./scripts/image
and run by tests/e2e/test_image.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.containerfile import (
    CONTAINERFILE,
    CONTAINERIGNORE,
    DOCKERIGNORE,
    Stage,
    ignore_rules,
    in_context,
    stages,
    tracked_files,
)

pytestmark = pytest.mark.deploy

HADOLINT = Path(sys.executable).parent / "hadolint"


def _hadolint(path: Path) -> list[dict[str, object]]:
    done = subprocess.run(
        [
            str(HADOLINT),
            *("--format", "json", "--failure-threshold", "style", "--disable-ignore-pragma"),
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=path.parent,
        check=False,
    )
    findings = json.loads(done.stdout or "[]")
    assert isinstance(findings, list), done.stderr
    assert done.returncode == (1 if findings else 0), done.stderr
    return findings


def _stages() -> list[Stage]:
    return stages(CONTAINERFILE.read_text(encoding="utf-8"))


def test_hadolint_finds_nothing_at_any_level() -> None:
    assert _hadolint(CONTAINERFILE) == []


def test_hadolint_flags_a_containerfile_whose_last_user_is_root(tmp_path: Path) -> None:
    weakened = tmp_path / "Containerfile"
    weakened.write_text(
        CONTAINERFILE.read_text(encoding="utf-8").replace("USER 10001:10001", "USER root")
    )

    assert "DL3002" in {finding["code"] for finding in _hadolint(weakened)}


def test_the_image_runs_the_worker_as_a_numeric_non_root_user_and_stops_on_sigterm() -> None:
    build, final = _stages()

    assert build.name == "build"
    assert final.all("USER") == ["10001:10001"]
    assert final.all("STOPSIGNAL") == ["SIGTERM"]
    assert final.all("ENTRYPOINT") == ['["slot-expiration"]']
    assert final.all("CMD") == ['["run"]']
    assert final.all("EXPOSE") == ["9464"]


def test_the_final_stage_compiles_and_downloads_nothing() -> None:
    _, final = _stages()

    assert final.all("RUN") == []
    assert final.all("COPY") == ["--from=build /opt/slot-expiration /opt/slot-expiration"]


def test_every_dependency_is_installed_from_a_hashed_lock_as_a_wheel_with_no_index() -> None:
    build, _ = _stages()
    installs = [
        command
        for run in build.all("RUN")
        for command in run.split("&&")
        if re.search(r"\bpip\b.*\binstall\b", command)
    ]

    assert len(installs) == 3
    from_locks = [c for c in installs if "-r requirements/" in c]
    locks = {lock for c in from_locks for lock in re.findall(r"-r (\S+)", c)}
    assert locks == {"requirements/build.txt", "requirements/runtime.txt"}
    assert all("--require-hashes" in c and "--only-binary=:all:" in c for c in from_locks)
    (own_wheel,) = set(installs) - set(from_locks)
    assert "--no-deps /wheels/slot_expiration-*.whl" in own_wheel
    # pip reads these for every install of the stage: nothing comes from an index.
    environment = " ".join(build.all("ENV"))
    assert "PIP_NO_INDEX=1" in environment
    assert "PIP_FIND_LINKS=/wheels" in environment
    assert build.all("COPY") == ["requirements/ requirements/", "wheels/ /wheels/"]


def test_containerignore_and_dockerignore_are_the_same() -> None:
    assert DOCKERIGNORE.read_text(encoding="utf-8") == CONTAINERIGNORE.read_text(encoding="utf-8")


def test_the_context_holds_what_the_containerfile_copies_and_nothing_local() -> None:
    rules = ignore_rules(CONTAINERIGNORE)
    sent = {path for path in tracked_files() if in_context(path, rules)}

    # The lock files are tracked; wheels/ is not (./scripts/image fills it).
    assert sent == {
        "requirements/build.txt",
        "requirements/runtime.txt",
    }
    assert in_context("wheels/slot_expiration-0.3.0-py3-none-any.whl", rules)
    for local in (".venv/bin/python", "src/slot_expiration/cli/app.py", "wheels/notes.txt"):
        assert not in_context(local, rules), local
