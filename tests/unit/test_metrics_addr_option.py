"""--metrics-addr / SLOT_EXPIRATION_METRICS_ADDR: host:port, or '' for no endpoint."""

from __future__ import annotations

import pytest

from slot_expiration.options import OptionsError, load_options
from slot_expiration.options.listen_address import ListenAddress, parse_listen_address


def test_the_endpoint_listens_on_loopback_port_9464_by_default() -> None:
    options = load_options()

    assert options.metrics_addr == "127.0.0.1:9464"
    assert options.metrics_address == ListenAddress("127.0.0.1", 9464)


def test_an_empty_address_turns_the_endpoint_off() -> None:
    assert load_options(metrics_addr="").metrics_address is None


def test_the_address_is_read_from_its_environment_variable_and_the_flag_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLOT_EXPIRATION_METRICS_ADDR", "10.0.0.7:9100")

    assert load_options().metrics_address == ListenAddress("10.0.0.7", 9100)
    assert load_options(metrics_addr="127.0.0.1:0").metrics_address == ListenAddress("127.0.0.1", 0)


def test_an_empty_environment_variable_turns_the_endpoint_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLOT_EXPIRATION_METRICS_ADDR", "")

    assert load_options().metrics_address is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:9464", ListenAddress("127.0.0.1", 9464)),
        ("0.0.0.0:0", ListenAddress("0.0.0.0", 0)),  # noqa: S104 - every interface, on purpose
        ("[::1]:9464", ListenAddress("::1", 9464)),
        ("metrics.calendar.internal:9100", ListenAddress("metrics.calendar.internal", 9100)),
        ("localhost:65535", ListenAddress("localhost", 65535)),
    ],
)
def test_host_port_ipv6_in_brackets_and_host_names_are_accepted(
    text: str, expected: ListenAddress
) -> None:
    assert parse_listen_address(text) == expected
    assert str(parse_listen_address(text)) == text


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("9464", "host:port"),
        (":9464", "host:port"),
        ("127.0.0.1:", "port must be a number"),
        ("127.0.0.1:65536", "port must be a number"),
        ("127.0.0.1:http", "port must be a number"),
        ("::1:9464", "in brackets"),
        ("[not-v6]:9464", "not an IPv6 address"),
        ("bad host:9464", "not a host name"),
        ("http://127.0.0.1:9464", "without a scheme"),
    ],
)
def test_a_wrong_address_is_rejected_naming_the_flag_and_the_variable(text: str, says: str) -> None:
    with pytest.raises(OptionsError) as caught:
        load_options(metrics_addr=text)

    message = str(caught.value)
    assert message.startswith("--metrics-addr / SLOT_EXPIRATION_METRICS_ADDR: "), message
    assert says in message
