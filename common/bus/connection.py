"""The NATS connection: credentials, TLS, inbox prefix, reconnect forever, error translation.

Owns the nats-py client and JetStream context for the rest of ``common.bus``. Every call that
reaches the server goes through ``Connection.call``, the one place where nats-py exceptions
become ``common.bus.errors`` and permission violations become ``PermissionDenied``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import nats
import nats.errors
import nats.js
import nats.js.errors
from nats.aio.client import Client

from common.bus import errors, permissions, tls

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_INBOX_PREFIX = "_INBOX"


def site_inbox_prefix(site: str) -> str:
    """A site may subscribe only to ``_INBOX_<site>.>``, so its replies must arrive there."""
    return f"{DEFAULT_INBOX_PREFIX}_{site}"


@dataclass(frozen=True, kw_only=True)
class Options:
    servers: tuple[str, ...]
    seed_file: Path | None = None
    """An NKey user seed file (as written by ``kamaji-broker site add`` / ``nats-config``)."""
    creds_file: Path | None = None
    """A ``.creds`` file (JWT + seed), for servers in operator mode."""
    inbox_prefix: str = DEFAULT_INBOX_PREFIX
    name: str = "kamaji-broker"
    request_timeout: float = 5.0
    """Seconds to wait for a JetStream API answer before a call counts as a timeout."""
    reconnect_wait: float = 2.0
    """Seconds between (re)connect attempts; nats-py adds jitter so sites do not stampede."""
    ca_file: Path | None = None
    """The CA (PEM) the server's certificate must chain to. With it (or a ``tls://`` URL) the
    connection is TLS from its first byte, and a server that does not speak TLS is refused."""

    def __post_init__(self) -> None:
        if self.seed_file is not None and self.creds_file is not None:
            raise ValueError("give either an NKey seed file or a .creds file, not both")
        for f in (self.seed_file, self.creds_file):
            if f is not None and not f.is_file():
                raise ValueError(f"NATS credentials file {str(f)!r} does not exist")
        if self.ca_file is not None and not self.ca_file.is_file():
            raise ValueError(f"NATS CA file {str(self.ca_file)!r} does not exist")

    @property
    def uses_tls(self) -> bool:
        return tls.wanted(self.servers, self.ca_file)


@dataclass(eq=False)
class Connection:
    """A live connection. ``on_reconnect`` callbacks run after every reconnect (anti-entropy)."""

    nc: Client
    js: nats.js.JetStreamContext
    options: Options
    watch: permissions.Watch
    on_reconnect: list[Callable[[], Coroutine[Any, Any, None]]] = field(default_factory=list)
    reconnects: int = 0
    failure: list[str] = field(default_factory=list)
    """The last (re)connect failure in plain words, while it lasts (``[]`` once connected)."""

    @property
    def last_failure(self) -> str:
        return self.failure[0] if self.failure else ""

    @property
    def connected(self) -> bool:
        return bool(self.nc.is_connected)

    def inbox_pattern(self) -> str:
        return f"{self.options.inbox_prefix}.>"

    async def call(self, call: Awaitable[T], *, subjects: Iterable[str], what: str) -> T:
        """Await a nats-py call with permission guarding and error translation."""
        with translate(what):
            return await self.watch.guard(call, subjects=(*subjects, self.inbox_pattern()))

    async def sync(self) -> None:
        """Return once the server has processed everything sent before: a denial of it has arrived.

        One flush is not enough: nats-py writes the PING straight to the socket while earlier
        commands (SUB, PUB) may still wait in its pending buffer for the flusher task, so the
        PONG can overtake them. The first flush kicks the flusher; the second PING then follows
        everything that was pending.
        """
        timeout = int(self.options.request_timeout) or 1
        await self.nc.flush(timeout=timeout)
        await self.nc.flush(timeout=timeout)

    async def close(self) -> None:
        # close(), not drain(): every publish and ack of ours already waited for the server's
        # answer, and drain() waits its full timeout on a subscription the server refused.
        if not self.nc.is_closed:
            await _close(self.nc, timeout=self.options.request_timeout)


_ABANDON_TIMEOUT = 0.5
"""Seconds to let a client that never connected close: its socket is closed at once, only
nats-py's wait for the transport (which may never end) is cut short."""


async def _close(nc: Client, *, timeout: float) -> None:
    """Close within ``timeout`` seconds.

    Bounded because nats-py's close waits for its transport to close, and a transport whose TLS
    handshake failed during a reconnect (an impostor certificate, a rotated CA) never reports
    closed: the wait would hold a stopping process until SIGKILL. The socket is closed by then;
    only the wait is cut short.
    """
    try:
        await asyncio.wait_for(nc.close(), timeout)
    except TimeoutError:
        log.debug("NATS close did not finish within %ss; leaving it", timeout)
    except Exception as exc:  # closing must not fail the caller; the reason is only of interest here
        log.debug("NATS close: %s", exc)


