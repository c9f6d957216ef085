"""The commands' options: one validated, typed model per command, units in the names.

Values come from the command line (passed in explicitly) and from the
command's own SLOT_EXPIRATION_* environment variables, flags winning.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import Annotated, Any, Final, Self, TypeVar

from pydantic import (
    AfterValidator,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from slot_expiration.options.database_url import check_database_url, with_search_path
from slot_expiration.options.listen_address import ListenAddress, parse_listen_address

ENV_PREFIX = "SLOT_EXPIRATION_"
S = TypeVar("S", bound=BaseSettings)
# PostgreSQL's longest name (NAMEDATALEN - 1), in bytes.
MAX_NAME_BYTES: Final = 63


@dataclass(frozen=True, slots=True)
class Unit:
    """What a number option counts: its flag's metavar (`--batch-size ROWS`), from the
    field's type rather than guessed from its help text."""

    metavar: str


# A field's type names its unit: Annotated[Seconds, Field(...)].
Seconds = Annotated[float, Unit("SECONDS")]
Days = Annotated[int, Unit("DAYS")]
Minutes = Annotated[int, Unit("MINUTES")]
Rows = Annotated[int, Unit("ROWS")]
Batches = Annotated[int, Unit("BATCHES")]


class LogFormat(StrEnum):
    JSON = "json"
    CONSOLE = "console"


class SynchronousCommit(StrEnum):
    """PostgreSQL's `synchronous_commit` for the worker's own transactions, its words."""

    OFF = "off"
    LOCAL = "local"
    REMOTE_WRITE = "remote_write"
    ON = "on"
    REMOTE_APPLY = "remote_apply"


class OptionsError(ValueError):
    """Options that cannot be used; the message names the option, never a secret."""


# `schema` is the option's name (--schema, SLOT_EXPIRATION_SCHEMA): as a field it hides
# pydantic's deprecated BaseModel.schema(), which nothing here calls.
warnings.filterwarnings(
    "ignore", message='Field name "schema" in "[A-Za-z]*Options" shadows', category=UserWarning
)


def _schema_name(value: str) -> str:
    if len(value.encode()) > MAX_NAME_BYTES:
        raise ValueError(f"a schema name has at most {MAX_NAME_BYTES} bytes")
    return value


# `--schema`, which `migrate --sql` reads too (its script sets the search_path).
SchemaName = Annotated[
    str,
    Field(
        max_length=MAX_NAME_BYTES,
        pattern=r"^[^\x00]*$",
        description="The schema that holds availability_slots: every session's search_path "
        "becomes this schema alone (libpq's options, as `-csearch_path`, and set again in "
        "each transaction, where a pooler drops the options); '' = the search_path of the "
        "URL or the role.",
        json_schema_extra={"allowed": f"a schema name, at most {MAX_NAME_BYTES} bytes, or ''"},
    ),
    AfterValidator(_schema_name),
]
NO_SCHEMA: Final = ""


class DatabaseOptions(BaseSettings):
    """What every command that talks to the calendar's database shares: its URL.

    Each command reads one model (this one, or one deriving from it): only its
    own options, from its flags and its own SLOT_EXPIRATION_* variables, so a
    bad value in another command's variable never breaks it. Each field's
    description, range and default make the command's --help and the options
    table of docs/options.md (cli/option_flags.py; a test holds the file to it).
    """

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    database_url: Annotated[
        SecretStr | None,
        Field(
            description="The calendar database; libpq's PG* variables (PGPASSWORD, "
            "PGPASSFILE, ...) fill in what the URL leaves out.",
            json_schema_extra={"allowed": "postgresql://user@host/db"},
        ),
    ] = None

    schema: SchemaName = NO_SCHEMA  # type: ignore[assignment]  # hides BaseModel.schema()

    @field_validator("database_url", mode="before")
    @classmethod
    def _empty_is_none(cls, value: object) -> object:
        # SLOT_EXPIRATION_DATABASE_URL= (set but empty) means no URL, not a wrong one.
        return None if value == "" else value

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            check_database_url(value.get_secret_value())
        return value

    def require_database_url(self) -> str:
        """The URL every session connects with: the one given, with --schema's
        search_path when one is set."""
        if self.database_url is None:
            raise OptionsError(
                f"no database URL: pass --database-url or set {ENV_PREFIX}DATABASE_URL"
            )
        url = self.database_url.get_secret_value()
        return with_search_path(url, self.schema) if self.schema else url

    def with_database_url(self, url: str) -> Self:
        try:
            check_database_url(url)
        except ValueError as exc:
            raise OptionsError(f"database_url: {exc}") from None
        return self.model_copy(update={"database_url": SecretStr(url)})


