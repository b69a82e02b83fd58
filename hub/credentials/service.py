"""The hub's credential service (operator mode): site credentials minted over NATS.

Answers ``<prefix>.bootstrap.*`` and ``<prefix>.renew.*`` (``protocol.credentials``) on the
hub's own connection, during its leader term only. For each request: the site from the subject
(the server's word), the answer only to the inbox of the asker's kind (a request may name any
reply subject, and the hub may publish intents: it must never answer onto a stream's subject;
nor a bootstrap's answer into the agent's inbox, or a renewal's where bootstrap credentials
read), the request's proof (``protocol.credentials.check``), the JWT it comes with, then
``rules.judge`` against the ``Site`` in the management cluster. A granted request gets a
user JWT for the asker's own key (``protocol.credentials.site_user``, signed with the account's
signing key), recorded first in the Site's ``status.credential`` (the key a deletion revokes),
then answered; the keys the verdict names (a used bootstrap, a replaced key) are revoked after.
The keys the hub holds as revoked (``hub.credentials.revocation.Revoker.revoked``) are never minted for.

Talks to NATS (the hub's connection and, for revocations, its system-account connection) and
to the management cluster (``sites/status``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import msgspec

from common import bus, logs
from common import kube as ckube
from common.bus import errors as bus_errors
from common.kube import errors as kerrors
from common.kube import resources
from hub import metrics as hub_metrics
from hub.credentials import revocation, rules
from protocol import credentials, errors, natsjwt, permissions, subjects

log = logging.getLogger(__name__)

BOOTSTRAP_GRACE = 30.0
"""Seconds a used bootstrap credential stays unrevoked, so that an agent whose answer was lost
can ask again for the same key (``rules``: granted again); a replaced key of the site
is revoked at once."""


@dataclass(frozen=True)
class Deps:
    conn: bus.Connection
    revoker: revocation.Revoker
    """The hub's one writer of the account (its ``authority`` mints)."""
    kube: ckube.Kube
    sites: Callable[[str], Awaitable[rules.SiteRecord]]
    """What the management cluster says of a site (the hub's Site cache)."""
    metrics: hub_metrics.Metrics


def _inbox_prefix(kind: credentials.Kind, site: str) -> str:
    if kind is credentials.Kind.BOOTSTRAP:
        return permissions.bootstrap_inbox_prefix(site)
    return permissions.site_inbox_prefix(site)


