"""Raw nats-py clients for the NATS attack cases, and the evidence each case checks.

An attacker here is a plain ``nats.connect`` with a site's NKey seed written by `kamaji-broker
site add` (no ``common.bus`` in between: the attack must not depend on our client's care).
A refusal is the server's ``-ERR 'Permissions Violation for Publish|Subscription to "<subject>"'``,
which nats-py hands to ``error_cb`` lower-cased; ``Raw.denied`` waits for the one naming the
subject. ``snapshot`` is everything an attack could have changed on JetStream (every stream's
sequences and every consumer's delivery state), read with the hub's credentials.

How the raw connections are made lives in ``connect`` only, so a transport change (TLS) is made
in one place.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.client import JetStreamContext

from common import bus
from common.bus import permissions as bus_permissions
from common.bus.connection import close_client
from protocol import messages, subjects
from sandbox import natsd
from tests import helpers

SITES = ("site-a", "site-b")
"""The sites `secured_nats` adds."""

CONTROL_PLANES = ("cp1", "cp2")


@dataclass
class Raw:
    """One raw connection and the permission violations the server reported on it."""

    nc: Client
    inbox_prefix: str
    violations: list[tuple[str, str]] = field(default_factory=list)
    received: list[Msg] = field(default_factory=list)

    def inbox(self) -> str:
        return f"{self.inbox_prefix}.{uuid.uuid4().hex}"

    async def publish(self, subject: str, payload: bytes = b"", *, reply: str = "") -> None:
        """Publish and flush, so that a refusal has reached ``error_cb`` when this returns
        (the server answers the PING after the PUB it refused)."""
        await self.nc.publish(subject, payload, reply=reply)
        await self.nc.flush(timeout=5)

    async def listen(self, subject: str) -> None:
        """Collect whatever arrives on ``subject`` (a reply inbox) into ``received``."""

        async def collect(msg: Msg) -> None:
            self.received.append(msg)

        await self.nc.subscribe(subject, cb=collect)
        await self.nc.flush(timeout=5)

    async def ask(self, subject: str, payload: bytes = b"") -> Msg:
        """A request whose answer comes on a fresh inbox of its own. (nats-py's ``request``
        routes answers by their subject, and a JetStream delivery keeps its message's subject.)"""
        inbox = self.inbox()
        sub = await self.nc.subscribe(inbox, max_msgs=1)
        try:
            await self.publish(subject, payload, reply=inbox)
            return await sub.next_msg(timeout=5)
        finally:
            await sub.unsubscribe()

    async def subscribe(self, subject: str) -> None:
        await self.nc.subscribe(subject)
        await self.nc.flush(timeout=5)

    async def denied(self, operation: str, subject: str, *, within: float = 5.0) -> None:
        """Wait until the server refuses ``operation`` on exactly ``subject``."""
        want = (operation, subject.lower())

        async def seen() -> bool:
            return want in self.violations

        try:
            await helpers.eventually(seen, within=within)
        except AssertionError:
            raise AssertionError(f"no violation {want}; violations seen: {self.violations}") from None

    async def close(self) -> None:
        await self.nc.close()


async def connect(server: natsd.NatsServer, identity: Path, *, inbox_prefix: str = "_INBOX") -> Raw:
    """A raw connection with ``identity``: an NKey seed, or a ``.creds`` file (operator mode)."""
    raw: Raw | None = None
    early: list[tuple[str, str]] = []

    async def on_error(exc: Exception) -> None:
        parsed = bus_permissions.parse_violation(str(exc))
        if parsed is not None:
            (raw.violations if raw is not None else early).append(parsed)

    nc = Client()
    given: dict[str, Any] = {**helpers.tls_options(server.url), **helpers.credential_option(identity)}
    try:
        await nc.connect(
            servers=[server.url],
            **given,
            inbox_prefix=inbox_prefix,
            error_cb=on_error,
            allow_reconnect=False,
            connect_timeout=5,
        )
    except BaseException:
        await _abandon(nc)
        raise
    raw = Raw(nc=nc, inbox_prefix=inbox_prefix, violations=early)
    return raw


async def _abandon(nc: Client) -> None:
    """Close a client whose connect failed: nats-py leaves a refused attempt's transport open, and
    the garbage collector would report it (ResourceWarning) during whichever test runs next."""
    await close_client(nc, timeout=5)


async def refusal(server: natsd.NatsServer, **options: Any) -> str:
    """The server's refusal of a connection made with ``options`` (credentials), lower-cased;
    fails if the server lets it in."""
    return await refusal_at(server.url, **options)


async def refusal_at(url: str, **options: Any) -> str:
    """``refusal`` by the server's URL (a system's server)."""
    nc = Client()
    given: dict[str, Any] = {**helpers.tls_options(url), **options}
    try:
        await nc.connect(servers=[url], allow_reconnect=False, connect_timeout=5, **given)
    except nats.errors.Error as exc:
        return str(exc).lower()
    finally:
        await _abandon(nc)
    raise AssertionError("the server let the connection in")


async def connect_site(server: natsd.NatsServer, conf: Path, site: str) -> Raw:
    return await connect(server, helpers.identity_file(conf, f"sites/{site}"), inbox_prefix=f"_INBOX_{site}")


async def connect_hub(server: natsd.NatsServer, conf: Path) -> Raw:
    return await connect(server, helpers.identity_file(conf, "hub"))


async def snapshot(js: JetStreamContext) -> dict[str, tuple[Any, ...]]:
    """Every stream's sequences and every consumer's delivery state (no timestamps)."""
    out: dict[str, tuple[Any, ...]] = {}
    for info in await js.streams_info():
        name = info.config.name
        assert name is not None
        s = info.state
        out[name] = (s.messages, s.bytes, s.first_seq, s.last_seq, tuple(info.config.subjects or ()))
        for c in await js.consumers_info(name):
            d, f = c.delivered, c.ack_floor
            out[f"{name}/{c.name}"] = (
                c.num_pending,
                c.num_ack_pending,
                c.num_waiting,
                c.num_redelivered,
                d.stream_seq if d else None,
                d.consumer_seq if d else None,
                f.stream_seq if f else None,
                c.config.filter_subject,
                tuple(c.config.filter_subjects or ()),
                c.paused,
            )
    return out


async def seed(server: natsd.NatsServer, conf: Path, js: JetStreamContext) -> None:
    """Intents for every site, and every site's statuses, sealed secrets and heartbeat: the
    victims' messages. Once per server (a later call finds them and does nothing)."""
    if (await js.stream_info("KB_INTENTS")).state.messages:
        return
    for site in SITES:
        for name in CONTROL_PLANES:
            await js.publish(
                subjects.intent(site, "tenants", name),
                messages.encode(helpers.intent(site=site, name=name)),
            )
        raw = await connect_site(server, conf, site)
        try:
            sjs = raw.nc.jetstream()
            for name in CONTROL_PLANES:
                await sjs.publish(
                    subjects.status(site, "tenants", name),
                    messages.encode(helpers.status(site=site, name=name)),
                )
                await sjs.publish(
                    subjects.secret(site, "tenants", name),
                    messages.encode(helpers.sealed(site=site, name=name)),
                )
            await sjs.publish(subjects.heartbeat(site), messages.encode(helpers.heartbeat(site=site)))
        finally:
            await raw.close()


async def alive(server: natsd.NatsServer, *clients: Raw) -> None:
    """The server process runs and answers every client still connected."""
    assert server.process is not None and server.process.poll() is None
    for c in clients:
        assert c.nc.is_connected
        await c.nc.flush(timeout=5)


def body(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


async def prepare(server: natsd.NatsServer, conf: Path) -> Raw:
    """The hub's raw connection on a server with the topology of ``SITES`` and their messages."""
    conn = await bus.connect(
        helpers.options(server.url, seed_file=helpers.identity_file(conf, "hub")), deadline=10
    )
    try:
        await bus.ensure_topology(conn, sites=list(SITES))
    finally:
        await conn.close()
    hub = await connect_hub(server, conf)
    await seed(server, conf, hub.nc.jetstream())
    return hub