# One option for the worker and migrate: no migration queues the calendar's writes
# behind a lock for longer than a cycle would wait for one.
LockTimeoutSeconds = Annotated[
    Seconds,
    Field(
        gt=0,
        le=3_600,
        description="How long a statement may wait for a lock before it gives up: the cycle "
        "fails (a migration's table lock, say), or migrate stops rather than queue the "
        "calendar's writes behind its own lock.",
    ),
]
DEFAULT_LOCK_TIMEOUT_SECONDS: Final = 2.0
# Measured in docs/benchmarks.md, section g: the drain rate at this size, beside bookings.
DEFAULT_DRAIN_BATCH_SIZE: Final = 2_000
# Chosen from docs/benchmarks.md, section i's curve of the bookings' latency against the
# drain's rate: no nice ratio (0.5 to 4) nor adaptive setting (1.5, 3) lowered the bookings'
# p99 beside a drain on 2 cores (flat out 3.34 x no drain; 3.38 to 5.32 x throttled) while
# each cost 35 to 80% of the rate: flat out by default, the throttle for who needs the
# median back (1.16 x flat out, 0.99 x at a nice ratio of 1).
DEFAULT_DRAIN_NICE_RATIO: Final = 0.0
DEFAULT_DRAIN_MAX_SLOWDOWN: Final = 0.0


