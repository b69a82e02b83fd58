"""Operator mode: the bootstrap credential of a new Site, as a Secret for the operator to hand over.

Creating a ``Site`` is enough to onboard a site (``kamaji-broker site add`` offline is the other
way): while the Site has no credential yet (``status.credential``), the hub keeps a Secret
``<site>-nats-bootstrap`` in its namespace with a single-use, short-lived bootstrap credential
(``bootstrap.creds``, as the agent's ``--nats-bootstrap-creds`` takes it), minted again when it
nears its expiry. Once the agent has bootstrapped (the key is recorded), the Secret has served
and is deleted; its key is revoked by the credential service at that moment. When the Site is
deleted before it was used, its key is revoked and the Secret deleted too.

The hub remembers the expiry of each Secret it wrote, so a Site looked at every heartbeat
interval costs no read. Talks to the management cluster (``secrets`` in one namespace).
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
from collections.abc import Callable
from typing import Any, Final

from common import kube as ckube
from common import logs
from common.kube import resources
from hub.controllers.site.credentials import Revoke
from protocol import errors, natsjwt

log = logging.getLogger(__name__)

KEY: Final = "bootstrap.creds"
SITE_LABEL: Final = "kamaji-broker.io/site"


def secret_name(site: str) -> str:
    return f"{site}-nats-bootstrap"


class BootstrapSecrets:
    def __init__(
        self,
        kube: ckube.Kube,
        *,
        namespace: str,
        mint: Callable[[str, dt.datetime], str],
        lifetime: dt.timedelta,
        revoke: Revoke,
    ) -> None:
        self.kube = kube
        self.revoke = revoke
        """A Secret's credential replaced or no longer needed is revoked, never left valid."""
        self.namespace = namespace
        self.mint = mint
        """``mint(site, now)``: the text of a fresh bootstrap ``.creds`` for ``site``."""
        self.renew_before = lifetime / 5
        self._expires: dict[str, dt.datetime] = {}
        """The expiry of the Secret written (or found) for each site still waiting for its agent."""
        self._served: set[str] = set()
        """Sites whose agent bootstrapped and whose Secret is deleted."""

    async def ensure(self, site: str, *, bootstrapped: bool, not_before: int = 0) -> None:
        """A valid bootstrap Secret while the site has no credential; none once it has.
        ``not_before``: when the Site was created (unix seconds): a credential made before is
        of an earlier Site of that name, refused by the credential service, so replaced."""
        if bootstrapped:
            if site not in self._served:
                await self._discard(site)  # the agent bootstrapped (with it or another one)
                self._served.add(site)
                self._expires.pop(site, None)
            return
        self._served.discard(site)
        now = dt.datetime.now(dt.UTC)
        expires = self._expires.get(site)
        if expires is None:
            expires = await self._stored_expiry(site, not_before=not_before)
        if expires is not None and expires - now > self.renew_before:
            self._expires[site] = expires
            return
        # Issued no earlier than the Site (the API server's clock may be ahead of ours).
        creds = self.mint(site, max(now, dt.datetime.fromtimestamp(not_before, dt.UTC)))
        exp = natsjwt.decode(natsjwt.jwt_of_creds(creds), now=0).exp
        old = await self.kube.get_or_none(resources.SECRET, secret_name(site), namespace=self.namespace)
        await self.kube.create_or_replace(
            resources.SECRET, self._secret(site, creds), namespace=self.namespace
        )
        replaced = _claims_of(old)
        if replaced is not None:
            await self.revoke({replaced.sub: int(now.timestamp())})  # the one it replaces
        self._expires[site] = dt.datetime.fromtimestamp(exp, dt.UTC)
        secret = (resources.SECRET.kind, self.namespace, secret_name(site))
        about = logs.about(kind=secret[0], namespace=secret[1], name=secret[2], site=site)
        log.info(
            "Site %s: bootstrap credential in Secret %s/%s until %s; hand it to the site's agent",
            site, self.namespace, secret_name(site), self._expires[site].isoformat(), extra=about,
        )  # fmt: skip

    async def release(self, site: str) -> None:
        """The Site is deleted: revoke its unused bootstrap credential and delete the Secret."""
        self._expires.pop(site, None)
        self._served.discard(site)
        await self._discard(site)

    async def _discard(self, site: str) -> None:
        """Revoke the Secret's credential (whoever may have read it) and delete the Secret."""
        obj = await self.kube.get_or_none(resources.SECRET, secret_name(site), namespace=self.namespace)
        if obj is None:
            return
        claims = _claims_of(obj)
        if claims is not None:
            await self.revoke({claims.sub: int(dt.datetime.now(dt.UTC).timestamp())})
        await self.kube.delete(resources.SECRET, secret_name(site), namespace=self.namespace)

    async def _stored_expiry(self, site: str, *, not_before: int) -> dt.datetime | None:
        claims = _claims_of(
            await self.kube.get_or_none(resources.SECRET, secret_name(site), namespace=self.namespace)
        )
        if claims is None or not claims.exp or claims.iat < not_before:
            return None  # none, not one of ours, damaged, or older than the Site: replaced
        return dt.datetime.fromtimestamp(claims.exp, dt.UTC)

    def _secret(self, site: str, creds: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": secret_name(site),
                "namespace": self.namespace,
                "labels": {"app.kubernetes.io/managed-by": "kamaji-broker", SITE_LABEL: site},
            },
            "type": "Opaque",
            "data": {KEY: base64.b64encode(creds.encode("ascii")).decode("ascii")},
        }


def _claims_of(obj: dict[str, Any] | None) -> natsjwt.Claims | None:
    """The claims of a bootstrap Secret's credential; None without one (or a damaged one)."""
    if obj is None:
        return None
    try:
        creds = base64.b64decode((obj.get("data") or {}).get(KEY, "")).decode("ascii")
        return natsjwt.decode(natsjwt.jwt_of_creds(creds), now=0)
    except (ValueError, UnicodeDecodeError, errors.JWTError):
        return None
