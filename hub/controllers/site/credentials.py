"""Operator mode: a Site holds a finalizer, and deleting it revokes its agent's NATS credential.

While a Site exists it carries ``FINALIZER``. When it is deleted, the key its credential was
last minted for (``status.credential.publicKey``, written by ``hub.credentials.service``) is
revoked (``Deps.revoke``: the account JWT with the revocation, pushed to the resolver; the
server disconnects the agent at once), with the bootstrap credentials still unused (the hub's
Secret, and the one ``site add`` wrote with the Site's manifest), and only then is the
finalizer removed. A Site deleted
while the hub is down waits, Terminating, for the hub. ``record`` says what the credential
service and the RKCPs' ``SiteConnected`` need to know of a site.

Talks to the management cluster (``sites``: the finalizer) and, through ``revoke``, to NATS.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol

from common import kube as ckube
from common import logs
from common.kube import errors as kerrors
from common.kube import resources
from hub.api import site as site_api
from hub.credentials import rules
from hub.reconcile.rkcp import owner
from protocol import natsjwt

log = logging.getLogger(__name__)

FINALIZER: Final = "kamaji-broker.io/nats-credentials"
Revoke = Callable[[Mapping[str, int]], Awaitable[None]]


def record(obj: dict[str, Any] | None) -> rules.SiteRecord:
    """What a Site object (None: there is none) says for its credential."""
    if obj is None:
        return rules.SiteRecord(exists=False)
    meta = obj.get("metadata") or {}
    credential = (obj.get("status") or {}).get("credential") or {}
    made_with = _made_with(meta)
    return rules.SiteRecord(
        exists=not meta.get("deletionTimestamp"),
        key=str(credential.get("publicKey") or ""),
        issued_at=_unix(credential.get("issuedAt")),
        created_at=_unix(meta.get("creationTimestamp")),
        bootstrap=made_with.sub if made_with is not None else "",
    )


def _made_with(meta: dict[str, Any]) -> natsjwt.Claims | None:
    """The bootstrap credential the Site names as the one it was made with (``site add``)."""
    token = (meta.get("annotations") or {}).get(site_api.BOOTSTRAP_ANNOTATION)
    if not isinstance(token, str) or not token:
        return None
    return rules.bootstrap_of(token, site=str(meta.get("name") or ""))


def _unix(text: object) -> int:
    try:
        return int(dt.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()) if text else 0
    except ValueError:
        return 0


class Bootstrap(Protocol):
    """The bootstrap Secret of a new Site (``hub.controllers.site.bootstrap``)."""

    async def ensure(self, site: str, *, bootstrapped: bool, not_before: int = 0) -> None: ...

    async def release(self, site: str) -> None: ...


class SiteCredentials:
    def __init__(
        self,
        kube: ckube.Kube,
        revoke: Revoke,
        bootstrap: Bootstrap | None = None,
        *,
        issuer: rules.Issuer | None = None,
    ) -> None:
        self.kube = kube
        self.revoke = revoke
        self.bootstrap = bootstrap
        """Operator mode with a bootstrap namespace: a new Site's bootstrap Secret."""
        self.issuer = issuer
        """Who mints: the bootstrap credential a deleted Site names is revoked only if this hub
        minted it (an annotation is anyone's to write; it must not revoke another site's key)."""

    async def sync(self, obj: dict[str, Any]) -> bool:
        """Hold the finalizer on a live Site, or revoke and release a deleted one. True when
        the Site is being deleted (nothing else to write for it)."""
        meta = obj.get("metadata") or {}
        site = str(meta.get("name") or "")
        finalizers = list(meta.get("finalizers") or [])
        # clusterctl move deletes the source's copy: the site lives on in the target
        moving = owner.DELETE_FOR_MOVE in (meta.get("annotations") or {})
        if not meta.get("deletionTimestamp"):
            if FINALIZER not in finalizers and not moving:
                await self._finalizers(site, meta, [*finalizers, FINALIZER])
            if self.bootstrap is not None:
                said = record(obj)
                await self.bootstrap.ensure(site, bootstrapped=bool(said.key), not_before=said.created_at)
            return False
        if FINALIZER in finalizers:
            if moving:
                log.info(
                    "Site %s deleted for clusterctl move: its agent keeps its credential",
                    site,
                    extra=logs.about_site(site),
                )
            else:
                await self._revoke(site, obj)
            await self._finalizers(site, meta, [f for f in finalizers if f != FINALIZER])
        return True

    async def _revoke(self, site: str, obj: dict[str, Any]) -> None:
        """Revoke what was minted for the deleted Site: its agent's credential, the bootstrap
        credentials of its Secret and of its manifest (unused, they would outlive it)."""
        if self.bootstrap is not None:
            await self.bootstrap.release(site)
        now = int(dt.datetime.now(dt.UTC).timestamp())
        made_with = _made_with(obj.get("metadata") or {})
        if made_with is not None and self.issuer and rules.minted_here(made_with, self.issuer):
            await self.revoke({made_with.sub: now})
        key = record(obj).key
        if not key:
            log.info(
                "Site %s deleted: its agent never had a credential, nothing to revoke",
                site,
                extra=logs.about_site(site),
            )
            return
        await self.revoke({key: now})
        log.info(
            "Site %s deleted: revoked its agent's NATS credential %s", site, key, extra=logs.about_site(site)
        )

    async def _finalizers(self, site: str, meta: dict[str, Any], finalizers: list[str]) -> None:
        body = {"metadata": {"resourceVersion": meta.get("resourceVersion"), "finalizers": finalizers}}
        # A Conflict (the Site changed meanwhile) goes up: its sync is retried (SiteSync.run).
        with contextlib.suppress(kerrors.NotFound):  # gone already
            await self.kube.patch(resources.SITE, site, body)
