"""Helpers of the TLS attack cases: certificates that must not be trusted, servers that serve
them, a raw plaintext client, and the server's own view of its connections (/connz).

Certificates come from ``common.files.tls`` (the code ``nats-config`` uses), bent where an
attacker would bend them: another CA with the very same name, a certificate for other names,
an expired one.
"""

from __future__ import annotations

import datetime as dt
import json
import socket
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.files import atomic, tls
from sandbox import natsd

NOW = dt.datetime.now(dt.UTC)


def write_ca(directory: Path) -> tuple[tls.Key, Any, Path]:
    """A fresh CA in ``directory`` (same subject as ours, other key): (key, cert, ca.crt path)."""
    key, cert = tls.new_ca(now=NOW)
    path = directory / tls.CA_CERT
    atomic.write_public(path, tls.pem_cert(cert))
    atomic.write_private(directory / tls.CA_KEY, tls.pem_key(key))
    return key, cert, path


def server_files(
    directory: Path,
    *,
    hosts: tuple[str, ...] = (),
    defaults: tuple[str, ...] = tls.DEFAULT_HOSTS,
    now: dt.datetime = NOW,
    days: int = 30,
) -> tls.Paths:
    """A CA and a server certificate for ``defaults`` + ``hosts``, issued at ``now``."""
    ca_key, ca_cert, ca_path = write_ca(directory)
    key, cert = tls.new_server_certificate(
        ca_key, ca_cert, hosts=hosts, now=now, days=days, defaults=defaults
    )
    atomic.write_public(directory / tls.SERVER_CERT, tls.pem_cert(cert))
    atomic.write_private(directory / tls.SERVER_KEY, tls.pem_key(key))
    return tls.Paths(cert=directory / tls.SERVER_CERT, key=directory / tls.SERVER_KEY, ca=ca_path)


@contextmanager
def running(server: natsd.NatsServer) -> Iterator[natsd.NatsServer]:
    server.start()
    try:
        yield server
    finally:
        server.stop()


@dataclass(frozen=True)
class PlaintextAttempt:
    info: dict[str, Any]
    """What the server announced before any TLS."""
    answer: bytes
    """Everything the server sent after the plaintext CONNECT and PING (b"" when it hung up)."""
    local_port: int


def plaintext_client(port: int, *, connect: dict[str, Any]) -> PlaintextAttempt:
    """Speak the NATS protocol in the clear: read INFO, send CONNECT and PING, read the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        reader = s.makefile("rb")
        line = reader.readline()
        assert line.startswith(b"INFO "), line
        info = json.loads(line[5:])
        s.sendall(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
        answer = b""
        while chunk := reader.read1(4096):  # until the server closes the connection
            answer += chunk
        return PlaintextAttempt(info=info, answer=answer, local_port=s.getsockname()[1])


def connz(server: natsd.NatsServer) -> list[dict[str, Any]]:
    """The server's client connections, as its monitoring endpoint lists them."""
    with urllib.request.urlopen(f"{server.monitor_url}/connz?limit=1024", timeout=5) as r:
        return list(json.load(r).get("connections") or [])
