"""The Containerfile read as a list of instructions, and its build context as podman and
docker would send it (the subset of .containerignore patterns that file uses: `*`, `**`,
`?`, `!` exceptions, a pattern also matching everything below a directory it names)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
CONTAINERFILE = REPOSITORY / "Containerfile"
CONTAINERIGNORE = REPOSITORY / ".containerignore"
DOCKERIGNORE = REPOSITORY / ".dockerignore"


@dataclass(frozen=True, slots=True)
class Instruction:
    keyword: str  # upper case: FROM, RUN, COPY, ...
    arguments: str


@dataclass(frozen=True, slots=True)
class Stage:
    base: str
    name: str | None
    instructions: tuple[Instruction, ...]

    def all(self, keyword: str) -> list[str]:
        return [i.arguments for i in self.instructions if i.keyword == keyword]


def instructions(text: str) -> list[Instruction]:
    found: list[Instruction] = []
    pending = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):  # a comment inside a continued RUN
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        line = (pending + stripped).strip()
        pending = ""
        keyword, _, arguments = line.partition(" ")
        found.append(Instruction(keyword.upper(), " ".join(arguments.split())))
    return found


def stages(text: str) -> list[Stage]:
    """The build stages, in order; instructions before the first FROM (ARG) are left out."""
    result: list[Stage] = []
    current: list[Instruction] = []
    header: tuple[str, str | None] | None = None
    for instruction in instructions(text):
        if instruction.keyword == "FROM":
            if header is not None:
                result.append(Stage(header[0], header[1], tuple(current)))
            words = instruction.arguments.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            header, current = (words[0], name), []
        elif header is not None:
            current.append(instruction)
    if header is not None:
        result.append(Stage(header[0], header[1], tuple(current)))
    return result


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    parts = re.split(r"(\*\*/|\*\*|\*|\?)", pattern.strip("/"))
    wildcard = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}
    body = "".join(wildcard.get(part, re.escape(part)) for part in parts)
    return re.compile(f"{body}(?:/.*)?")  # a directory's pattern covers what is below it


def ignore_rules(ignore_file: Path) -> list[tuple[bool, re.Pattern[str]]]:
    rules: list[tuple[bool, re.Pattern[str]]] = []
    for raw in ignore_file.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            rules.append((not line.startswith("!"), _pattern_regex(line.lstrip("!"))))
    return rules


def in_context(relative: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Whether the file at `relative` (a path below the context root) is sent; the last
    matching pattern decides."""
    excluded = False
    for excluding, regex in rules:
        if regex.fullmatch(relative):
            excluded = excluding
    return not excluded


def tracked_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPOSITORY, capture_output=True, check=True, timeout=60
    )
    return [name for name in listed.stdout.decode().split("\0") if name]
