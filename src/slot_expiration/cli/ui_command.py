"""`slot-expiration ui`: one read-only page for the on-call engineer, until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import ipaddress
import sys
from typing import Any

import click

from slot_expiration.cli.common import (
    guarded,
    located,
    required_url,
    settings_from,
    store_failure,
)
from slot_expiration.cli.errors import PROGRAM, ExitCode, fail
from slot_expiration.cli.option_flags import options
from slot_expiration.loop import StopSignal, stop_on_signals
from slot_expiration.options import UiOptions
from slot_expiration.ui import UiServeError


@click.command()
@options(
    UiOptions, "database_url", "schema", "ui_addr", "interval_seconds", "replicas", "runbook_url"
)
def ui(**given: Any) -> None:
    """Serve one read-only page: first the deployment's verdict, as `status --check` gives
    it, with the runbook's section for each finding; then the last success, the backlog and
    its trend, the quarantine, what the replicas named by `--replicas` say of themselves
    (their /readyz), the recent cycles of every instance, the backlog over the last hours,
    the schema and the index. `?refresh=SECONDS` reloads it. Runs as the read-only role of
    `grant --read-only`. With SLOT_EXPIRATION_UI_USER and SLOT_EXPIRATION_UI_PASSWORD set,
    it asks for them (HTTP basic authentication)."""
    settings = settings_from(UiOptions, **given)
    url = required_url(settings)
    if settings.credentials is None and not _loopback(settings.address.host):
        print(
            f"{PROGRAM}: warning: the page shows slot and tenant ids and listens on "
            f"{settings.address} without authentication: put an authenticating proxy in "
            "front of it, or set SLOT_EXPIRATION_UI_USER and SLOT_EXPIRATION_UI_PASSWORD",
            file=sys.stderr,
        )
    try:
        guarded(lambda: asyncio.run(_serve(settings, url)), settings)
    except UiServeError as exc:
        fail(str(exc), ExitCode.FAILURE)


async def _serve(settings: UiOptions, url: str) -> None:
    # Jinja2 loads only for this command: the worker's own processes never pay for it.
    from slot_expiration.ui.page import PageOptions  # noqa: PLC0415
    from slot_expiration.ui.server import serving_ui  # noqa: PLC0415
    from slot_expiration.ui.snapshot import take_snapshot  # noqa: PLC0415

    # A wrong URL, a refused login, a slot table the search_path misses: said at start,
    # exit 1. A database never migrated is served: the page says to migrate it. Later
    # failures show on the page itself (503, UNKNOWN), which keeps serving.
    await take_snapshot(url, settings.interval_seconds)
    stop = StopSignal()
    with stop_on_signals(stop):
        async with serving_ui(
            settings.address,
            url,
            credentials=settings.credentials,
            describe_failure=lambda exc: store_failure(located(exc, settings), url),
            interval_seconds=settings.interval_seconds,
            options=PageOptions(settings.runbook_url),
            replicas=settings.replica_addresses,
        ) as served:
            click.echo(f"{PROGRAM} ui: serving {served} (read-only; SIGTERM or Ctrl-C stops it)")
            sys.stdout.flush()
            await stop.requested.wait()


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
