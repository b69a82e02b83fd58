"""The hub's credential service (operator mode): site credentials minted over NATS.

Answers ``<prefix>.bootstrap.*`` and ``<prefix>.renew.*`` (``protocol.credentials``) on the
hub's own connection, during its leader term only. For each request: the site from the subject
(the server's word), the answer only to that site's inbox (a request may name any reply
subject, and the hub may publish intents: it must never answer onto a stream's subject), the
request's proof (``protocol.credentials.check``), the JWT it comes with, then ``hub.
credentialrules.judge`` against the ``Site`` in the management cluster. A granted request gets a
user JWT for the asker's own key (``protocol.credentials.site_user``, signed with the account's
signing key), recorded first in the Site's ``status.credential`` (the key a deletion revokes),
then answered; the keys the verdict names (a used bootstrap, a replaced key) are revoked after.

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

from common import bus
from common import kube as ckube
from common.bus import errors as bus_errors
from common.kube import errors as kerrors
from common.kube import resources
from hub import credentialrules, revocation
from hub import metrics as hub_metrics
from protocol import credentials, errors, natsjwt, subjects

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Deps:
    conn: bus.Connection
    system: bus.Connection
    kube: ckube.Kube
    sites: Callable[[str], Awaitable[credentialrules.SiteRecord]]
    """What the management cluster says of a site (the hub's Site cache)."""
    authority: revocation.Authority
    metrics: hub_metrics.Metrics


class CredentialService:
    def __init__(
        self,
        deps: Deps,
        *,
        prefix: str = subjects.DEFAULT_PREFIX,
        lifetime: dt.timedelta = credentials.DEFAULT_LIFETIME,
    ) -> None:
        self.deps = deps
        self.prefix = prefix
        self.lifetime = lifetime
        self.issuer = credentialrules.Issuer(
            account=deps.authority.account, signing_key=natsjwt.public_of(deps.authority.account_signing)
        )
        self._used: set[str] = set()
        """Bootstrap keys used in this term (revoked too, so a later term needs no memory)."""
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
        inbox = f"{bus.site_inbox_prefix(site)}."
        if not msg.reply.startswith(inbox):
            log.warning(
                "credential %s request for site %s wants its answer on %r, outside the site's inbox %s*: "
                "not answered", kind.value, site, msg.reply[:80], inbox,
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
        verdict = credentialrules.judge(
            req,
            presented,
            site=site,
            issuer=self.issuer,
            record=await self.deps.sites(site),
            used_bootstraps=self._used,
        )
        if not verdict.granted:
            return await self._refuse(kind, site, msg, verdict.reason)
        if kind is credentials.Kind.BOOTSTRAP:
            self._used.add(presented.sub)  # before the first await: one use, whatever follows
        await self._grant(kind, site, msg, req, now, verdict)

    async def _grant(
        self,
        kind: credentials.Kind,
        site: str,
        msg: bus.Message,
        req: credentials.Request,
        now: dt.datetime,
        verdict: credentialrules.Verdict,
    ) -> None:
        claims = credentials.site_user(
            site,
            req.public_key,
            account=self.issuer.account,
            now=now,
            lifetime=self.lifetime,
            prefix=self.prefix,
        )
        token = self.deps.authority.mint(claims)
        try:
            await self._record(site, req.public_key, now=now, expires=claims.exp)
        except kerrors.NotFound:
            return await self._refuse(kind, site, msg, f"no Site {site!r} in the management cluster")
        await self.deps.conn.respond(msg, msgspec.json.encode(credentials.Reply(jwt=token)))
        self.deps.metrics.credential_requests.labels(kind.value, "granted").inc()
        log.info("site %s: credential %s for key %s, valid until %s", site, kind.value, req.public_key,
                 dt.datetime.fromtimestamp(claims.exp, dt.UTC).isoformat())  # fmt: skip
        if verdict.revoke:
            at = int(now.timestamp())
            await revocation.revoke(
                self.deps.system, self.deps.authority, dict.fromkeys(verdict.revoke, at), now=now
            )
            self.deps.metrics.credentials_revoked.inc(len(verdict.revoke))

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
        log.warning("site %s: credential %s refused: %s", site, kind.value, reason)
        self.deps.metrics.credential_requests.labels(kind.value, "refused").inc()
        try:
            await self.deps.conn.respond(msg, msgspec.json.encode(credentials.Reply(error=reason)))
        except bus_errors.BusError as exc:
            log.warning("site %s: could not answer the refused request: %s", site, exc)
