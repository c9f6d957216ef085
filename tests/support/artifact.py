"""What users install, as the suite sees it: the package's tracked files, the wheel built from
them, and the copy installed into the test environment.

`./scripts/test` builds the wheel once, installs it non-editable into `.venv` and names it in
`SUITE_WHEEL`; every tier then imports and runs that install. `./scripts/test --fast` imports
the source tree instead (an editable install into `.venv-src`), for the unit and integration
tiers only. The guard in tests/conftest.py refuses to start when the installed wheel is not
this checkout's code, and refuses the source tree to every tier that proves the artifact, so
such a test can never pass against a stale or different one.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import slot_expiration

REPOSITORY = Path(__file__).resolve().parents[2]
SOURCE = REPOSITORY / "src"
PACKAGE = "slot_expiration"
WHEEL_VARIABLE = "SUITE_WHEEL"
IMAGE_VARIABLE = "SUITE_IMAGE"


def tracked_package_files() -> list[str]:
    """The package's files under git, as paths inside the wheel (`slot_expiration/...`)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", f"src/{PACKAGE}"],
        cwd=REPOSITORY,
        capture_output=True,
        check=True,
        timeout=60,
    )
    names = [name for name in listed.stdout.decode().split("\0") if name]
    return sorted(name.removeprefix("src/") for name in names)


def wheel_package_files(wheel: Path) -> list[str]:
    """The wheel's files, its `.dist-info` metadata left out."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    return sorted(name for name in names if ".dist-info/" not in name)


@dataclass(frozen=True, slots=True)
class Difference:
    missing: list[str]  # tracked, not in the artifact
    stray: list[str]  # in the artifact, not tracked

    def __bool__(self) -> bool:
        return bool(self.missing or self.stray)

    def describe(self) -> str:
        return f"missing {self.missing or 'nothing'}; stray {self.stray or 'nothing'}"


def compare(tracked: list[str], shipped: list[str]) -> Difference:
    return Difference(
        missing=sorted(set(tracked) - set(shipped)), stray=sorted(set(shipped) - set(tracked))
    )


def installed_package() -> Path:
    return Path(slot_expiration.__file__).resolve().parent


def _source_files(root: Path) -> dict[str, str]:
    """{path below `root`: sha256} of the package's files, bytecode caches left out."""
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        found[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def imported_from_source_tree() -> bool:
    """Whether the package is this checkout's src/ itself (an editable install, PYTHONPATH)."""
    return installed_package().is_relative_to(SOURCE)


def under_test() -> str:
    """What the suite runs, in a few words: the source tree or the installed wheel."""
    if imported_from_source_tree():
        return f"the source tree ({installed_package()})"
    return f"the installed wheel ({installed_package()})"


def stale_install_reason() -> str | None:
    """Why the installed package is not this checkout's code as a wheel installs it, if so
    (never for the source tree: it is the code)."""
    installed = installed_package()
    if imported_from_source_tree():
        return None
    here, there = _source_files(SOURCE / PACKAGE), _source_files(installed)
    changed = sorted(
        {name for name in here.keys() | there.keys() if here.get(name) != there.get(name)}
    )
    if changed:
        shown = ", ".join(changed[:5]) + (" ..." if len(changed) > 5 else "")
        return f"the installed {PACKAGE} ({installed}) differs from src/ in {shown}"
    return None


def suite_wheel() -> Path | None:
    """The wheel ./scripts/test built and installed, when it ran this suite."""
    named = os.environ.get(WHEEL_VARIABLE)
    return Path(named) if named else None


def copy_tracked_files(tree: Path) -> Path:
    """The repository's tracked files, as they are in the work tree, copied into `tree`."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPOSITORY, capture_output=True, check=True, timeout=60
    )
    for name in (n for n in listed.stdout.decode().split("\0") if n):
        source = REPOSITORY / name
        if source.is_file():
            target = tree / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    return tree


def commit_time() -> str:
    """The checkout's commit time, the one ./scripts/test stamps on the wheel's files."""
    return subprocess.run(
        ["git", "log", "-1", "--format=%ct"],
        cwd=REPOSITORY,
        capture_output=True,
        check=True,
        text=True,
        timeout=60,
    ).stdout.strip()


def build_wheel(
    destination: Path, include: list[str] | None = None, tree: Path | None = None
) -> Path:
    """A wheel of the tracked files (a clean copy: nothing local gets in, unless `tree` is
    given: a copy the caller made), built as ./scripts/test builds it: the locked build
    backend, no isolation, no network, the commit's time on its files. `include` limits
    the wheel to the files these globs find, listed one by one as a hand-listed packaging
    would (to test the test)."""
    tree = tree or copy_tracked_files(destination / "tree")
    if include is not None:
        pyproject = tree / "pyproject.toml"
        text = pyproject.read_text(encoding="utf-8")
        listed = sorted(
            {str(path.relative_to(tree)) for glob in include for path in tree.glob(glob)}
        )
        hand_list = ", ".join(f'"{name}"' for name in listed)
        packages = 'packages = ["src/slot_expiration"]'
        assert packages in text, "pyproject.toml's wheel target names no package folder"
        hand_listed = f'only-include = [{hand_list}]\nsources = ["src"]'
        pyproject.write_text(text.replace(packages, hand_listed), encoding="utf-8")
    out = destination / "dist"
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"),
            *("--wheel-dir", str(out), str(tree)),
        ],
        check=True,
        capture_output=True,
        timeout=300,
        env=os.environ | {"SOURCE_DATE_EPOCH": commit_time()},
    )
    (wheel,) = out.glob(f"{PACKAGE}-*.whl")
    return wheel
