"""`slot-expiration pause` and `resume`: every replica stops expiring at its next tick, and
goes on at its next tick after the pause ends. One row in the database that each replica
reads at each tick (no restart, no leader); run as the role `migrate` runs as (the
worker's own role may read the pause, never set it)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

import click

from slot_expiration.cli.common import COMMAND_LIMITS, guarded, required_url, settings_from
from slot_expiration.cli.duration import duration_option
from slot_expiration.cli.option_flags import options
from slot_expiration.options import DatabaseOptions
from slot_expiration.pause import (
    LIMIT_WITHOUT_END,
    LONGEST,
    REASON_MAX_CHARS,
    EndedPause,
    Pause,
    PauseStore,
    moment_text,
    span_text,
)
from slot_expiration.status.wording import age_text

T = TypeVar("T")


def _reason(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """One line a person reads on the page, in the verdict and in the logs."""
    reason = " ".join(value.split())
    if not reason:
        raise click.BadParameter("say why, in a few words: the page and the verdict show it")
    if len(reason) > REASON_MAX_CHARS or any(not c.isprintable() for c in reason):
        raise click.BadParameter(f"one line of at most {REASON_MAX_CHARS} printable characters")
    return reason


@click.command()
@click.option(
    "--for",
    "lasting",
    callback=duration_option(LONGEST),
    metavar="DURATION",
    help="How long the pause is meant to last (90s, 30m, 2h, 1h30m, at most "
    f"{span_text(LONGEST)}): past it the verdict turns CRITICAL and the alert fires. It "
    "holds until `resume` all the same. [default: no end given, judged forgotten after "
    f"{span_text(LIMIT_WITHOUT_END)}]",
)
@click.option(
    "--reason", required=True, callback=_reason, help="Why, in one line: shown to everyone."
)
@click.option(
    "--replace",
    is_flag=True,
    help="Replace the pause in force (its end, its reason) in one transaction; without it, "
    "pause refuses while one is in force.",
)
@options(DatabaseOptions, "database_url", "schema")
def pause(
    lasting: timedelta | None,
    reason: str,
    replace: bool,
    database_url: str | None,
    schema: str | None,
) -> None:
    """Stop every replica from expiring, at its next tick, until `resume`.

    Each replica's cycle reads the pause before its first batch and expires nothing while
    it holds (recorded as `paused`); a cycle already under way finishes. Run it as the
    role `migrate` runs as. Refuses (exit 1) while a pause is in force, unless --replace.
    """
    settings = settings_from(DatabaseOptions, database_url=database_url, schema=schema)
    url = required_url(settings)

    async def start(store: PauseStore) -> tuple[EndedPause | None, Pause]:
        replaced = await store.end() if replace else None
        return replaced, await store.start(lasting, reason)

    replaced, started = guarded(lambda: _on_pauses(url, start), settings)
    if replaced is not None:
        click.echo(f"replaced: {replaced.pause.text()}")
    click.echo(
        f"{started.text()}; every replica expires nothing from its next tick on, until "
        "`slot-expiration resume`"
    )


@click.command()
@options(DatabaseOptions, "database_url", "schema")
def resume(database_url: str | None, schema: str | None) -> None:
    """End the pause in force: every replica expires again from its next tick.

    Run it as the role `migrate` runs as. Not paused, it says so and changes nothing
    (exit 0).
    """
    settings = settings_from(DatabaseOptions, database_url=database_url, schema=schema)
    url = required_url(settings)

    async def end(store: PauseStore) -> tuple[EndedPause | None, EndedPause | None]:
        ended = await store.end()
        return ended, None if ended is not None else await store.latest_ended()

    ended, before = guarded(lambda: _on_pauses(url, end), settings)
    if ended is not None:
        lasted = age_text((ended.resumed_at - ended.pause.paused_at).total_seconds())
        click.echo(
            f"resumed after {lasted}: {ended.pause.text()}; every replica expires again "
            "from its next tick"
        )
    elif before is not None:
        click.echo(
            f"not paused, nothing changed: the last pause ({before.pause.text()}) was ended "
            f"by {before.resumed_by} at {moment_text(before.resumed_at)}"
        )
    else:
        click.echo("not paused, nothing changed: no pause was ever set")


def _on_pauses(url: str, work: Callable[[PauseStore], Awaitable[T]]) -> T:
    async def working() -> T:
        async with PauseStore.connect(url, COMMAND_LIMITS) as store:
            return await work(store)

    return asyncio.run(working())