class CredentialService:
    def __init__(
        self,
        deps: Deps,
        *,
        prefix: str = subjects.DEFAULT_PREFIX,
        lifetime: dt.timedelta = credentials.DEFAULT_LIFETIME,
        bootstrap_grace: float = BOOTSTRAP_GRACE,
    ) -> None:
        self.deps = deps
        self.prefix = prefix
        self.lifetime = lifetime
        self.bootstrap_grace = bootstrap_grace
        self.issuer = revocation.issuer(deps.revoker.authority)
        self._used: dict[str, str] = {}
        """Bootstrap keys used in this term, and the key each was used for (a later term has the
        Site's ``status.credential.issuedAt``, and the revocation)."""
        self._later: set[asyncio.Task[None]] = set()
        self.serving = asyncio.Event()
        """Set once both subscriptions are in place."""

    async def run(self) -> None:
        subs = []
        try:
            for kind in credentials.Kind:
                glob = subjects.service_globbed(kind, prefix=self.prefix)
                subs.append(await self.deps.conn.subscribe(glob, self._handler(kind)))
            log.info("credential service answering %s", ", ".join(k.value for k in credentials.Kind))
            self.serving.set()
            await asyncio.Event().wait()
        finally:
            self.serving.clear()
            for task in self._later:
                task.cancel()
            for sub in subs:
                await sub.unsubscribe()

    def _handler(self, kind: credentials.Kind) -> Callable[[bus.Message], Awaitable[None]]:
        async def handle(msg: bus.Message) -> None:
            try:
                await self.handle(kind, msg)
            except Exception:  # one bad request never ends the service
                log.exception("credential %s request on %s failed", kind.value, msg.subject)

        return handle

    async def handle(self, kind: credentials.Kind, msg: bus.Message) -> None:
        site = subjects.service_site(kind, msg.subject, prefix=self.prefix)
        inbox = f"{_inbox_prefix(kind, site)}."
        if not msg.reply.startswith(inbox):
            log.warning(
                "credential %s request for site %s wants its answer on %r, outside the asker's inbox %s*: "
                "not answered", kind.value, site, msg.reply[:80], inbox, extra=logs.about(site=site),
            )  # fmt: skip
            self.deps.metrics.credential_requests.labels(kind.value, "unanswerable").inc()
            return
        now = dt.datetime.now(dt.UTC)
        try:
            req = credentials.decode(msg.data)
            credentials.check(req, kind=kind, site=site, now=now)
            presented = natsjwt.decode(req.credential, now=now.timestamp())
        except (errors.DecodeError, errors.CredentialError, errors.JWTError) as exc:
            return await self._refuse(kind, site, msg, str(exc))
        verdict = await self._judge(site, req, presented)
        if not verdict.granted:
            await self._refuse(kind, site, msg, verdict.reason)
            if verdict.revoke:  # a spent credential shown again: it ends now, not at its expiry
                await self._revoke_now({k: int(now.timestamp()) for k in verdict.revoke}, now)
            return
        if kind is credentials.Kind.BOOTSTRAP:
            self._used[presented.sub] = req.public_key  # before the first await: one use
        token = await self._mint_and_record(kind, site, msg, req, now)
        if token is None:  # refused: nothing was minted, nothing replaced; it may be used again
            if self._used.get(presented.sub) == req.public_key:
                del self._used[presented.sub]
            return
        try:
            await self.deps.conn.respond(msg, msgspec.json.encode(credentials.Reply(jwt=token)))
            self.deps.metrics.credential_requests.labels(kind.value, "granted").inc()
            log.info(
                "site %s: credential %s for key %s",
                site,
                kind.value,
                req.public_key,
                extra=logs.about(site=site),
            )
        finally:  # recorded: what it replaces goes, even when the answer could not be sent
            await self._revoke(verdict.revoke, bootstrap=presented.sub, now=now)

    async def _judge(self, site: str, req: credentials.Request, presented: natsjwt.Claims) -> rules.Verdict:
        """``rules.judge`` with what the management cluster and the account say now."""
        try:
            revoked = await self.deps.revoker.revoked()
        except bus_errors.BusError as exc:
            return rules.Verdict(f"the hub cannot read the account's revocations: {exc}")
        return rules.judge(
            req,
            presented,
            site=site,
            issuer=self.issuer,
            record=await self.deps.sites(site),
            used_bootstraps=self._used,
            revoked=revoked,
        )

    async def _mint_and_record(
        self,
        kind: credentials.Kind,
        site: str,
        msg: bus.Message,
        req: credentials.Request,
        now: dt.datetime,
    ) -> str | None:
        """The JWT minted and recorded in the Site; None when it could not be recorded (the
        request is refused, by name)."""
        claims = credentials.site_user(
            site,
            req.public_key,
            account=self.issuer.account,
            now=now,
            lifetime=self.lifetime,
            prefix=self.prefix,
        )
        token = self.deps.revoker.authority.mint(claims)
        try:
            await self._record(site, req.public_key, now=now, expires=claims.exp)
        except kerrors.NotFound:
            await self._refuse(kind, site, msg, f"no Site {site!r} in the management cluster")
            return None
        except kerrors.KubeError as exc:
            await self._refuse(
                kind, site, msg, f"the hub cannot record the credential in Site {site!r}: {exc}"
            )
            return None
        return token

    async def _revoke(self, keys: tuple[str, ...], *, bootstrap: str, now: dt.datetime) -> None:
        """Revoke a replaced key at once and a used bootstrap after ``bootstrap_grace``; a
        failure leaves them pending in the revoker, which pushes them at its next sync."""
        at = int(now.timestamp())
        replaced = {k: at for k in keys if k != bootstrap}
        if replaced:
            await self._revoke_now(replaced, now)
        if bootstrap in keys:
            if self.bootstrap_grace <= 0:
                await self._revoke_now({bootstrap: at}, now)
                return
            task = asyncio.create_task(self._revoke_later({bootstrap: at}))
            self._later.add(task)
            task.add_done_callback(self._later.discard)

    async def _revoke_later(self, keys: dict[str, int]) -> None:
        await asyncio.sleep(self.bootstrap_grace)
        await self._revoke_now(keys, dt.datetime.now(dt.UTC))

    async def _revoke_now(self, keys: dict[str, int], now: dt.datetime) -> None:
        try:
            await self.deps.revoker.revoke(keys, now=now)
            self.deps.metrics.credentials_revoked.inc(len(keys))
        except bus_errors.BusError as exc:
            log.error(
                "revoking %s failed (%s): pending, pushed at the next account sync", ", ".join(keys), exc
            )

    async def _record(self, site: str, key: str, *, now: dt.datetime, expires: int) -> None:
        credential = {
            "publicKey": key,
            "issuedAt": now.replace(microsecond=0).isoformat().replace("+00:00", "Z"),
            "expiresAt": dt.datetime.fromtimestamp(expires, dt.UTC).isoformat().replace("+00:00", "Z"),
        }
        await self.deps.kube.patch(
            resources.SITE, site, {"status": {"credential": credential}}, subresource="status"
        )

    async def _refuse(self, kind: credentials.Kind, site: str, msg: bus.Message, reason: str) -> None:
        log.warning(
            "site %s: credential %s refused: %s", site, kind.value, reason, extra=logs.about(site=site)
        )
        self.deps.metrics.credential_requests.labels(kind.value, "refused").inc()
        try:
            await self.deps.conn.respond(msg, msgspec.json.encode(credentials.Reply(error=reason)))
        except bus_errors.BusError as exc:
            log.warning(
                "site %s: could not answer the refused request: %s", site, exc, extra=logs.about(site=site)
            )