class MigrationSqlOptions(BaseSettings):
    """`migrate --sql`: how long the script's statements may wait for a lock, and the
    schema it sets as the search_path. Written offline, it reads no database, so a
    database option never breaks it."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    lock_timeout_seconds: LockTimeoutSeconds = DEFAULT_LOCK_TIMEOUT_SECONDS
    schema: SchemaName = NO_SCHEMA  # type: ignore[assignment]  # hides BaseModel.schema()

    @property
    def lock_timeout_ms(self) -> int:
        return math.ceil(self.lock_timeout_seconds * 1000)


class MigrateOptions(DatabaseOptions, MigrationSqlOptions):
    """`migrate`: the database, and how long its statements may wait for a lock."""


# The shortest interval `run` accepts: below it, ticks would only pile up as
# skipped ticks (a cycle's own round trips take milliseconds to seconds).
MIN_INTERVAL_SECONDS: Final = 1.0
DEFAULT_INTERVAL_SECONDS: Final = 300.0
DEFAULT_MAX_CLOCK_SKEW_SECONDS: Final = 30.0
# Two weeks of cycles: 4,032 rows per replica at the default interval.
DEFAULT_RETENTION_DAYS: Final = 14
MAX_INSTANCE_ID_CHARS: Final = 200

IntervalSeconds = Annotated[
    Seconds,
    Field(
        allow_inf_nan=False,
        ge=MIN_INTERVAL_SECONDS,
        le=86_400,
        description="Seconds between ticks (fixed rate); shorter than a second would only "
        "pile up skipped ticks. `status --check` and `ui` read it for the verdict: the "
        "no-success limit (a number of intervals, and never less than the alert's minimum) "
        "and the backlog's trend window.",
    ),
]


class CycleOptions(DatabaseOptions):
    """`once`: what one cycle needs."""

    batch_size: Annotated[Rows, Field(ge=1, le=10_000, description="Rows per batch.")] = 500
    max_batches_per_cycle: Annotated[
        Batches,
        Field(
            ge=0,
            le=1_000_000,
            description="Drain mode: batches per cycle, each its own transaction, within the "
            "cycle budget; 0 = until the backlog is empty.",
        ),
    ] = 1
    drain_batch_size: Annotated[
        Rows,
        Field(
            ge=1,
            le=10_000,
            description="Drain mode: rows per batch after a cycle's first, which keeps "
            "--batch-size: larger batches drain a backlog faster, each holding its row "
            "locks longer (docs/benchmarks.md, section g).",
        ),
    ] = DEFAULT_DRAIN_BATCH_SIZE
    batch_pause_seconds: Annotated[
        Seconds,
        Field(
            allow_inf_nan=False,
            ge=0,
            le=60,
            description="Drain mode: the pause after each batch before the next, leaving the "
            "database to the bookings; below --max-cycle-seconds; 0 = none.",
        ),
    ] = 0.0
    drain_nice_ratio: Annotated[
        float,
        Field(
            allow_inf_nan=False,
            ge=0,
            le=100,
            description="Drain mode: after a batch of t seconds, rest this many times t before "
            "the next: a busier database (slower batches) gets longer rests; 0 = none "
            "(docs/benchmarks.md, section i: the bookings' latency against the drain's rate).",
            json_schema_extra={"allowed": "0 to 100"},
        ),
    ] = DEFAULT_DRAIN_NICE_RATIO
    drain_max_slowdown: Annotated[
        float,
        Field(
            allow_inf_nan=False,
            ge=0,
            le=100,
            description="Drain mode: when a batch takes more than this many times the time per "
            "row of the fastest of the drain's recent batches (the database busy with other "
            "work), rest (slowdown - 1) times the batch's time; 0 = never, else at least 1.",
            json_schema_extra={"allowed": "0, or 1 to 100"},
        ),
    ] = DEFAULT_DRAIN_MAX_SLOWDOWN
    max_replica_lag_seconds: Annotated[
        Seconds,
        Field(
            allow_inf_nan=False,
            ge=0,
            le=3_600,
            description="Before each batch, wait while a streaming standby's replay is further "
            "behind than this (read through slot_expiration_standbys(), which `grant` gives); "
            "a cycle held until its budget ends stops as throttled; 0 = never look.",
        ),
    ] = 10.0
    max_cycle_seconds: Annotated[
        Seconds,
        Field(
            allow_inf_nan=False,
            gt=0,
            le=3_600,
            description="Budget of one cycle: past it the batch in flight is rolled back; also "
            "each transaction's statement_timeout and idle_in_transaction_session_timeout.",
        ),
    ] = 30.0
    lock_timeout_seconds: LockTimeoutSeconds = DEFAULT_LOCK_TIMEOUT_SECONDS
    # Off by default: an expiry lost in a crash leaves a past slot Available, which no one
    # can book, and the next cycle expires it again (docs/reliability.md).
    synchronous_commit: Annotated[
        SynchronousCommit,
        Field(
            description="How the worker's own transactions (its batches, the quarantine's "
            "rows) commit: `off` returns before the WAL is flushed, so a crash may undo the "
            "last expiries, which the next cycle redoes (docs/reliability.md); `on` waits for "
            "the flush, for a rule that reads expiries as durable facts. The calendar's own "
            "transactions keep the server's setting.",
        ),
    ] = SynchronousCommit.OFF
    poison_backoff_seconds: Annotated[
        Seconds,
        Field(
            allow_inf_nan=False,
            gt=0,
            le=86_400,
            description="A row the database rejects is retried after this long, the wait "
            "doubling per failure.",
        ),
    ] = 300.0
    poison_backoff_max_seconds: Annotated[
        Seconds,
        Field(
            allow_inf_nan=False,
            gt=0,
            le=30 * 86_400,
            description="The longest wait before a rejected row is retried; at least "
            "--poison-backoff-seconds.",
        ),
    ] = 3_600.0
    max_clock_skew_seconds: Annotated[
        Seconds,
        Field(
            allow_inf_nan=False,
            ge=1,
            le=3_600,
            description="A cycle expires nothing while the worker's clock runs further ahead of "
            "the database's than this (a fast clock expires bookable slots); a clock behind "
            "is only logged.",
        ),
    ] = DEFAULT_MAX_CLOCK_SKEW_SECONDS
    prepared_statements: Annotated[
        bool,
        Field(
            description="Prepare the worker's statements on the server (saves planning in long "
            "drains); leave off behind a pooler in transaction mode older than pgbouncer 1.21."
        ),
    ] = False
    log_format: Annotated[
        LogFormat,
        Field(description="Logs on stderr: one JSON object per line, or console lines."),
    ] = LogFormat.JSON
    instance_id: Annotated[
        str,
        Field(
            max_length=MAX_INSTANCE_ID_CHARS,
            pattern=r"^[^\x00-\x1f\x7f]*$",
            description="This worker's name in the cycle history (`status`, `ui`); '' = the "
            "pod's name (POD_NAME), else the host name and a random suffix.",
            json_schema_extra={"allowed": f"text, at most {MAX_INSTANCE_ID_CHARS} characters"},
        ),
    ] = ""
    history_retention_days: Annotated[
        Days,
        Field(
            ge=1,
            le=3_650,
            description="Cycle history rows and ended quarantine entries older than this are "
            "purged by the worker, a few hundred per cycle.",
        ),
    ] = DEFAULT_RETENTION_DAYS

    @model_validator(mode="after")
    def _backoff_range(self) -> Self:
        if self.poison_backoff_max_seconds < self.poison_backoff_seconds:
            raise ValueError(
                "--poison-backoff-max-seconds must be at least --poison-backoff-seconds"
            )
        return self

    @model_validator(mode="after")
    def _pause_within_budget(self) -> Self:
        # A pause as long as the budget would leave no time for a second batch.
        if self.batch_pause_seconds >= self.max_cycle_seconds:
            raise ValueError("--batch-pause-seconds must be below --max-cycle-seconds")
        return self

    @model_validator(mode="after")
    def _slowdown_off_or_at_least_one(self) -> Self:
        # Below 1, a batch no slower than the fastest would rest the drain every time.
        if 0 < self.drain_max_slowdown < 1:
            raise ValueError("--drain-max-slowdown must be 0 (never) or at least 1")
        return self

    @property
    def statement_timeout_ms(self) -> int:
        return math.ceil(self.max_cycle_seconds * 1000)

    @property
    def lock_timeout_ms(self) -> int:
        return math.ceil(self.lock_timeout_seconds * 1000)


MetricsAddr = Annotated[
    str,
    Field(
        description="host:port of /metrics, /healthz and /readyz; port 0 picks a free one; "
        "'' turns the endpoint off.",
        json_schema_extra={"allowed": "host:port, [v6]:port, or ''"},
    ),
]


class WorkerOptions(CycleOptions):
    """`run`: a cycle's options, the polling loop's and the endpoint's."""

    interval_seconds: IntervalSeconds = DEFAULT_INTERVAL_SECONDS
    shutdown_grace_seconds: Annotated[
        Seconds,
        Field(
            allow_inf_nan=False,
            ge=0,
            le=3_600,
            description="On SIGTERM/SIGINT, how long the cycle in flight may still commit; "
            "past it, or on a second signal, it is rolled back.",
        ),
    ] = 10.0
    metrics_addr: MetricsAddr = "127.0.0.1:9464"

    @field_validator("metrics_addr")
    @classmethod
    def _listen_address(cls, value: str) -> str:
        if value:
            parse_listen_address(value)
        return value

    @property
    def metrics_address(self) -> ListenAddress | None:
        """The endpoint's address, or None when it is turned off."""
        return parse_listen_address(self.metrics_addr) if self.metrics_addr else None


