"""Database URLs as libpq parses them: an ambiguous userinfo refused, a URL shown rebuilt
from its parts without any secret (never by masking text), a search_path given
through libpq's own `options`."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.conninfo import conninfo_to_dict

from slot_expiration.options import OptionsError, load_options
from slot_expiration.options.database_url import (
    DatabaseUrlError,
    check_database_url,
    redact_typed,
    redact_url,
    url_from_parts,
    url_parts,
    with_search_path,
)

PASSWORD = "p@ssw0rd"  # noqa: S105 - the made-up password the tests look for


@pytest.mark.parametrize(
    "url",
    [
        # libpq ends the userinfo at the first '@': the rest of the password became the host.
        "postgresql://u:p@ssw0rd@db.example/cal",
        # ... and at a '/' before any '@': the password became a port and a database name.
        "postgresql://u:pa/ss@db.example/cal",
        "postgresql://u:5432/x@db.example/cal",
        # An '@' in the path is read as part of the database name, never as a userinfo.
        "postgresql://db.example/cal@other",
    ],
)
def test_a_url_whose_userinfo_libpq_would_read_otherwise_is_refused_saying_to_encode_it(
    url: str,
) -> None:
    with pytest.raises(DatabaseUrlError) as refused:
        check_database_url(url)

    assert "percent-encode each '@' and '/'" in str(refused.value)
    assert "ssw0rd" not in str(refused.value)
    assert "db.example" not in str(refused.value)


def test_the_options_refuse_an_unencoded_at_naming_the_option_and_never_the_password() -> None:
    with pytest.raises(OptionsError) as refused:
        load_options(database_url=f"postgresql://u:{PASSWORD}@db.example/cal")

    assert str(refused.value).startswith("--database-url / SLOT_EXPIRATION_DATABASE_URL: ")
    assert "percent-encode" in str(refused.value)
    assert "ssw0rd" not in str(refused.value)


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://u:{quote(PASSWORD, safe='')}@db.example/cal",
        "postgresql://u:pa%2Fss@db.example/cal",
        # libpq reads '?' and '#' inside the userinfo as the password's own.
        "postgresql://u:pa?ss@db.example/cal",
        "postgresql://u:pa#ss@db.example/cal",
        # An '@' in the query string is a parameter's value, not a userinfo.
        "postgresql://db.example/cal?application_name=a@b",
    ],
)
def test_an_unambiguous_url_is_accepted(url: str) -> None:
    check_database_url(url)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:x@db/cal", "postgresql://u:***@db/cal"),
        (
            "postgresql://u@db/cal?password=x&sslmode=require",
            "postgresql://u:***@db/cal?sslmode=require",
        ),
        ("postgresql://u:pa%3Fss@[::1]:5432/cal", "postgresql://u:***@[::1]:5432/cal"),
        ("postgresql://u:pa?ss@db/cal", "postgresql://u:***@db/cal"),
        (
            "postgresql://u:x@/cal?host=/run/postgresql",
            "postgresql://u:***@/cal?host=%2Frun%2Fpostgresql",
        ),
    ],
)
def test_a_url_is_shown_rebuilt_from_its_parts_without_its_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown


# Every parameter the libpq docs say holds a secret (listed here, not read from the code).
SECRET_PARAMETERS = (
    "password",
    "sslpassword",
    "oauth_client_secret",
    "scram_client_key",
    "scram_server_key",
)


@pytest.mark.parametrize("secret", SECRET_PARAMETERS)
def test_every_secret_parameter_of_libpq_is_shown_as_stars(secret: str) -> None:
    url = f"postgresql://u@db/cal?sslmode=require&{secret}=Sekret42"

    shown = redact_url(url)

    assert "Sekret42" not in shown
    if secret == "password":  # noqa: S105 - a parameter name, not a password
        assert shown == "postgresql://u:***@db/cal?sslmode=require"
    else:
        assert shown == f"postgresql://u@db/cal?sslmode=require&{secret}=***"


def test_a_password_and_a_key_passphrase_in_one_url_are_both_hidden() -> None:
    url = "postgresql://u:Sekret42@db/cal?sslkey=/k.pem&sslpassword=Phrase%2099"

    assert redact_url(url) == "postgresql://u:***@db/cal?sslkey=%2Fk.pem&sslpassword=***"


@pytest.mark.parametrize(
    ("typed", "shown"),
    [
        ("postgresql://u:x@db/cal?sslpassword=y", "postgresql://u:***@db/cal?sslpassword=***"),
        ("host=db sslpassword=Sekret42", "***"),
        ("PASSWORD=Sekret42", "***"),
        ("consoel", "consoel"),
    ],
)
def test_text_a_user_typed_is_quoted_back_without_any_secret(typed: str, shown: str) -> None:
    assert redact_typed(typed) == shown


def test_a_short_password_leaves_the_rest_of_the_url_as_it_is() -> None:
    # Masking the text "x" would have shown "e***ample" and "***ostgresql://".
    url = "postgresql://example:x@x.example/xyz?application_name=x"

    assert redact_url(url) == "postgresql://example:***@x.example/xyz?application_name=x"


_NAMES = st.text(
    # What a libpq string can hold: UTF-8, no NUL.
    alphabet=st.characters(codec="utf-8", blacklist_characters="\x00"),
    min_size=1,
    max_size=12,
)
_HOSTS = st.sampled_from(["db1", "10.0.0.7", "::1", "/run/postgresql", "db.example"])
_PORTS = st.sampled_from(["", "5432", "6543"])

# Drawing the first UTF-8 text builds Hypothesis' character tables: on a loaded machine that
# alone has passed its "too slow" limit.
_GENERATION = settings(suppress_health_check=[HealthCheck.too_slow])


@st.composite
def _connection_parts(draw: st.DrawFn) -> dict[str, str]:
    parts: dict[str, str] = {}
    for key in ("user", "password", "dbname", "application_name", "options"):
        if draw(st.booleans()):
            parts[key] = draw(_NAMES)
    hosts = draw(st.lists(_HOSTS, max_size=3))
    if hosts:
        parts["host"] = ",".join(hosts)
        ports = [draw(_PORTS) for _ in hosts]
        if any(ports):
            parts["port"] = ",".join(ports)
    return parts


@_GENERATION
@given(
    parts=_connection_parts(),
    secrets=st.dictionaries(
        st.sampled_from(SECRET_PARAMETERS), _NAMES.map(lambda name: f"{name}-Sekret")
    ),
)
def test_a_url_shown_holds_every_part_libpq_reads_but_no_secret(
    parts: dict[str, str], secrets: dict[str, str]
) -> None:
    given = {key: value for key, value in parts.items() if key != "password"} | secrets

    shown = redact_url(url_from_parts(given))

    for value in secrets.values():
        assert value not in shown
        assert quote(value, safe="") not in shown
    assert url_parts(shown) == {
        key: "***" if key in secrets else value for key, value in given.items()
    }


@_GENERATION
@given(parts=_connection_parts())
def test_a_rebuilt_url_is_read_by_libpq_as_exactly_the_parts_it_was_built_from(
    parts: dict[str, str],
) -> None:
    url = url_from_parts(parts)

    assert conninfo_to_dict(url) == parts
    assert url_parts(url) == parts


def test_a_search_path_joins_the_urls_own_options_and_is_quoted_for_libpq() -> None:
    url = "postgresql://u:x@db/cal?options=-c%20statement_timeout%3D5s"

    parts = url_parts(with_search_path(url, 'My "Book" ing'))

    assert parts["options"] == '-c statement_timeout=5s -csearch_path="My\\ ""Book""\\ ing"'
    assert {k: v for k, v in parts.items() if k != "options"} == {
        "user": "u",
        "password": "x",
        "host": "db",
        "dbname": "cal",
    }


def test_a_search_path_keeps_pgoptions_when_the_url_gives_no_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PGOPTIONS", "-c work_mem=8MB")

    parts = url_parts(with_search_path("postgresql://db/cal", "booking"))

    assert parts["options"] == '-c work_mem=8MB -csearch_path="booking"'


def test_the_schema_option_sets_the_search_path_of_the_url_every_session_uses() -> None:
    given_url = "postgresql://u:x@db/cal"

    plain = load_options(database_url=given_url)
    pointed = load_options(database_url=given_url, schema="booking")

    assert plain.require_database_url() == given_url
    assert url_parts(pointed.require_database_url())["options"] == '-csearch_path="booking"'


def test_a_schema_name_longer_than_postgresql_keeps_is_refused() -> None:
    with pytest.raises(OptionsError, match=r"--schema / SLOT_EXPIRATION_SCHEMA"):
        load_options(schema="s" * 64)
