"""Making a NATS connection: credentials, TLS, retry until connected, reconnect forever.

``connect`` turns ``Options`` into a live ``common.bus.connection.Connection``: nats-py's
arguments from the options, our own retry loop around the first connect (with failures in
plain words for ``/readyz``), and the callbacks that record permission violations, count
reconnects, run the connection's ``on_reconnect`` callbacks and say why a connection nats-py
gave up on was lost.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import nats.errors
from nats.aio.client import Client

from common import logs
from common.bus import errors, permissions, tls
from common.bus.connection import Connection, Options, close_client

log = logging.getLogger(__name__)

_ABANDON_TIMEOUT = 0.5
"""Seconds to let a client that never connected close: its socket is closed at once, only
nats-py's wait for the transport (which may never end) is cut short."""


def describe_failure(exc: BaseException, *, options: Options) -> str:
    """A (re)connect failure as one line naming the servers (and the CA file for TLS failures)."""
    why = tls.describe(exc, ca_file=options.ca_file)
    if why is None:
        why = str(exc) or type(exc).__name__
    return f"cannot connect to NATS at {', '.join(options.servers)}: {why}"


@dataclass
class _Failures:
    """Why the last (re)connect attempt failed, logged once per distinct reason (not at every
    retry) and passed to ``report``; cleared once connected."""

    options: Options
    report: Callable[[str], None] | None
    last: list[str] = field(default_factory=list)

    def record(self, exc: BaseException) -> None:
        line = describe_failure(exc, options=self.options)
        if self.last[:1] != [line]:
            # A TLS failure is a misconfiguration to be fixed, unless the link cut it short.
            misconfigured = tls.describe(exc, ca_file=self.options.ca_file) is not None and not tls.cut_short(
                exc
            )
            (log.error if misconfigured else log.warning)("%s", line)
        self.last[:] = [line]
        if self.report is not None:
            self.report(line)

    def timed_out(self, deadline: float | None) -> str:
        last = f"; last attempt: {self.last[0].split(': ', 1)[1]}" if self.last else ""
        servers = ", ".join(self.options.servers)
        return f"cannot connect to NATS at {servers}: no connection within {deadline}s{last}"


def _client_options(options: Options) -> dict[str, Any]:
    """nats-py's connect arguments for ``options``, callbacks aside."""
    kwargs: dict[str, Any] = {
        "servers": list(options.servers),
        "name": options.name,
        "inbox_prefix": options.inbox_prefix,
        "allow_reconnect": True,
        "max_reconnect_attempts": -1,
        "reconnect_time_wait": options.reconnect_wait,
        "connect_timeout": options.request_timeout,
        "ping_interval": options.ping_interval,
        "max_outstanding_pings": options.max_outstanding_pings,
    }
    if options.seed_file is not None:
        kwargs["nkeys_seed"] = str(options.seed_file)
    if options.creds_file is not None:
        kwargs["user_credentials"] = str(options.creds_file)
    if options.identity is not None:
        identity = options.identity
        kwargs["user_jwt_cb"] = lambda: identity.jwt().encode("ascii")
        kwargs["signature_cb"] = lambda nonce: base64.b64encode(identity.sign(nonce.encode("ascii")))
    if options.uses_tls:
        # TLS before the server's first word: nothing crosses the network in the clear, and a
        # server (or a man in the middle) that does not offer TLS cannot downgrade us to
        # plaintext, which nats-py would otherwise accept from a server without tls_required.
        kwargs["tls"] = tls.context(options.ca_file)
        kwargs["tls_handshake_first"] = True
    return kwargs


async def connect(
    options: Options, *, deadline: float | None = None, report: Callable[[str], None] | None = None
) -> Connection:
    """Connect, retrying until connected (forever unless ``deadline`` seconds pass).

    Once connected, nats-py reconnects forever on its own; we count reconnects and run the
    ``on_reconnect`` callbacks. ``report`` hears every failed (re)connect attempt in plain words
    (for ``/readyz``): a wrong CA file retries forever too, but says so instead of looking like
    an unreachable server. A connection nats-py gives up on says why in ``Connection.lost``.
    """
    heard = _Callbacks(permissions.Watch(), _Failures(options, report))
    nc = await _first_connect(options, heard.failures, deadline=deadline, callbacks=heard.callbacks())
    heard.failures.last.clear()
    conn = Connection(
        nc,
        nc.jetstream(timeout=options.request_timeout),
        options=options,
        watch=heard.watch,
        failure=heard.failures.last,
    )
    heard.holder.append((conn, nc))
    return conn