class DemoOptions(WorkerOptions):
    """`demo`: the worker at a demo's pace (a tick a second, its endpoint on a free port)
    and how many cycles to show. Read from its flags only: a demo never picks up the
    SLOT_EXPIRATION_* environment of a real deployment."""

    interval_seconds: IntervalSeconds = 1.0
    metrics_addr: MetricsAddr = "127.0.0.1:0"
    max_cycles: Annotated[
        int,
        Field(
            ge=1,
            le=1_000,
            description="Stop after this many cycles (or once the backlog is gone).",
        ),
    ] = 6


class VerdictOptions(DatabaseOptions):
    """What judging the deployment reads beside the database (`status --check`, `ui`):
    how late a worker may be before it is called silent or stuck, and where its replicas
    answer, whose /readyz says what the history cannot."""

    # The worker's own variable: a deployment that sets it for `run` sets it for
    # `status --check` and `ui` too, and the thresholds follow (3 intervals, ...).
    interval_seconds: IntervalSeconds = DEFAULT_INTERVAL_SECONDS
    replicas: Annotated[
        str,
        Field(
            description="The worker replicas' endpoints (each one's --metrics-addr), "
            "comma-separated: the verdict asks each one's /readyz, which says what the "
            "history cannot (a replica that cannot log in or write to the database records "
            "nothing there, not even its failures); '' = none asked.",
            json_schema_extra={"allowed": "host:port[,host:port...], or ''"},
        ),
    ] = ""

    @field_validator("replicas")
    @classmethod
    def _replica_addresses(cls, value: str) -> str:
        for part in _replica_parts(value):
            if parse_listen_address(part).port == 0:
                raise ValueError("a replica's port is the one it listens on, not 0")
        return value

    @property
    def replica_addresses(self) -> tuple[ListenAddress, ...]:
        return tuple(parse_listen_address(part) for part in _replica_parts(self.replicas))


