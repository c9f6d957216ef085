"""The benchmark command's options, checked before anything runs.

The benchmark reads no SLOT_EXPIRATION_* variable: it writes to the database
it is given, so that database must be named on its command line, never picked
up from a deployment's environment.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.plan import Mode, Section
from slot_expiration.options import OptionsError, SynchronousCommit, WorkerOptions, load_settings
from slot_expiration.options.database_url import check_database_url, redact_url

DEFAULT_JSON_OUT = Path("bench-results.json")


class BenchOptionsError(ValueError):
    """A wrong option; the message names it and never echoes a password."""


# The worker's own defaults, from its options model (the one place they are written).
_WORKER_DEFAULTS = load_settings(WorkerOptions, environment=False)


@dataclass(frozen=True, slots=True)
class WorkerTuning:
    """The worker's own tuning options, passed on to every worker the run starts (the
    sections that compare one setting with another set it themselves)."""

    prepared_statements: bool = False  # --prepared-statements
    batch_pause_seconds: float = 0.0  # --batch-pause-seconds (drain pacing)
    synchronous_commit: SynchronousCommit = _WORKER_DEFAULTS.synchronous_commit

    def flags(self) -> tuple[str, ...]:
        """The run's flags that differ from the worker's defaults (to reproduce the run)."""
        flags: list[str] = []
        if self.prepared_statements:
            flags.append("--prepared-statements")
        if self.batch_pause_seconds:
            flags.append(f"--batch-pause-seconds {self.batch_pause_seconds:g}")
        if self.synchronous_commit is not _WORKER_DEFAULTS.synchronous_commit:
            flags.append(f"--synchronous-commit {self.synchronous_commit.value}")
        return tuple(flags)


@dataclass(frozen=True, slots=True)
class BenchOptions:
    mode: Mode
    sections: tuple[Section, ...]
    json_out: Path
    database_url: str | None  # None: a private embedded server
    worker: WorkerTuning = field(default_factory=WorkerTuning)
    server_settings: tuple[str, ...] = ()  # NAME=VALUE for the embedded server


def bench_options(  # noqa: PLR0913 - one keyword per option of the command
    *,
    quick: bool,
    full: bool,
    sections: str | None,
    json_out: str | None,
    database_url: str | None,
    prepared_statements: bool | None = None,
    batch_pause_seconds: str | float | None = None,
    synchronous_commit: str | None = None,
    server_setting: tuple[str, ...] = (),
) -> BenchOptions:
    url = check_url(database_url)
    return BenchOptions(
        mode=choose_mode(quick=quick, full=full),
        sections=parse_sections(sections),
        json_out=check_json_out(json_out),
        database_url=url,
        worker=worker_tuning(prepared_statements, batch_pause_seconds, synchronous_commit),
        server_settings=check_server_settings(server_setting, given_database=url is not None),
    )


def worker_tuning(
    prepared_statements: bool | None,
    batch_pause_seconds: str | float | None,
    synchronous_commit: str | None = None,
) -> WorkerTuning:
    """The worker's options the run passes on, checked by the worker's own model."""
    try:
        checked = load_settings(
            WorkerOptions,
            environment=False,
            prepared_statements=prepared_statements,
            batch_pause_seconds=batch_pause_seconds,
            synchronous_commit=synchronous_commit,
        )
    except OptionsError as exc:
        raise BenchOptionsError(str(exc)) from None
    return WorkerTuning(
        checked.prepared_statements, checked.batch_pause_seconds, checked.synchronous_commit
    )


_SETTING_NAME = re.compile(r"[a-z][a-z0-9_.]*")


def check_server_settings(settings: Sequence[str], *, given_database: bool) -> tuple[str, ...]:
    """`name=value` settings for the embedded server; each name once."""
    if settings and given_database:
        raise BenchOptionsError(
            "--server-setting applies to the embedded server only: set it on the server "
            "that --database-url names"
        )
    names: set[str] = set()
    for setting in settings:
        name, equals, value = setting.partition("=")
        if not equals or not _SETTING_NAME.fullmatch(name) or not value.strip():
            raise BenchOptionsError(f"--server-setting: {setting!r} is not NAME=VALUE")
        if name in names:
            raise BenchOptionsError(f"--server-setting: {name} given twice")
        names.add(name)
    return tuple(settings)


def choose_mode(*, quick: bool, full: bool) -> Mode:
    if quick and full:
        raise BenchOptionsError("--quick and --full exclude each other: choose one")
    if quick:
        return Mode.QUICK
    return Mode.FULL if full else Mode.DEFAULT


def parse_sections(text: str | None) -> tuple[Section, ...]:
    """`a,c,e` -> those sections in the order a run measures them; None -> all."""
    if text is None:
        return tuple(Section)
    wanted = [part.strip().lower() for part in text.split(",")]
    known = {section.value: section for section in Section}
    unknown = [part for part in wanted if part not in known]
    if unknown or not wanted:
        choices = ", ".join(sorted(known))
        raise BenchOptionsError(
            f"--sections: unknown section {unknown[0]!r} (choose from "
            f"{choices}, separated by commas)"
        )
    return tuple(section for section in Section if section.value in wanted)


def check_json_out(text: str | None) -> Path:
    """A file path whose folder exists (the file itself is replaced)."""
    path = Path(text) if text is not None else DEFAULT_JSON_OUT
    if not path.name or path.is_dir():
        raise BenchOptionsError(f"--json-out: {str(path)!r} is a folder, not a file")
    folder = path.parent if str(path.parent) else Path()
    if not folder.is_dir():
        raise BenchOptionsError(f"--json-out: folder {str(folder)!r} does not exist")
    return path


def check_url(url: str | None) -> str | None:
    if url is None:
        return None
    try:
        check_database_url(url)
    except ValueError as exc:
        raise BenchOptionsError(f"--database-url: {exc}") from None
    return url


def reproduce_command(options: BenchOptions) -> str:
    """The command line that runs the same benchmark again (a password shown as ***)."""
    parts = ["./scripts/bench"]
    if options.mode is not Mode.DEFAULT:
        parts.append(f"--{options.mode.value}")
    if options.sections != tuple(Section):
        parts += ["--sections", ",".join(section.value for section in options.sections)]
    parts += options.worker.flags()
    for setting in options.server_settings:
        parts += ["--server-setting", setting]
    if options.database_url is not None:
        parts += ["--database-url", f"'{redact_url(options.database_url)}'"]
    if options.json_out != DEFAULT_JSON_OUT:
        parts += ["--json-out", str(options.json_out)]
    return " ".join(parts)
