"""Database URLs as libpq reads them: checked, shown without any secret, and given a
search_path, always from the parts libpq parses (never by editing the text).

libpq (through psycopg.conninfo) is the one parser: whatever it finds in a URL
is what a connection would use. It has one trap: the userinfo ends at the first
`@` (or at the first `/`), so a password holding an unencoded `@` or `/` spills
into the host or the database name, where every error would quote it and the
resolver would look it up. Such a URL is refused before anything uses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final
from urllib.parse import quote

import psycopg
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict

URL_PREFIXES: Final = ("postgresql://", "postgres://")
# What separates the arguments of libpq's `options` on the server (pg_split_opts: C's
# isspace, in the C locale).
_OPTIONS_WHITESPACE: Final = " \t\n\r\v\f"
# Shown in place of a secret: the reader learns that one was given, never any of it.
HIDDEN: Final = "***"
# The SCRAM keys a pooler may pass through stand for the password itself; libpq marks them
# as debug options ("D"), not as secrets ("*"), so they are named here.
_SECRET_DEBUG_OPTIONS: Final = frozenset({"scram_client_key", "scram_server_key"})


def _secret_keywords() -> frozenset[str]:
    """Every parameter libpq holds a secret in: those its own table of options marks to be
    shown as `*` (password, sslpassword, oauth_client_secret in libpq 18), whatever this
    libpq's version adds, and the SCRAM keys."""
    marked = {
        option.keyword.decode() for option in pq.Conninfo.get_defaults() if option.dispchar == b"*"
    }
    return frozenset(marked | _SECRET_DEBUG_OPTIONS | {"password"})


SECRET_KEYWORDS: Final = _secret_keywords()


class DatabaseUrlError(ValueError):
    """A URL libpq cannot use, or reads otherwise than it looks; the message never quotes it."""


def check_database_url(url: str) -> None:
    """Reject what psycopg could not use, or would read otherwise than written, with a
    message that never echoes the URL."""
    url_parts(url)


def url_parts(url: str) -> dict[str, str]:
    """The connection parameters libpq reads from `url` (none from the environment)."""
    if not url.startswith(URL_PREFIXES):
        raise DatabaseUrlError("must be a postgresql:// URL")
    if _ambiguous_userinfo(url):
        raise DatabaseUrlError(
            "holds an '@' that libpq would not read as the end of the user name and password: "
            "percent-encode each '@' and '/' inside them (%40, %2F), or libpq reads part of "
            "them as the host or the database"
        )
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        raise DatabaseUrlError("not a valid PostgreSQL URL") from None
    for port in str(parts.get("port") or "").split(","):
        if port and not (port.isdigit() and 0 < int(port) < 65_536):
            raise DatabaseUrlError("port must be a number from 1 to 65535")
    return {key: str(value) for key, value in parts.items()}


def _ambiguous_userinfo(url: str) -> bool:
    """Whether an `@` stands where libpq no longer reads it as the end of the userinfo.

    libpq takes the userinfo up to the first `@` found before any `/`; an `@` after
    that, before the query string, belongs to a password it split elsewhere (an
    unencoded `@` or `/` in it). Percent-encoded, neither is ambiguous.
    """
    rest = url.split("://", 1)[1]
    first_at, first_slash = rest.find("@"), rest.find("/")
    if first_at >= 0 and (first_slash < 0 or first_at < first_slash):
        rest = rest[first_at + 1 :]
    return "@" in rest.split("?", 1)[0]


def redact_url(url: str) -> str:
    """The URL rebuilt from the parts libpq reads, every secret left out (`***` shows
    where one was given: the password, sslpassword, ...): fit for logs and error lines."""
    try:
        parts = url_parts(url)
    except DatabaseUrlError:
        return "<invalid URL>"
    return url_from_parts(parts, scheme=_scheme(url), hide_secrets=True)


def redact_typed(text: str) -> str:
    """Something a user typed, fit to quote back: a URL as redact_url shows it; other text
    that names a secret parameter (`sslpassword=...`, as libpq's key=value strings say it)
    not at all; anything else as it is."""
    if "://" in text:
        return redact_url(text)
    if any(f"{keyword}=" in text.lower() for keyword in SECRET_KEYWORDS):
        return HIDDEN
    return text


def with_search_path(url: str, schema: str) -> str:
    """The same connection with its sessions' search_path set to `schema` alone, through
    libpq's `options` (sent at connection start: it holds for every statement, a
    pooler's transactions included). Options the URL or PGOPTIONS give are kept."""
    parts = url_parts(url)
    given = parts.get("options", _default_options())
    setting = f"-csearch_path={_options_escaped(quoted_identifier(schema))}"
    parts["options"] = f"{given} {setting}" if given.strip() else setting
    return url_from_parts(parts, scheme=_scheme(url))