@contextlib.contextmanager
def translate(what: str) -> Iterator[None]:
    """Map nats-py exceptions onto ``common.bus.errors``; ``what`` names the operation and subject."""
    try:
        yield
    except errors.BusError:
        raise
    except nats.js.errors.NotFoundError as exc:
        raise errors.NotFound(f"{what}: not found ({exc.description})") from None
    except nats.js.errors.ServiceUnavailableError:
        raise errors.Unavailable(f"{what}: JetStream is not available") from None
    except nats.js.errors.NoStreamResponseError:
        raise errors.Unavailable(f"{what}: no stream answered (is the topology created?)") from None
    except nats.js.errors.APIError as exc:
        raise errors.BusError(
            f"{what}: {exc.description} (code {exc.code}, err_code {exc.err_code})"
        ) from None
    except (TimeoutError, nats.errors.TimeoutError):
        raise errors.BusTimeout(f"{what}: timed out") from None
    except nats.errors.NoRespondersError:
        raise errors.Unavailable(f"{what}: no responders") from None
    except (nats.errors.ConnectionClosedError, nats.errors.ConnectionReconnectingError) as exc:
        raise errors.Unavailable(f"{what}: {exc}") from None
    except nats.errors.Error as exc:
        raise errors.BusError(f"{what}: {exc}") from None


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
            is_tls = tls.describe(exc, ca_file=self.options.ca_file) is not None
            (log.error if is_tls else log.warning)("%s", line)
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
    }
    if options.seed_file is not None:
        kwargs["nkeys_seed"] = str(options.seed_file)
    if options.creds_file is not None:
        kwargs["user_credentials"] = str(options.creds_file)
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
    an unreachable server.
    """
    watch = permissions.Watch()
    holder: list[Connection] = []
    failures = _Failures(options, report)

    async def error_cb(exc: Exception) -> None:
        violation = permissions.parse_violation(str(exc))
        if violation is not None:
            log.error("NATS permission violation: %s to %r", *violation)
            watch.record(*violation)
        elif holder and holder[0].nc.is_connected:
            log.warning("NATS error: %s", exc)
        else:  # not connected: why a (re)connect attempt failed
            failures.record(exc)

    async def reconnected_cb() -> None:
        failures.last.clear()
        if not holder:
            return
        conn = holder[0]
        conn.reconnects += 1
        log.info("NATS reconnected to %s", conn.nc.connected_url.netloc if conn.nc.connected_url else "?")
        for callback in list(conn.on_reconnect):
            asyncio.get_running_loop().create_task(callback())

    async def disconnected_cb() -> None:
        if holder and not (holder[0].nc.is_closed or holder[0].nc.is_draining):
            log.warning("NATS disconnected; reconnecting")

    callbacks = {"error_cb": error_cb, "reconnected_cb": reconnected_cb, "disconnected_cb": disconnected_cb}
    nc = await _first_connect(options, failures, deadline=deadline, callbacks=callbacks)
    failures.last.clear()
    conn = Connection(
        nc=nc,
        js=nc.jetstream(timeout=options.request_timeout),
        options=options,
        watch=watch,
        failure=failures.last,
    )
    holder.append(conn)
    return conn


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
            await _close(nc, timeout=_ABANDON_TIMEOUT)
            raise
        except (OSError, nats.errors.Error, TimeoutError) as exc:
            # A failed attempt (nats-py's own connect timeout is a TimeoutError too, and so is
            # our deadline): try again, as nats-py would, unless the deadline has passed.
            await _close(nc, timeout=_ABANDON_TIMEOUT)
            passed = give_up is not None and loop.time() >= give_up
            if not (passed and isinstance(exc, TimeoutError)):  # the last attempt's reason stays
                failures.record(exc)
            if passed:
                raise errors.Unavailable(failures.timed_out(deadline)) from None
            pause = options.reconnect_wait * random.uniform(0.5, 1.5)  # sites must not stampede
            await asyncio.sleep(pause if give_up is None else min(pause, max(0.0, give_up - loop.time())))
            continue
        except Exception as exc:  # a configuration nats-py refuses (a bad seed file): no retry helps
            await _close(nc, timeout=_ABANDON_TIMEOUT)
            raise errors.Unavailable(describe_failure(exc, options=options)) from None
        # Connected: from now on nats-py reconnects forever on its own (a failed TLS handshake
        # during a reconnect does not hang: it leaves that transport and tries again).
        nc.options["allow_reconnect"] = True
        return nc
