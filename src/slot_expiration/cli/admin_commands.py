"""Database administration for the worker: the grants of its least-privileged roles."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import click

from slot_expiration.cli.common import guarded, required_url, settings_from
from slot_expiration.cli.option_flags import options
from slot_expiration.options import DatabaseOptions
from slot_expiration.schema.grants import (
    GrantMode,
    GrantReport,
    HeldPrivilege,
    TablePrivilege,
    grant_privileges,
)


@click.command()
@click.option("--role", required=True, help="The (existing) database role to grant to.")
@click.option(
    "--read-only",
    is_flag=True,
    help="Grant what `status`, `quarantine list`, `ui` and /readyz need (reading), not the "
    "worker's.",
)
@click.option(
    "--revoke-extra",
    is_flag=True,
    help="Also revoke what the role holds directly on these tables beyond what it needs "
    "(never without this flag: the role may need it for other work).",
)
@click.option(
    "--dry-run", is_flag=True, help="Print the statements and the outcome; change nothing."
)
@options(DatabaseOptions, "database_url", "schema")
def grant(role: str, read_only: bool, revoke_extra: bool, dry_run: bool, **given: Any) -> None:
    """Give a role what the worker needs (run as the owner of availability_slots, after migrate).

    SELECT on availability_slots, UPDATE of only status, updated_at and version,
    the quarantine table slot_expiration_failures, writing and purging the cycle
    history slot_expiration_cycles, and reading the schema version; with
    --read-only, reading them only. It refuses (exit 2, nothing changed) a role
    that owns the table, a superuser, the role running it, a predefined role, and a
    role that can reach the owner, a superuser or a predefined role that writes
    through any chain of memberships (naming it). Then it says what the role can do,
    inherited rights included.
    """
    settings = settings_from(DatabaseOptions, **given)
    url = required_url(settings)
    mode = GrantMode.READ_ONLY if read_only else GrantMode.WORKER
    report = guarded(
        lambda: asyncio.run(
            grant_privileges(url, role, mode, apply=not dry_run, revoke_extra=revoke_extra)
        ),
        settings,
    )
    # SQL comments: the whole output is a script psql runs as it is (a reviewed dry run).
    for statement in report.statements:
        click.echo(f"{statement.rstrip().rstrip(';')};")
    for line in describe(report):
        click.echo(f"-- {line}")


def describe(report: GrantReport) -> list[str]:
    """What the role can do afterwards, for a person: exact, or what is off and why."""
    role = repr(report.role)
    then = "would then" if not report.applied else "can now"
    what = "the worker's" if report.mode is GrantMode.WORKER else "the read-only views'"
    lines = [f"role {role} {then}: {_privileges(report.can)}"]
    if report.missing:
        lines.append(f"still missing: {_privileges(report.missing)}")
    if report.extra_direct:
        lines.append(
            f"also holds directly, beyond {what} needs (kept; --revoke-extra revokes them): "
            f"{_privileges(report.extra_direct)}"
        )
    lines.extend(_inherited(report.extra_inherited))
    if report.exact:
        verb = "has" if report.applied else "would have"
        lines.append(f"role {role} {verb} exactly {what} privileges")
    return lines


def _inherited(held: Iterable[HeldPrivilege]) -> list[str]:
    by_source: dict[str, list[TablePrivilege]] = defaultdict(list)
    for privilege in held:
        by_source[", ".join(privilege.via)].append(privilege.privilege)
    return [
        f"can {_privileges(privileges)} "
        + ("via PUBLIC" if source == "PUBLIC" else f"via membership in {source}")
        + " (grant does not touch that: revoke the membership or that role's grants)"
        for source, privileges in by_source.items()
    ]


def _privileges(privileges: Iterable[TablePrivilege]) -> str:
    """`SELECT, UPDATE (status, version) on availability_slots; SELECT on ...`."""
    per_table: dict[str, list[str]] = defaultdict(list)
    columns: dict[tuple[str, str], list[str]] = defaultdict(list)
    for p in privileges:
        if p.column is None:
            per_table[p.relation].append(p.privilege.value)
        else:
            columns[(p.relation, p.privilege.value)].append(p.column)
    for (relation, privilege), names in columns.items():
        if privilege not in per_table[relation]:
            per_table[relation].append(f"{privilege} ({', '.join(names)})")
    return "; ".join(f"{', '.join(privs)} on {relation}" for relation, privs in per_table.items())
