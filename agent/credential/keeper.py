"""The agent's own NATS identity in operator mode: bootstrap like a CSR, renew in-band.

Talks to the site's API server (the identity Secret, through ``common.kube``) and to the hub's
credential service over NATS (``common.bus``): once with the bootstrap .creds on a connection of
its own, then over the agent's connection to renew. What the Secret holds, whether a JWT may be
used, when to renew and what /readyz says are decided in ``agent.credential.state``.

The seed is made here, kept in the Secret before anything is asked (a crash never loses the key
a JWT is being minted for), and never leaves the site: the hub sees only its public key and a
signature. It is never logged nor put in a readiness reason or a metric.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import msgspec

from agent import metrics as agent_metrics
from agent.credential import state
from agent.settings import AgentSettings
from common import backoff, bus, health, kube, logs
from common.bus import errors as bus_errors
from common.bus import identity
from common.kube import errors as kerrors
from common.kube import resources
from protocol import credentials, errors, natsjwt, permissions, subjects

log = logging.getLogger(__name__)
T = TypeVar("T")

CHECK: Final = "nats-credential"
"""The readiness check of the credential: bootstrapping, or how long the JWT has left."""
BOOTSTRAP_CONNECT_DEADLINE: Final = 10.0
"""Seconds to try connecting with the bootstrap .creds before the attempt counts as failed (an
expired or used bootstrap credential is refused at every try; /readyz then says why)."""
RETRY_BASE: Final = 1.0
RETRY_CAP: Final = 60.0
"""Backoff (seconds) of bootstrap, renewal and Secret writes after a failure."""
RECHECK: Final = 60.0
"""At most this many seconds between two looks at the JWT's lifetime (readiness stays current)."""


class CredentialFailed(Exception):
    """Bootstrapping or renewing failed for a reason of ours or the hub's (the hub's own words)."""


