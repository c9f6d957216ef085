"""`host:port` addresses the worker listens on (its metrics and health endpoint)."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

# An RFC 1123 host name: dot-separated labels of letters, digits and inner hyphens.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_MAX_PORT = 65_535


@dataclass(frozen=True, slots=True)
class ListenAddress:
    """Where to listen. Port 0 asks the system for a free port."""

    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_listen_address(text: str) -> ListenAddress:
    """`127.0.0.1:9464`, `0.0.0.0:9464`, `[::1]:9464` or `metrics.local:9464`.

    Raises ValueError with a message that says what a valid address looks like.
    """
    if "://" in text:
        raise ValueError("give host:port without a scheme, e.g. 127.0.0.1:9464")
    host, colon, port_text = text.rpartition(":")
    if not colon or not host:
        raise ValueError("must be host:port, e.g. 127.0.0.1:9464 (or '' to turn it off)")
    if not port_text.isdigit() or int(port_text) > _MAX_PORT:
        raise ValueError("port must be a number from 0 to 65535")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        if not _is_ip(host, version=6):
            raise ValueError(f"{host!r} is not an IPv6 address")
    elif ":" in host:
        raise ValueError("an IPv6 host goes in brackets, e.g. [::1]:9464")
    elif not (_is_ip(host, version=4) or _HOSTNAME.fullmatch(host)):
        raise ValueError(f"{host!r} is not a host name or an IP address")
    return ListenAddress(host=host, port=int(port_text))


def _is_ip(text: str, version: int) -> bool:
    try:
        return ipaddress.ip_address(text).version == version
    except ValueError:
        return False