@dataclass
class _Callbacks:
    """nats-py's callbacks of one connection: what they hear goes to the ``Connection``."""

    watch: permissions.Watch
    failures: _Failures
    holder: list[tuple[Connection, Client]] = field(default_factory=list)
    """The connection and its client, once connected."""

    def callbacks(self) -> dict[str, Any]:
        return {
            "error_cb": self.error_cb,
            "reconnected_cb": self.reconnected_cb,
            "disconnected_cb": self.disconnected_cb,
            "closed_cb": self.closed_cb,
        }

    async def error_cb(self, exc: Exception) -> None:
        violation = permissions.parse_violation(str(exc))
        if violation is not None:
            log.error("NATS permission denied: %s to %r", *violation, extra=logs.about_subject(violation[1]))
            self.watch.record(*violation)
        elif self.holder and self.holder[0][1].is_connected:
            log.warning("NATS error: %s", exc)
        else:  # not connected: why a (re)connect attempt failed
            self.failures.record(exc)

    async def reconnected_cb(self) -> None:
        self.failures.last.clear()
        if not self.holder:
            return
        conn, nc = self.holder[0]
        conn.reconnects += 1
        log.info("NATS reconnected to %s", nc.connected_url.netloc if nc.connected_url else "?")
        for callback in list(conn.on_reconnect):
            asyncio.get_running_loop().create_task(callback())

    async def disconnected_cb(self) -> None:
        if self.holder and not (self.holder[0][1].is_closed or self.holder[0][1].is_draining):
            log.warning("NATS disconnected; reconnecting")

    async def closed_cb(self) -> None:
        if not self.holder or not self.holder[0][1].is_closed:
            return  # not connected yet, or an abandoned first attempt closing late
        conn, nc = self.holder[0]
        conn.ended.set()
        conn.flushes.end()
        if conn.closing:
            return  # closed by us: no loss
        why = str(nc.last_error or "") or "the server closed it"
        conn.lost[:] = [why]
        log.error("NATS connection closed for good: %s", why)


async def _first_connect(
    options: Options, failures: _Failures, *, deadline: float | None, callbacks: dict[str, Any]
) -> Client:
    """A connected client, after as many attempts as it takes (until ``deadline`` seconds, if any).

    One attempt per client, and our own retry loop around it: nats-py's first connect, retrying
    on its own, closes a transport whose TLS handshake failed and then waits forever for it to
    report closed (nats-io/nats.py#718, #382). A handshake fails that way whenever the
    ClientHello is later than nats-server's ``handshake_first`` fallback delay (it then sends
    INFO in the clear; 50 ms with "auto", so a loaded machine did), and the process never
    connected again.
    """
    kwargs = {**_client_options(options), **callbacks, "allow_reconnect": False}
    loop = asyncio.get_running_loop()
    give_up = None if deadline is None else loop.time() + deadline
    while True:
        nc = Client()
        remaining = None if give_up is None else max(0.0, give_up - loop.time())
        try:
            await asyncio.wait_for(nc.connect(**kwargs), remaining)
        except asyncio.CancelledError:  # a process stopped while it still waits for its server
            await close_client(nc, timeout=_ABANDON_TIMEOUT)
            raise
        except (OSError, nats.errors.Error, TimeoutError) as exc:
            # A failed attempt (nats-py's own connect timeout is a TimeoutError too, and so is
            # our deadline): try again, as nats-py would, unless the deadline has passed.
            await close_client(nc, timeout=_ABANDON_TIMEOUT)
            passed = give_up is not None and loop.time() >= give_up
            if not (passed and isinstance(exc, TimeoutError)):  # the last attempt's reason stays
                failures.record(exc)
            if passed:
                raise errors.Unavailable(failures.timed_out(deadline)) from None
            pause = options.reconnect_wait * random.uniform(0.5, 1.5)  # sites must not stampede
            await asyncio.sleep(pause if give_up is None else min(pause, max(0.0, give_up - loop.time())))
            continue
        except Exception as exc:  # a configuration nats-py refuses (a bad seed file): no retry helps
            await close_client(nc, timeout=_ABANDON_TIMEOUT)
            raise errors.Unavailable(describe_failure(exc, options=options)) from None
        # Connected: from now on nats-py reconnects forever on its own (a failed TLS handshake
        # during a reconnect does not hang: it leaves that transport and tries again).
        nc.options["allow_reconnect"] = True
        return nc
