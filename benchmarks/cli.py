"""`./scripts/bench` (`python -m benchmarks`): the worker measured against the bare SQL floor,
beside a booking load and on growing tables; a Markdown table on stdout, the figures as JSON.

The benchmark lives beside the product, not in it: it drives the installed `slot-expiration`
(its store, its cycle, its command in subprocesses) and ships in no wheel or image."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import click

from benchmarks.context import BenchError, Progress
from benchmarks.options import BenchOptionsError, bench_options, reproduce_command
from benchmarks.report import BenchReport, render_markdown, to_json
from benchmarks.runner import run_bench
from benchmarks.store import BENCH_SCHEMA
from slot_expiration.cli.common import guarded, settings_from, with_typed_secrets_redacted
from slot_expiration.cli.demo_command import embedded_server_errors
from slot_expiration.cli.errors import ExitCode, fail
from slot_expiration.cli.option_flags import options
from slot_expiration.loop import terminate_as_interrupt
from slot_expiration.options import DatabaseOptions, WorkerOptions, redact_url


@click.command(
    name="bench",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option("--quick", is_flag=True, help="A small smoke run (under a minute), as CI runs it.")
@click.option(
    "--full",
    is_flag=True,
    help="Tables of 10 million slots in sections e and h (many more minutes).",
)
@click.option(
    "--sections",
    metavar="LIST",
    help="Only these sections, comma-separated, of a,b,c,d,e,f,g,h. [default: all]",
)
@click.option(
    "--json-out",
    metavar="PATH",
    help="Where the figures go, as JSON (replaced). [default: bench-results.json]",
)
@click.option(
    "--database-url",
    help=f"Run on this database instead of a private embedded server. It WRITES there: schema "
    f"{BENCH_SCHEMA} is created, filled with up to millions of slots, and dropped at the end. "
    "Read from this flag only, never from the environment.",
)
# The worker's own options, passed on to every worker the run starts (in d, the paced
# drains take --batch-pause-seconds instead of 0.02 s; b and d also run the worker with
# --synchronous-commit on beside it); never read from the environment.
@options(
    WorkerOptions,
    "prepared_statements",
    "batch_pause_seconds",
    "synchronous_commit",
    environment=False,
)
@click.option(
    "--server-setting",
    metavar="NAME=VALUE",
    multiple=True,
    help="A setting of the embedded server, over the benchmark's own (repeatable), e.g. "
    "wal_compression=on. Not with --database-url.",
)
def bench(**given: Any) -> None:
    """Benchmark the worker: a. one batch vs the bare statement, b. a drain vs the bare
    loop in rounds, c. 1/2/4 processes, d. booking latency beside the worker's drain and
    the bare loop's (pgbench), e. growth to 10M slots, f. memory, g. drain rate by batch
    size vs the single statement as a pg_cron job, h. a calendar partitioned by month
    (pg_partman) vs unpartitioned.

    Each target is printed with its verdict and, measured in rounds, their range.
    """
    try:
        options = bench_options(**given)
    except BenchOptionsError as exc:
        fail(str(exc), ExitCode.USAGE)
    if options.database_url is not None:
        click.echo(
            f"bench: writing to {redact_url(options.database_url)}: schema {BENCH_SCHEMA} is "
            "created there, filled and dropped at the end",
            err=True,
        )

    def run() -> BenchReport:
        with terminate_as_interrupt():
            try:
                return asyncio.run(run_bench(options, reproduce_command(options), Progress()))
            except BenchError as exc:
                fail(f"bench: {exc}", ExitCode.FAILURE)

    target = settings_from(DatabaseOptions, environment=False, database_url=options.database_url)
    report = guarded(lambda: embedded_server_errors(run), target)
    options.json_out.write_text(json.dumps(to_json(report), indent=2) + "\n", encoding="utf-8")
    click.echo(render_markdown(report))
    click.echo(f"Figures written to {options.json_out}.")


def main() -> None:
    """`python -m benchmarks`: click's own usage errors become one line, as the product's."""
    try:
        code = bench.main(prog_name="bench", standalone_mode=False)
    except click.ClickException as exc:
        fail(with_typed_secrets_redacted(exc.format_message()), ExitCode.USAGE)
    except (click.exceptions.Abort, KeyboardInterrupt):
        print("bench: interrupted", file=sys.stderr)
        raise SystemExit(ExitCode.INTERRUPTED) from None
    raise SystemExit(code if isinstance(code, int) else ExitCode.OK)