def _replica_parts(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


class StatusOptions(VerdictOptions):
    """`status`: what `--check` judges with besides the database."""


# Where the runbook is published, unless told: the placeholder deploy/prometheus/alerts.yml's
# runbook links hold until docs/operations.md's substitution puts yours in.
DEFAULT_RUNBOOK_URL: Final = "https://runbooks.example.com/slot-expiration"


class UiOptions(VerdictOptions):
    """`ui`: where the page listens, and its optional basic authentication (from the
    environment only: a password on a command line shows in `ps`); how it judges (as
    `status --check`: the same verdict on the page) and where its runbook links lead."""

    runbook_url: Annotated[
        str,
        Field(
            max_length=2_000,
            description="Where the runbook (docs/runbooks/slot-expiration.md) is published, "
            "the base of the alerts' runbook links: the page links its verdict and each "
            "finding to the runbook's section.",
            json_schema_extra={"allowed": "an http(s) URL without '#'"},
        ),
    ] = DEFAULT_RUNBOOK_URL

    ui_addr: Annotated[
        str,
        Field(
            description="host:port the page listens on; it shows slot and tenant ids: keep it "
            "on the loopback, or behind an authenticating proxy; port 0 picks a free one.",
            json_schema_extra={"allowed": "host:port, [v6]:port", "flag": "addr"},
        ),
    ] = "127.0.0.1:8080"
    ui_user: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=200,
            pattern=r"^[^:\x00-\x1f\x7f]+$",
            description="With SLOT_EXPIRATION_UI_PASSWORD: the page asks for this user "
            "(HTTP basic authentication; use HTTPS in front of it).",
            json_schema_extra={"allowed": "text without ':'", "flag": None},
        ),
    ] = None
    ui_password: Annotated[
        SecretStr | None,
        Field(
            description="The password of SLOT_EXPIRATION_UI_USER; both or neither.",
            json_schema_extra={"allowed": "text", "flag": None},
        ),
    ] = None

    @field_validator("ui_addr")
    @classmethod
    def _ui_listen_address(cls, value: str) -> str:
        parse_listen_address(value)
        return value

    @field_validator("runbook_url")
    @classmethod
    def _runbook_url(cls, value: str) -> str:
        scheme, _, rest = value.partition("://")
        if scheme not in ("http", "https") or not rest or any(c in value for c in "# \t\n"):
            raise ValueError("give an http:// or https:// URL without spaces or '#'")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _both_or_neither(self) -> Self:
        if (self.ui_user is None) != (self.ui_password is None):
            raise ValueError(
                f"set both {ENV_PREFIX}UI_USER and {ENV_PREFIX}UI_PASSWORD, or neither"
            )
        if self.ui_password is not None and not self.ui_password.get_secret_value():
            raise ValueError(f"{ENV_PREFIX}UI_PASSWORD must not be empty")
        return self

    @property
    def address(self) -> ListenAddress:
        return parse_listen_address(self.ui_addr)

    @property
    def credentials(self) -> tuple[str, str] | None:
        """(user, password) when the page asks for them."""
        if self.ui_user is None or self.ui_password is None:
            return None
        return self.ui_user, self.ui_password.get_secret_value()


def flag_name(model: type[BaseSettings], name: str) -> str | None:
    """A field's flag (`--batch-size`), or None for a variable-only field."""
    field = model.model_fields.get(name)
    extra = field.json_schema_extra if field is not None else None
    if isinstance(extra, dict) and "flag" in extra:
        override = extra["flag"]
        return None if override is None else f"--{override}"
    return "--" + name.replace("_", "-")


@cache
def _flags_only(model: type[S]) -> type[S]:
    """`model` reading flags alone: for the demo, which must never pick up the
    SLOT_EXPIRATION_* environment of a real deployment."""

    class FlagsOnly(model):  # type: ignore[valid-type,misc]
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            return (init_settings,)

    FlagsOnly.__name__ = model.__name__
    return FlagsOnly


def load_options(*, environment: bool = True, **given: Any) -> WorkerOptions:
    """`run`'s options from flags (None = not given) and, unless told not to, the
    environment."""
    return load_settings(WorkerOptions, environment=environment, **given)


def load_settings(model: type[S], *, environment: bool = True, **given: Any) -> S:
    """Any of the product's option objects from flags (None = not given) and, unless
    told not to, its own environment variables; a wrong value is an OptionsError
    naming its flag (and variable)."""
    flags = {name: value for name, value in given.items() if value is not None}
    try:
        return (model if environment else _flags_only(model))(**flags)
    except ValidationError as exc:
        raise OptionsError(_describe(model, exc, environment)) from None


def _describe(model: type[BaseSettings], exc: ValidationError, environment: bool) -> str:
    # pydantic's own rendering repeats the input value: a password could leak.
    problems = []
    for error in exc.errors(include_input=False, include_url=False):
        field = ".".join(str(part) for part in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        if not field:  # a rule across several options names them itself
            problems.append(f"options: {message}")
            continue
        sources = [flag_name(model, field)]
        if environment or sources == [None]:
            sources.append(f"{ENV_PREFIX}{field.upper()}")
        problems.append(f"{' / '.join(s for s in sources if s)}: {message}")
    return "; ".join(problems)