def search_path_of(url: str) -> str | None:
    """The search_path that the `options` a connection to `url` sends set (the URL's, else
    PGOPTIONS'), as the server would read it; None when they set none.

    A pooler may drop `options` (pgbouncer's ignore_startup_parameters): each session
    sets this search_path again in every transaction (store.session), so what the URL
    asks for holds on whichever server session runs the transaction.
    """
    try:
        options = url_parts(url).get("options", _default_options())
    except DatabaseUrlError:
        return None
    return _option_value(options, "search_path")


def url_from_parts(
    parts: Mapping[str, str], *, scheme: str = URL_PREFIXES[0], hide_secrets: bool = False
) -> str:
    """A URL that libpq reads as exactly these parts (hosts and ports in the authority
    where a URL can say them, anything else in the query string); with `hide_secrets`,
    one to show: each secret's value replaced by `***`, the rest exactly as libpq reads it."""
    rest = dict(parts)
    if hide_secrets:
        rest = {key: HIDDEN if key in SECRET_KEYWORDS else value for key, value in rest.items()}
    user = quote(rest.pop("user", ""), safe="")
    password = rest.pop("password", None)
    if password is not None:
        user += ":" + (password if hide_secrets else quote(password, safe=""))
    hosts = _authority_hosts(rest)
    if hosts is not None:
        rest.pop("host", None)
        rest.pop("port", None)
    netloc = (f"{user}@" if user else "") + (hosts or "")
    dbname = rest.pop("dbname", None)
    path = "" if dbname is None else "/" + quote(dbname, safe="")
    query = "&".join(
        f"{quote(key, safe='')}={_query_value(key, value, hide_secrets)}"
        for key, value in rest.items()
    )
    if query and not path:
        path = "/"
    return f"{scheme}{netloc}{path}" + (f"?{query}" if query else "")


def _query_value(key: str, value: str, hidden: bool) -> str:
    # `***` is left as it reads: it stands for a value, it is not one.
    return value if hidden and key in SECRET_KEYWORDS else quote(value, safe="")


def _authority_hosts(parts: Mapping[str, str]) -> str | None:
    """`host:port,host2:port2` when the authority says the parts' hosts and ports exactly
    as they are; None when only the query string can (socket directories, one port for
    several hosts)."""
    if "host" not in parts:
        return "" if "port" not in parts else None
    hosts = parts["host"].split(",")
    if "port" not in parts and len(hosts) > 1:
        return None  # libpq reads `h1,h2` in an authority as having a list of empty ports
    ports = parts["port"].split(",") if "port" in parts else [""]
    if len(ports) != len(hosts) or any(not host or host.startswith("/") for host in hosts):
        return None
    written = []
    for host, port in zip(hosts, ports, strict=True):
        name = f"[{host}]" if ":" in host else quote(host, safe="")
        written.append(f"{name}:{port}" if port else name)
    return ",".join(written)


def _scheme(url: str) -> str:
    return next(prefix for prefix in URL_PREFIXES if url.startswith(prefix))


def _default_options() -> str:
    """What libpq itself would send as `options` for a URL without any (PGOPTIONS)."""
    for option in pq.Conninfo.get_defaults():
        if option.keyword == b"options" and option.val:
            return option.val.decode()
    return ""


def quoted_identifier(name: str) -> str:
    """A schema name as search_path reads it: double-quoted, its quotes doubled."""
    return '"' + name.replace('"', '""') + '"'


def _option_value(options: str, name: str) -> str | None:
    """The value `options` give the server setting `name` (the last one: the server applies
    them in order), read as PostgreSQL reads them: arguments split at unescaped
    whitespace, then `-c name=value`, `-cname=value` or `--name=value`, where a dash in
    the name reads as an underscore and case does not matter."""
    arguments = _options_split(options)
    found = None
    for index, argument in enumerate(arguments):
        if argument == "-c":
            setting = arguments[index + 1] if index + 1 < len(arguments) else ""
        elif argument.startswith(("--", "-c")):
            setting = argument[2:]
        else:
            continue
        key, equals, value = setting.partition("=")
        if equals and key.replace("-", "_").lower() == name:
            found = value
    return found


def _options_split(options: str) -> list[str]:
    """libpq's `options` as the server splits them (pg_split_opts): at whitespace, a
    backslash taking the next character as it is."""
    arguments: list[str] = []
    current: list[str] = []
    started = escaped = False
    for character in options:
        if escaped or not (character == "\\" or character in _OPTIONS_WHITESPACE):
            current.append(character)
            started, escaped = True, False
        elif character == "\\":
            started = escaped = True
        elif started:
            arguments.append("".join(current))
            current, started = [], False
    if started:
        arguments.append("".join(current))
    return arguments


def _options_escaped(value: str) -> str:
    """A value inside libpq's `options`, where whitespace separates arguments: a
    backslash escapes each whitespace character and each backslash."""
    return "".join(
        f"\\{character}" if character in _OPTIONS_WHITESPACE or character == "\\" else character
        for character in value
    )
