"""The Containerfile: linted by hadolint, shaped as docs/deploy.md says, and its build stage
run here step by step (no image registry is reachable, so no image is built): the worker's
environment is installed from the hashed lock files, wheels only, and starts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.containerfile import (
    CONTAINERFILE,
    CONTAINERIGNORE,
    DOCKERIGNORE,
    REPOSITORY,
    Stage,
    ignore_rules,
    in_context,
    stages,
    tracked_files,
)

pytestmark = pytest.mark.deploy

HADOLINT = Path(sys.executable).parent / "hadolint"
INSTALL_TIMEOUT_SECONDS = 300


def _hadolint(path: Path) -> list[dict[str, object]]:
    done = subprocess.run(
        [
            str(HADOLINT),
            *("--format", "json", "--failure-threshold", "style"),
            *("--disable-ignore-pragma", str(path)),
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


def test_every_dependency_is_installed_from_a_hashed_lock_as_a_wheel() -> None:
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
    assert "--no-deps /dist/*.whl" in own_wheel


def test_containerignore_and_dockerignore_are_the_same() -> None:
    assert DOCKERIGNORE.read_text(encoding="utf-8") == CONTAINERIGNORE.read_text(encoding="utf-8")


def test_the_context_holds_what_the_containerfile_copies_and_nothing_local() -> None:
    rules = ignore_rules(CONTAINERIGNORE)
    sent = {path for path in tracked_files() if in_context(path, rules)}

    copied = ["requirements/", "pyproject.toml", "README.md", "src/"]
    for source in copied:
        assert any(path == source or path.startswith(source) for path in sent), source
    assert {path.split("/", 1)[0] for path in sent} == {
        "pyproject.toml",
        "README.md",
        "requirements",
        "src",
    }
    for local in (".venv/bin/python", "src/slot_expiration/__pycache__/app.cpython-311.pyc"):
        assert not in_context(local, rules), local


def test_the_build_stage_run_here_installs_the_locked_worker_which_starts(tmp_path: Path) -> None:
    """The build stage's RUN commands as written, on this machine's Python, with /opt and /dist
    moved below tmp_path; then the final stage's entrypoint from the copied environment."""
    build, final = _stages()
    root, context, bin_dir = tmp_path / "image", tmp_path / "src", tmp_path / "bin"
    rules = ignore_rules(CONTAINERIGNORE)
    for path in (p for p in tracked_files() if in_context(p, rules)):
        (context / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPOSITORY / path, context / path)
    bin_dir.mkdir()
    # `python` as in the image: the interpreter this test's virtual environment was made from.
    (bin_dir / "python").symlink_to(_base_python())
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV"))},
        **_stage_env(build),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PIP_CONFIG_FILE": os.devnull,  # as in the image: no machine-wide pip settings
    }
    env.pop("PIP_NO_CACHE_DIR", None)  # the local download cache may serve the same files

    for run in build.all("RUN"):
        command = _moved(run, root)
        done = subprocess.run(
            ["sh", "-c", command],
            cwd=context,
            env=env,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_SECONDS,
            check=False,
        )
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"

    app = root / "opt" / "slot-expiration"
    assert not (app / "bin" / "pip").exists()
    final_env = {**os.environ, **_stage_env(final, root)}
    entrypoint = [*json.loads(final.all("ENTRYPOINT")[0]), "--version"]
    started = subprocess.run(
        entrypoint, env=final_env, capture_output=True, text=True, timeout=60, check=False
    )
    assert started.returncode == 0, started.stderr
    assert shutil.which("slot-expiration", path=final_env["PATH"]) == str(
        app / "bin" / "slot-expiration"
    )


def _base_python() -> Path:
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    python = Path(sys.base_prefix) / "bin" / f"python{version}"
    assert python.exists(), python
    return python


def _moved(text: str, root: Path) -> str:
    return re.sub(r"(?<![\w.])/(opt|dist)\b", lambda m: f"{root}/{m.group(1)}", text)


def _stage_env(stage: Stage, root: Path | None = None) -> dict[str, str]:
    """The stage's ENV settings (KEY=VALUE pairs; ${PATH} expanded from this process)."""
    found: dict[str, str] = {}
    for arguments in stage.all("ENV"):
        for key, quoted in re.findall(r'(\w+)=("[^"]*"|\S+)', arguments):
            value = quoted.strip('"')
            value = _moved(value, root) if root is not None else value
            found[key] = value.replace("${PATH}", os.environ["PATH"])
    return found