class Credential:
    """The identity Secret, the bootstrap and the renewals of one agent."""

    def __init__(
        self,
        settings: AgentSettings,
        *,
        kube: kube.Kube,
        readiness: health.Readiness,
        metrics: agent_metrics.Metrics,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.namespace, self.name = settings.identity_secret
        self._kube = kube
        self.readiness = readiness
        self.metrics = metrics
        self._clock = clock
        self._seed = b""
        self._version: str | None = None
        self.held: identity.Held | None = None
        self.life: state.Lifetime | None = None

    @property
    def where(self) -> str:
        return f"Secret {self.namespace}/{self.name}"

    @property
    def about(self) -> dict[str, Any]:
        """Log fields: the identity Secret, and the site whose it is."""
        secret = resources.SECRET.kind
        return logs.about(kind=secret, namespace=self.namespace, name=self.name, site=self.settings.site)

    async def obtain(self) -> identity.Held:
        """The identity to connect with: the Secret's JWT if still valid, else one bootstrapped
        (retrying until the hub grants it; /readyz says why meanwhile)."""
        stored = await self._retrying(f"reading {self.where}", self._load)
        life, why = state.usable(stored, now=self._clock())
        token = stored.jwt or ""
        if life is None:
            log.info("no usable NATS JWT in %s (%s): bootstrapping", self.where, why, extra=self.about)
            token = await self._retrying("bootstrap", self._bootstrap)
            await self._retrying(f"storing the JWT in {self.where}", lambda: self._store(token))
            key = natsjwt.public_of(self._seed)
            log.info("bootstrapped: the hub minted a JWT for key %s", key, extra=self.about)
        else:
            log.info("using the NATS JWT kept in %s", self.where, extra=self.about)
        self.held = identity.Held(self._seed, token)
        self._track(token)
        return self.held

    async def _load(self) -> state.Stored:
        """The Secret, with a seed: made and kept first if there is none (create, or replace
        keeping the resourceVersion, so a concurrent writer makes this try again)."""
        found = await self._kube.get_or_none(resources.SECRET, self.name, namespace=self.namespace)
        stored = state.read(found)
        if stored.seed is None:
            seed = natsjwt.new_seed("user")
            body = state.body(
                self.namespace, self.name, seed=seed, jwt=None, resource_version=stored.resource_version
            )
            if stored.exists:
                written = await self._kube.replace(
                    resources.SECRET, self.name, body, namespace=self.namespace
                )
            else:
                written = await self._kube.create(resources.SECRET, body, namespace=self.namespace)
            key = natsjwt.public_of(seed)
            log.info("made a new NATS user key %s, kept in %s", key, self.where, extra=self.about)
            stored = state.read(written)
        assert stored.seed is not None
        self._seed, self._version = stored.seed, stored.resource_version
        return stored

    async def _store(self, token: str) -> None:
        body = state.body(
            self.namespace, self.name, seed=self._seed, jwt=token, resource_version=self._version
        )
        try:
            written = await self._kube.replace(resources.SECRET, self.name, body, namespace=self.namespace)
        except (kerrors.Conflict, kerrors.NotFound):
            # Changed or deleted meanwhile: write ours again (our seed is the one the JWT is for).
            current = await self._kube.get_or_none(resources.SECRET, self.name, namespace=self.namespace)
            if current is None:
                body["metadata"].pop("resourceVersion", None)
                written = await self._kube.create(resources.SECRET, body, namespace=self.namespace)
            else:
                self._version = current["metadata"]["resourceVersion"]
                raise
        self._version = state.read(written).resource_version

    async def _bootstrap(self) -> str:
        """One bootstrap: connect with the bootstrap .creds, ask, close."""
        s = self.settings
        path = s.nats_bootstrap_creds
        if path is None:
            raise CredentialFailed(f"{self.where} holds no usable JWT and no --nats-bootstrap-creds is given")
        try:
            credential = natsjwt.jwt_of_creds(path.read_text())
            natsjwt.decode(credential, now=self._clock())  # an expired one: said plainly, no connect
        except OSError as exc:
            raise CredentialFailed(f"--nats-bootstrap-creds {str(path)!r}: {exc.strerror}") from None
        except errors.JWTError as exc:
            raise CredentialFailed(
                f"--nats-bootstrap-creds {str(path)!r}: {exc}; ask the operator for a new one"
            ) from None
        options = bus.Options(
            servers=s.servers,
            creds_file=path,
            ca_file=s.nats_ca_file,
            inbox_prefix=permissions.bootstrap_inbox_prefix(s.site),
            name=f"kamaji-broker-agent-{s.site}-bootstrap",
        )
        conn = await bus.connect(options, deadline=BOOTSTRAP_CONNECT_DEADLINE)
        try:
            return await self._ask(conn, credentials.Kind.BOOTSTRAP, credential)
        finally:
            await conn.close()

    async def _ask(self, conn: bus.Connection, kind: credentials.Kind, credential: str) -> str:
        """A JWT from the hub for our key (CredentialFailed with the hub's reason if refused)."""
        s = self.settings
        request = credentials.request(kind, s.site, self._seed, credential=credential)
        subject = subjects.service(kind, s.site, prefix=s.prefix)
        data = await conn.request(subject, msgspec.json.encode(request))
        try:
            reply = msgspec.json.decode(data, type=credentials.Reply)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise CredentialFailed(f"the hub's {kind.value} reply is not a credential reply: {exc}") from None
        if reply.error or not reply.jwt:
            raise CredentialFailed(f"the hub refused: {reply.error or 'an empty reply'}")
        life, why = state.usable(state.Stored(exists=True, seed=self._seed, jwt=reply.jwt), now=self._clock())
        if life is None:
            raise CredentialFailed(f"the hub's JWT is not usable: {why}")
        return reply.jwt

    async def renew_forever(self, conn: bus.Connection) -> None:
        """Renew the JWT over ``conn`` from ``renew_at`` on, retrying with backoff; /readyz
        turns not ready only when the expiry is close. nats-py asks ``held`` for the JWT at each
        connect; ``conn`` reconnects at once with the new one (see ``bus.Connection.reconnect``)
        instead of waiting for the server to drop it at the old one's expiry."""
        failure, failures = "", 0
        while True:
            assert self.life is not None
            now = self._clock()
            self.readiness.set(CHECK, *state.readiness(self.life, now=now, failure=failure))
            due = state.renew_at(self.life, renew_before=self.settings.nats_renew_before)
            look_again = min(state.next_change(self.life, now=now) - now, RECHECK)
            if now < due:
                await asyncio.sleep(min(due - now, look_again))
                continue
            try:
                await self._renew(conn)
            except (bus_errors.BusError, CredentialFailed) as exc:
                failures += 1
                failure = str(exc)
                log.warning("renewing the NATS credential failed: %s", failure, extra=self.about)
                pause = backoff.delay(failures, base=RETRY_BASE, cap=RETRY_CAP)
                await asyncio.sleep(min(pause, look_again))
            else:
                failure, failures = "", 0

    async def _renew(self, conn: bus.Connection) -> None:
        assert self.held is not None
        token = await self._ask(conn, credentials.Kind.RENEW, self.held.jwt())
        self.held.replace(token)
        self._track(token)
        await self._retrying(f"storing the JWT in {self.where}", lambda: self._store(token))
        await conn.reconnect()  # like a server restart: subscriptions and pulls resume, nothing is lost
        readiness = state.readiness(self._life(), now=self._clock())[1]
        log.info("NATS credential renewed: %s", readiness, extra=self.about)

    def _life(self) -> state.Lifetime:
        assert self.life is not None
        return self.life

    def _track(self, token: str) -> None:
        self.life = state.lifetime_of(natsjwt.decode(token, now=0))
        self.metrics.credential_expiry.set(self.life.expires)
        self.readiness.set(CHECK, *state.readiness(self.life, now=self._clock()))

    async def _retrying(self, what: str, attempt: Callable[[], Awaitable[T]]) -> T:
        """``attempt`` until it succeeds; each failure in /readyz (and logged), then backoff."""
        failures = 0
        while True:
            try:
                return await attempt()
            except (kerrors.KubeError, bus_errors.BusError, CredentialFailed) as exc:
                failures += 1
                pause = backoff.delay(failures, base=RETRY_BASE, cap=RETRY_CAP)
                reason = state.failed(what, str(exc), retry_in=pause)
                self.readiness.set(CHECK, False, reason)
                log.warning("%s", reason, extra=self.about)
                await asyncio.sleep(pause)
