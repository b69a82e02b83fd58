"""The live NATS connection: the nats-py client and JetStream context, and error translation.

``Connection`` owns both nats-py objects (privately: nothing outside ``common.bus`` touches
them) and offers the few operations its users need. Every call that reaches the server goes
through ``Connection.call`` (or ``jetstream``, which hands the JetStream context to a call of
this package's modules), the one place where nats-py exceptions become ``common.bus.errors`` and
permission violations become ``PermissionDenied``. How a connection is made (credentials, TLS,
retries, reconnect callbacks) lives in ``common.bus.connecting``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import nats.aio.subscription
import nats.errors
import nats.js
import nats.js.errors
from nats.aio.client import Client
from nats.aio.msg import Msg

from common.bus import errors, flushing, permissions, tls

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_INBOX_PREFIX = "_INBOX"


def site_inbox_prefix(site: str) -> str:
    """A site may subscribe only to ``_INBOX_<site>.>``, so its replies must arrive there."""
    return f"{DEFAULT_INBOX_PREFIX}_{site}"


class Identity(Protocol):
    """A NATS user that proves itself with a JWT and its NKey (operator mode), asked afresh at
    every (re)connect: a renewed JWT is used from the next connect on."""

    def jwt(self) -> str: ...

    def sign(self, nonce: bytes) -> bytes:
        """The raw Ed25519 signature of the server's nonce by the user's NKey."""
        ...


@dataclass(frozen=True, kw_only=True)
class Options:
    servers: tuple[str, ...]
    seed_file: Path | None = None
    """An NKey user seed file (as written by ``kamaji-broker site add`` / ``nats-config``)."""
    creds_file: Path | None = None
    """A ``.creds`` file (JWT + seed), for servers in operator mode; read at every connect."""
    identity: Identity | None = None
    """A JWT and NKey held in memory (operator mode): what the hub mints itself, what an agent
    keeps in its Secret and renews."""
    inbox_prefix: str = DEFAULT_INBOX_PREFIX
    name: str = "kamaji-broker"
    request_timeout: float = 5.0
    """Seconds to wait for a JetStream API answer before a call counts as a timeout."""
    reconnect_wait: float = 2.0
    """Seconds between (re)connect attempts; nats-py adds jitter so sites do not stampede."""
    ping_interval: float = 20.0
    """Seconds between nats-py's PINGs. A connection that answers none of
    ``max_outstanding_pings`` in a row counts as stale and is replaced: a link that died
    without a word (a half-open connection, a cut that outlasts TCP's patience) is noticed after
    about ``(max_outstanding_pings + 1) * ping_interval`` seconds (nats-py's own: 120 s, 2)."""
    max_outstanding_pings: int = 3
    ca_file: Path | None = None
    """The CA (PEM) the server's certificate must chain to. With it (or a ``tls://`` URL) the
    connection is TLS from its first byte, and a server that does not speak TLS is refused."""

    def __post_init__(self) -> None:
        given = [self.seed_file, self.creds_file, self.identity]
        if sum(x is not None for x in given) > 1:
            raise ValueError("give one NATS credential: an NKey seed file, a .creds file or an identity")
        for f in (self.seed_file, self.creds_file):
            if f is not None and not f.is_file():
                raise ValueError(f"NATS credentials file {str(f)!r} does not exist")
        if self.ca_file is not None and not self.ca_file.is_file():
            raise ValueError(f"NATS CA file {str(self.ca_file)!r} does not exist")

    @property
    def uses_tls(self) -> bool:
        return tls.wanted(self.servers, self.ca_file)


@dataclass(frozen=True)
class Message:
    """A message of a plain (not JetStream) subscription."""

    subject: str
    data: bytes
    headers: dict[str, str]
    reply: str = ""
    """Where the sender waits for an answer (``Connection.respond``), if it sent a request."""


@dataclass(eq=False)
class Connection:
    """A live connection. ``on_reconnect`` callbacks run after every reconnect (anti-entropy)."""

    _nc: Client
    _js: nats.js.JetStreamContext
    options: Options
    watch: permissions.Watch
    on_reconnect: list[Callable[[], Coroutine[Any, Any, None]]] = field(default_factory=list)
    reconnects: int = 0
    failure: list[str] = field(default_factory=list)
    """The last (re)connect failure in plain words, while it lasts (``[]`` once connected)."""
    lost: list[str] = field(default_factory=list)
    """Why the connection ended for good without ``close`` (nats-py gives up on any error the
    server sends but a permissions violation, a stale connection or a failed reconnect: say
    ``maximum subscriptions exceeded``); empty while it lives or reconnects."""
    closing: bool = False
    """``close`` was called: its end is no loss."""
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the connection is closed, by us or for good by the server."""
    flushes: flushing.Flushes = field(default_factory=flushing.Flushes)
    """Round trips of ``sync`` still waiting for their PONG."""

    @property
    def last_failure(self) -> str:
        return self.failure[0] if self.failure else ""

    @property
    def connected(self) -> bool:
        return bool(self._nc.is_connected)

    @property
    def max_payload(self) -> int:
        """The largest message the server takes (it advertised it when we connected)."""
        return int(self._nc.max_payload)

    def inbox_pattern(self) -> str:
        return f"{self.options.inbox_prefix}.>"

    async def call(self, call: Awaitable[T], *, subjects: Iterable[str], what: str) -> T:
        """Await a nats-py call with permission guarding and error translation."""
        with translate(what):
            return await self.watch.guard(call, subjects=(*subjects, self.inbox_pattern()))

    async def jetstream(
        self,
        call: Callable[[nats.js.JetStreamContext], Awaitable[T]],
        *,
        subjects: Iterable[str],
        what: str,
    ) -> T:
        """``call`` on the JetStream context, guarded and translated as ``call`` is."""
        return await self.call(call(self._js), subjects=subjects, what=what)

    async def subscribe(self, subject: str, handler: Callable[[Message], Awaitable[None]]) -> Subscription:
        """A plain subscription whose messages go to ``handler``, once the server has taken it;
        PermissionDenied (naming the subject) if it refuses it."""

        async def deliver(msg: Msg) -> None:
            await handler(
                Message(subject=msg.subject, data=msg.data, headers=dict(msg.headers or {}), reply=msg.reply)
            )

        made: list[Subscription] = []

        async def subscribe_and_sync() -> Subscription:
            made.append(Subscription(await self._nc.subscribe(subject, cb=deliver)))
            await self.sync()  # the server has answered the subscription when this returns
            return made[0]

        try:
            return await self.call(subscribe_and_sync(), subjects=[subject], what=f"subscribe to {subject}")
        except BaseException:
            for sub in made:
                await sub.unsubscribe()
            raise

    async def request(self, subject: str, data: bytes, *, timeout: float | None = None) -> bytes:
        """A core NATS request: the answer's bytes. Unavailable when nobody answers,
        BusTimeout when the answer does not come in time, PermissionDenied naming the subject."""
        wait = self.options.request_timeout if timeout is None else timeout
        reply = await self.call(
            self._nc.request(subject, data, timeout=wait), subjects=[subject], what=f"request on {subject}"
        )
        return bytes(reply.data)

    async def respond(self, message: Message, data: bytes) -> None:
        """Answer a request (a ``Message`` with a reply subject), once the server has taken it."""
        if not message.reply:
            raise ValueError(f"message on {message.subject} is not a request: it has no reply subject")

        async def publish() -> None:
            await self._nc.publish(message.reply, data)
            await self.sync()

        await self.call(publish(), subjects=[message.reply], what=f"answer on {message.reply}")

    async def reconnect(self) -> None:
        """Leave the server and connect again (nats-py's ``force_reconnect``), presenting the
        identity's current JWT. After a renewal this is how the new JWT takes over: nats-py
        closes the connection for good on the server's "User Authentication Expired" rather than
        reconnecting, so waiting for the old JWT's expiry would lose the connection."""
        await self._nc.force_reconnect()

    async def sync(self) -> None:
        """Return once the server has processed everything sent before: a denial of it has arrived.

        One flush is not enough: nats-py writes the PING straight to the socket while earlier
        commands (SUB, PUB) may still wait in its pending buffer for the flusher task, so the
        PONG can overtake them. The first flush kicks the flusher; the second PING then follows
        everything that was pending. Neither is ever cancelled (``common.bus.flushing``).
        """
        timeout = float(self.options.request_timeout) or 1.0
        for _ in range(2):
            await flushing.round_trip(self._nc, self.flushes, self.ended, timeout=timeout)

    async def close(self) -> None:
        # close(), not drain(): every publish and ack of ours already waited for the server's
        # answer, and drain() waits its full timeout on a subscription the server refused.
        self.closing = True
        try:
            if not self._nc.is_closed:
                await close_client(self._nc, timeout=self.options.request_timeout)
        finally:
            self.flushes.end()  # no one reads for their PONGs any more (nor has to, if it closed late)


@dataclass(frozen=True)
class Subscription:
    """A plain subscription of ``Connection.subscribe``."""

    _sub: nats.aio.subscription.Subscription

    async def unsubscribe(self) -> None:
        # A closed connection has nothing left to release.
        with contextlib.suppress(nats.errors.Error):
            await self._sub.unsubscribe()


async def close_client(nc: Client, *, timeout: float) -> None:
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
