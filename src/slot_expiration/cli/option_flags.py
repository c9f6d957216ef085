"""Each option's flag, variable, help text and row of docs/options.md, from its model's field.

The models (options/settings.py, slots/options.py) are the one source: a field's
type, range, default and description become its click option here and its row
of the options table in docs/options.md (a test holds the file equal to
`options_table()`; `python -m slot_expiration.cli.option_flags` prints it).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from typing import Any, Final, TypeVar

import annotated_types
import click
from pydantic import SecretStr
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from slot_expiration.options import (
    ENV_PREFIX,
    CycleOptions,
    DatabaseOptions,
    StatusOptions,
    UiOptions,
    Unit,
    WorkerOptions,
    flag_name,
)
from slot_expiration.slots import SlotOptions

F = TypeVar("F", bound=Callable[..., Any])


def _own_fields(model: type[DatabaseOptions], base: type[DatabaseOptions]) -> list[str]:
    return [name for name in model.model_fields if name not in base.model_fields]


# Which commands read which option (the table's last column); every command
# reads only the fields of its own model.
COMMANDS: Final[Mapping[str, tuple[str, ...]]] = {
    **dict.fromkeys(
        DatabaseOptions.model_fields,
        (
            "migrate",
            "grant",
            "once",
            "run",
            "pause",
            "resume",
            "status",
            "quarantine",
            "slots",
            "ui",
        ),
    ),
    **dict.fromkeys(_own_fields(CycleOptions, DatabaseOptions), ("once", "run")),
    "lock_timeout_seconds": ("migrate", "once", "run"),
    **dict.fromkeys(_own_fields(WorkerOptions, CycleOptions), ("run",)),
    "horizon_days": ("slots publish",),
    "min_lead_time_minutes": ("slots book", "slots showcase"),
    **dict.fromkeys(_own_fields(UiOptions, DatabaseOptions), ("ui",)),
    "interval_seconds": ("run", "status", "ui"),
    "replicas": ("status", "ui"),
}
MODELS: Final = (WorkerOptions, StatusOptions, SlotOptions, UiOptions)
# Variables of the product that are not options of a command.
OTHER_VARIABLES: Final = frozenset({"SLOT_EXPIRATION_PG_BINDIR"})


def variable(name: str) -> str:
    return f"{ENV_PREFIX}{name.upper()}"


def _field(model: type[BaseSettings], name: str) -> FieldInfo:
    return model.model_fields[name]


def allowed_text(field: FieldInfo) -> str:
    """The values a field accepts, from its type and range: `1..10000`, `> 0`, ..."""
    extra = field.json_schema_extra
    if isinstance(extra, dict) and isinstance(extra.get("allowed"), str):
        return str(extra["allowed"])
    kind = field.annotation
    if kind is bool:
        return "on/off"
    if isinstance(kind, type) and issubclass(kind, Enum):
        return ", ".join(str(member.value) for member in kind)
    low, high = _bounds(field.metadata)
    if low is not None and high is not None and low[0] == ">=":
        return f"{_number(low[1])}..{_number(high[1])}"
    parts = [f"{bound[0]} {_number(bound[1])}" for bound in (low, high) if bound is not None]
    return ", ".join(parts) or "text"


def _bounds(metadata: Iterable[Any]) -> tuple[tuple[str, Any] | None, tuple[str, Any] | None]:
    low: tuple[str, Any] | None = None
    high: tuple[str, Any] | None = None
    for item in metadata:
        if isinstance(item, annotated_types.Ge):
            low = (">=", item.ge)
        elif isinstance(item, annotated_types.Gt):
            low = (">", item.gt)
        elif isinstance(item, annotated_types.Le):
            high = ("<=", item.le)
        elif isinstance(item, annotated_types.Lt):
            high = ("<", item.lt)
    return low, high


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def default_text(field: FieldInfo) -> str:
    value = field.default
    if value is None or isinstance(value, SecretStr):
        return "(none)"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, str):
        return value or "''"
    return _number(value)


def help_text(field: FieldInfo) -> str:
    return f"{field.description} Allowed: {allowed_text(field)}. [default: {default_text(field)}]"


def option(model: type[BaseSettings], name: str, *, environment: bool = True) -> Callable[[F], F]:
    """The click option of a model's field: its flag and (unless the command reads no
    environment) its variable, its help from the field. Click only reads the text; the
    model checks the value, so a flag and a variable obey the same rules and name both
    in their errors."""
    field = _field(model, name)
    long = flag_name(model, name)
    if long is None:
        raise ValueError(f"{name} is read from {variable(name)} only: it has no flag")
    common: dict[str, Any] = {"help": help_text(field)}
    if environment:
        common |= {"envvar": variable(name), "show_envvar": True}
    kind = field.annotation
    if kind is bool:
        return click.option(f"{long}/--no-{long[2:]}", name, default=None, **common)
    if isinstance(kind, type) and issubclass(kind, Enum):
        choice = click.Choice([str(member.value) for member in kind], case_sensitive=False)
        return click.option(long, name, type=choice, **common)
    return click.option(long, name, type=str, metavar=_metavar(field), **common)


def _metavar(field: FieldInfo) -> str:
    """The field's unit (options/settings.py, `Unit`), else its type's name."""
    unit = next((item for item in field.metadata if isinstance(item, Unit)), None)
    if unit is not None:
        return unit.metavar
    if field.annotation is int:
        return "INTEGER"
    return "NUMBER" if field.annotation is float else "TEXT"


def options(model: type[BaseSettings], *names: str, environment: bool = True) -> Callable[[F], F]:
    """Several options of one model, in the order given (as --help lists them)."""

    def decorate(command: F) -> F:
        for name in reversed(names):
            command = option(model, name, environment=environment)(command)
        return command

    return decorate


def known_variables() -> frozenset[str]:
    names = {name for model in MODELS for name in model.model_fields}
    return frozenset({variable(name) for name in names} | OTHER_VARIABLES)


def unknown_variable_warnings(environ: Mapping[str, str] | None = None) -> list[str]:
    """One line per SLOT_EXPIRATION_* variable that no command reads, naming the
    closest real one (a misspelling is otherwise silently ignored)."""
    given = os.environ if environ is None else environ
    known = known_variables()
    lines = []
    # Compared without the prefix they all share, which would make anything look close.
    suffixes = {name.removeprefix(ENV_PREFIX): name for name in known}
    for name in sorted(n for n in given if n.startswith(ENV_PREFIX) and n not in known):
        close = difflib.get_close_matches(name.removeprefix(ENV_PREFIX), sorted(suffixes), n=1)
        hint = f"; did you mean {suffixes[close[0]]}?" if close else "; see --help for them"
        lines.append(f"{name} is not a variable of slot-expiration (ignored){hint}")
    return lines


def options_table() -> str:
    """The options table of docs/options.md, one row per option of every command."""
    rows = [
        "| flag | environment variable | default | allowed | meaning | commands |",
        "|---|---|---|---|---|---|",
    ]
    seen: set[str] = set()
    for model in MODELS:
        for name, field in model.model_fields.items():
            if name in seen:
                continue
            seen.add(name)
            long = flag_name(model, name)
            cells = (
                f"`{long}`" if long else "(environment only)",
                f"`{variable(name)}`",
                default_text(field),
                allowed_text(field),
                field.description or "",
                ", ".join(f"`{command}`" for command in COMMANDS[name]),
            )
            rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(options_table())
