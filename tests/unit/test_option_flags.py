"""Each command reads only its own options; flags, help, defaults and the README's table all
come from the one options model; an unknown SLOT_EXPIRATION_* variable is named, not ignored."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from slot_expiration.cli.app import cli
from slot_expiration.cli.option_flags import (
    allowed_text,
    default_text,
    help_text,
    known_variables,
    options_table,
    unknown_variable_warnings,
    variable,
)
from slot_expiration.options import (
    MIN_INTERVAL_SECONDS,
    CycleOptions,
    DatabaseOptions,
    MigrateOptions,
    OptionsError,
    StatusOptions,
    UiOptions,
    WorkerOptions,
    load_settings,
)
from slot_expiration.slots import SlotOptions

OPTIONS_DOC = Path(__file__).parents[2] / "docs" / "options.md"


pytestmark = pytest.mark.usefixtures("no_worker_environment")


def test_a_bad_value_in_another_commands_variable_breaks_no_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLOT_EXPIRATION_INTERVAL_SECONDS", "abc")
    monkeypatch.setenv("SLOT_EXPIRATION_BATCH_SIZE", "-5")

    assert load_settings(DatabaseOptions).database_url is None  # migrate, grant, status, ...
    assert load_settings(SlotOptions).horizon_days == 90  # slots
    with pytest.raises(OptionsError, match="SLOT_EXPIRATION_BATCH_SIZE"):
        load_settings(CycleOptions)  # once reads the batch size, not the interval
    with pytest.raises(OptionsError, match="SLOT_EXPIRATION_INTERVAL_SECONDS"):
        load_settings(WorkerOptions)  # run reads both


def test_an_interval_below_the_documented_minimum_is_refused() -> None:
    with pytest.raises(OptionsError, match=r"--interval-seconds .* greater than or equal to 1"):
        load_settings(WorkerOptions, interval_seconds=0.001)

    assert load_settings(WorkerOptions, interval_seconds=MIN_INTERVAL_SECONDS).interval_seconds == 1


def test_a_misspelled_variable_is_named_with_the_closest_real_one() -> None:
    warnings = unknown_variable_warnings({"SLOT_EXPIRATION_BATCHSIZE": "5", "PATH": "/bin"})

    assert warnings == [
        "SLOT_EXPIRATION_BATCHSIZE is not a variable of slot-expiration (ignored); "
        "did you mean SLOT_EXPIRATION_BATCH_SIZE?"
    ]


def test_a_variable_like_no_other_is_named_without_a_guess() -> None:
    (warning,) = unknown_variable_warnings({"SLOT_EXPIRATION_XYZZY": "1"})

    assert warning.endswith("(ignored); see --help for them")


def test_every_option_of_every_model_and_the_server_binaries_are_known_variables() -> None:
    assert known_variables() == {
        *(variable(name) for name in WorkerOptions.model_fields),
        *(variable(name) for name in SlotOptions.model_fields),
        *(variable(name) for name in UiOptions.model_fields),
        "SLOT_EXPIRATION_PG_BINDIR",
    }
    assert "SLOT_EXPIRATION_UI_PASSWORD" in known_variables()
    assert unknown_variable_warnings(dict.fromkeys(known_variables(), "x")) == []


def _command_options(path: list[str]) -> dict[str, click.Option]:
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return {p.name: p for p in command.params if isinstance(p, click.Option) and p.name}


@pytest.mark.parametrize(
    ("path", "model"),
    [
        (["once"], CycleOptions),
        (["run"], WorkerOptions),
        (["migrate"], MigrateOptions),
        (["grant"], DatabaseOptions),
        (["status"], StatusOptions),
        (["ui"], UiOptions),
        (["quarantine", "list"], DatabaseOptions),
        (["slots", "publish"], SlotOptions),
    ],
)
def test_each_command_has_a_flag_with_the_models_help_for_each_option_it_reads(
    path: list[str], model: type[DatabaseOptions]
) -> None:
    flags = _command_options(path)
    every = WorkerOptions.model_fields | SlotOptions.model_fields | UiOptions.model_fields
    own = {name for name in flags if name in every}

    assert own <= set(model.model_fields), f"{path} reads options of another command"
    for name in own:
        field = model.model_fields[name]
        assert flags[name].help == help_text(field)
        assert flags[name].envvar == variable(name)
        assert default_text(field) in (flags[name].help or "")
        assert allowed_text(field) in (flags[name].help or "")


def test_the_cycle_commands_offer_every_cycle_option_and_run_every_worker_option() -> None:
    assert set(CycleOptions.model_fields) <= set(_command_options(["once"]))
    assert set(WorkerOptions.model_fields) <= set(_command_options(["run"]))


def test_no_help_string_of_the_commands_types_a_default_of_an_option_itself() -> None:
    sources = (Path(__file__).parents[2] / "src/slot_expiration/cli").glob("*_commands.py")
    typed = [
        (source.name, match)
        for source in sources
        for match in re.findall(r"\[default: [0-9][^\]]*\]", source.read_text(encoding="utf-8"))
    ]

    assert typed == []


def test_the_ui_password_is_a_variable_only_never_a_flag() -> None:
    flags = _command_options(["ui"])

    assert "ui_password" not in flags
    assert "ui_user" not in flags
    assert flags["ui_addr"].opts == ["--addr"]
    assert "| (environment only) | `SLOT_EXPIRATION_UI_PASSWORD` |" in options_table()


def test_a_wrong_ui_address_names_its_flag_and_variable() -> None:
    with pytest.raises(OptionsError, match=r"^--addr / SLOT_EXPIRATION_UI_ADDR: "):
        load_settings(UiOptions, ui_addr="nowhere")


def test_a_ui_user_without_a_password_is_refused_naming_both_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLOT_EXPIRATION_UI_USER", "oncall")

    with pytest.raises(OptionsError, match="SLOT_EXPIRATION_UI_PASSWORD") as refused:
        load_settings(UiOptions)

    assert "oncall" not in str(refused.value)


def test_the_documented_options_table_is_the_models_table() -> None:
    readme = OPTIONS_DOC.read_text(encoding="utf-8")
    start = readme.index("| flag | environment variable | default | allowed | meaning | commands |")
    end = readme.index("\n\n", start)

    assert readme[start:end] == options_table()
