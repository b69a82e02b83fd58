"""Doctor checks of the NATS connection: reachable, TLS verified, permissions granted.

``connect`` is the seam that makes one connection with the process's own options (bounded by a
deadline, every failed attempt collected); ``reachable`` and ``tls`` decide from what it saw,
purely. ``probe_request`` and ``probe_subscribe`` are the safe permission probes: a JetStream API
request that only reads, and a subscription to the role's own inbox that is dropped at once.
Nothing is published on a data subject: ``unprobed`` says which grants are therefore not probed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from common import bus
from common.bus import errors
from common.doctor import results
from common.doctor.results import Result

NATS = "nats reachable"
TLS = "tls verified"
PERMISSIONS = "permission granted"
UNPROBED = "permission not probed"

Failure = Literal["tls", "auth", "dns", "refused", "timeout", "other"]

_MARKERS: tuple[tuple[Failure, tuple[str, ...]], ...] = (
    # In this order: a TLS or authorization failure says more than the broken pipe that follows it.
    ("tls", ("tls: ", "tls handshake")),  # "tls: ...", not the scheme of a tls:// URL
    ("auth", ("authorization violation", "authentication expired", "authentication revoked")),
    ("dns", ("name or service not known", "nodename nor servname", "temporary failure in name resolution")),
    ("refused", ("connect call failed", "connection refused", "errno 111")),
    ("timeout", ("timed out", "timeout", "no connection within")),
)


def classify(failures: Sequence[str]) -> Failure:
    """What kind of failure the attempts' texts show (the most telling one)."""
    text = "\n".join(failures).lower()
    for kind, markers in _MARKERS:
        if any(m in text for m in markers):
            return kind
    return "other"


@dataclass(frozen=True)
class Seen:
    """What connecting showed: every failed attempt's text (empty when it connected at once)."""

    connected: bool
    failures: tuple[str, ...] = ()

    @property
    def kind(self) -> Failure | None:
        return None if self.connected else classify(self.failures)

    @property
    def telling(self) -> str:
        """The latest failure of the kind seen (an authorization violation, not the broken
        pipe after it)."""
        kind = self.kind
        last = self.failures[-1] if self.failures else "no answer"
        return next((f for f in reversed(self.failures) if classify([f]) == kind), last)


def _fixes(servers: str, identity: str, ca: str) -> dict[Failure, str]:
    return {
        "tls": f"give --nats-ca-file the CA that signed the server's certificate ({ca}); "
        "`kamaji-broker nats-config --tls-generate` wrote it as tls/ca.crt",
        "auth": f"the server refused {identity}: check that it is the credential made for this "
        "process (`kamaji-broker site add` / `nats-config`) and that the server's configuration "
        "(auth.conf or the operator's account) is the one in use",
        "dns": f"the host of --nats-url ({servers}) does not resolve: fix the URL or the DNS name",
        "refused": f"nothing listens at --nats-url ({servers}): start nats-server, or fix the host and port",
        "timeout": f"no answer from --nats-url ({servers}) in time: check the network path "
        "(firewall, NetworkPolicy) and that the server runs",
        "other": f"check --nats-url ({servers}) and the server's log",
    }


def reachable(seen: Seen, *, servers: Sequence[str], identity: str, ca_file: Path | None) -> Result:
    """PASS when connected; FAIL naming the kind of failure otherwise (TLS, authorization,
    DNS, refused, timeout), with its fix."""
    where = ", ".join(servers)
    if seen.connected:
        return results.passed(NATS, f"connected to {where} as {identity}")
    kind = seen.kind or "other"
    ca = f"now {ca_file}" if ca_file is not None else "none given"
    fix = _fixes(where, identity, ca)[kind]
    return results.failed(NATS, f"{kind}: {seen.telling}", fix)


def tls(seen: Seen, *, servers: Sequence[str], ca_file: Path | None, uses_tls: bool) -> Result:
    """With TLS: PASS once connected (the handshake verified the server against the CA), FAIL
    when the handshake failed. Without: WARN, everything crosses the network in plaintext."""
    trust = f"CA file {ca_file}" if ca_file is not None else "the system's CAs"
    if seen.kind == "tls":
        return results.failed(
            TLS,
            f"the server's certificate did not verify against {trust}",
            "give --nats-ca-file the CA that signed the server's certificate "
            "(`nats-config --tls-generate`: tls/ca.crt; cert-manager: the issuer's ca.crt)",
        )
    if not uses_tls:
        return results.warned(
            TLS,
            f"plaintext: {', '.join(servers)} without TLS (credentials and secrets cross unencrypted)",
            "serve TLS (`kamaji-broker nats-config --tls-generate`) and give a tls:// --nats-url "
            "with --nats-ca-file tls/ca.crt",
        )
    if not seen.connected:
        return results.skipped(TLS, "not connected, for a reason other than TLS")
    return results.passed(TLS, f"handshake verified the server against {trust}")


async def connect(options: bus.Options, *, deadline: float) -> tuple[bus.Connection | None, Seen]:
    """The seam: a connection made as the process makes it, or None and every failure seen."""
    failures: list[str] = []
    try:
        conn = await bus.connect(options, deadline=deadline, report=failures.append)
    except errors.BusError as exc:
        return None, Seen(connected=False, failures=(*failures, str(exc)))
    return conn, Seen(connected=True)


async def probe_request(conn: bus.Connection, subject: str) -> Result:
    """A read-only JetStream API request on ``subject``: PASS when the server let it through
    (whatever the API answered), FAIL when it denied the publish."""
    try:
        await conn.request(subject, b"")
    except errors.PermissionDenied:
        return results.failed(
            PERMISSIONS,
            f"publish to {subject} denied by the server",
            "the server's permissions for this user lack it: re-issue the credential "
            "(`kamaji-broker site add <site>` / operator mode: the hub mints it) and reload the server",
        )
    except errors.BusError as exc:
        return results.warned(PERMISSIONS, f"publish to {subject}: {exc}", "check that JetStream is enabled")
    return results.passed(PERMISSIONS, f"publish to {subject}")


async def probe_subscribe(conn: bus.Connection, subject: str) -> Result:
    """A subscription to ``subject`` (the role's own inbox), dropped at once."""

    async def ignore(_: bus.Message) -> None:
        return None

    try:
        sub = await conn.subscribe(subject, ignore)
    except errors.PermissionDenied:
        return results.failed(
            PERMISSIONS,
            f"subscribe to {subject} denied by the server",
            "the server's permissions for this user lack its inbox: re-issue the credential "
            "and check that the process's inbox prefix matches its site",
        )
    with contextlib.suppress(errors.BusError):
        await sub.unsubscribe()
    return results.passed(PERMISSIONS, f"subscribe to {subject}")


def unprobed(grants: Sequence[str]) -> Result:
    """A SKIP naming the grants no probe checked: using them would change state (publish data,
    pull, ack, reset a consumer, take a request meant for the running process)."""
    return results.skipped(UNPROBED, "would change state: " + "; ".join(grants))
