"""The launcher's own NATS users (operator mode), for whoever looks at the bus from outside the
system: the tests, the benches, the sandbox's live view.

No command a production install runs writes them: ``nats-config`` and ``site add`` leave no
site or hub credential on disk. The launcher signs them when asked, with the account's signing
key of the sandbox's own ``nats-config`` directory, and each is short-lived:

    hub_credential()               DIR/nats/launcher-hub.creds: the hub's permissions, for an
                                   hour, signed again (a new key) once half of it has passed
    site_credential(site)          DIR/nats/sites/<site>.creds: the site's permissions for an
                                   hour, for the key its Site records (its agent's, read from
                                   the agent's identity Secret), never for another: deleting the
                                   Site revokes it with the agent, bootstrapping again replaces it
    recorded_site_credential(site) the same for a site that runs no agent (a bench's simulated
                                   sites): a key of the launcher's, recorded in the Site as the
                                   hub records its agent's, so revoked with the Site too
    observer_credential()          DIR/nats/observer.creds, signed again once half of its day
                                   has passed (as ``kamaji-broker observer issue`` does)

A layer of ``sandbox.launcher.system.System``, on top of the clusters (``mgmt``, and each
site's, where the agent keeps its key).
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

from agent.credential import state
from common.files import atomic, natsserver, operator
from common.kube import resources
from hub.api import site as site_api
from hub.controllers.site import credentials as sitecredentials
from protocol import credentials, errors, natsjwt
from sandbox import processes
from sandbox.launcher.installs import Installs

__all__ = ["CREDENTIAL_LIFETIME", "Identities"]

CREDENTIAL_LIFETIME = dt.timedelta(hours=1)
"""The launcher's users: longer than any test or look at the bus that asks for one, short
enough that a copy taken from the sandbox's directory is soon worthless."""


def _fresh(path: Path, *, now: float) -> bool:
    """Whether the ``.creds`` at ``path`` has more than half of its lifetime left."""
    try:
        claims = natsjwt.decode(natsjwt.jwt_of_creds(path.read_text()), now=0)
    except (OSError, errors.JWTError):
        return False
    return bool(claims.exp) and now < (claims.iat + claims.exp) / 2


class Identities(Installs):
    def _keys(self) -> operator.Keys:
        return operator.Keys.load_or_create(self.nats_dir)

    def hub_credential(self) -> Path:
        """A user with the hub's permissions (read every stream, the JetStream API): the path of
        its ``.creds``, with at least half an hour left."""
        path = self.hub_credential_file
        if not _fresh(path, now=time.time()):
            keys, seed = self._keys(), natsjwt.new_seed("user")
            claims = credentials.hub_user(
                natsjwt.public_of(seed),
                account=keys.account_public,
                now=dt.datetime.now(dt.UTC),
                lifetime=CREDENTIAL_LIFETIME,
            )
            atomic.write_private(path, keys.user_creds(claims, seed))
        return path

    def observer_credential(self) -> Path:
        """``kamaji-broker status``'s read-only user, signed again when half of its lifetime is
        gone: a sandbox may run for days (a connection presents the file again when the
        server drops the old one at its expiry)."""
        path = self.observer_credential_file
        if not _fresh(path, now=time.time()):
            natsserver.observer_issue(self.nats_dir)
        return path

    async def site_credential(self, site: str) -> Path:
        """A credential of ``site``'s for tests that act as the site: its agent's key (the one
        its Site records) with a JWT of the launcher's, valid ``CREDENTIAL_LIFETIME``.
        ``LaunchError`` when the Site records no key, or one the agent does not hold (deleted,
        or not bootstrapped yet): nothing is signed for a key the hub may have revoked."""
        recorded = sitecredentials.record(await self.mgmt.get_or_none(resources.SITE, site))
        namespace, _, name = self.agent_identity_secret(site).partition("/")
        secret = await self.site_kube(site).get_or_none(resources.SECRET, name, namespace=namespace)
        seed = state.read(secret).seed
        if not recorded.exists or not recorded.key or seed is None or natsjwt.public_of(seed) != recorded.key:
            raise processes.LaunchError(
                f"site {site}: its Site records no key its agent holds (Site deleted, or the agent has "
                "not bootstrapped): no credential of the site's is signed"
            )
        return self._write_site(site, seed, lifetime=CREDENTIAL_LIFETIME)

    async def recorded_site_credential(
        self, site: str, *, lifetime: dt.timedelta = CREDENTIAL_LIFETIME
    ) -> Path:
        """A credential of ``site``'s for a site without an agent: a new key, recorded in the
        Site's ``status.credential`` first (as the hub records its agent's: what deleting the
        Site revokes), with a JWT valid ``lifetime``."""
        seed = natsjwt.new_seed("user")
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        record = site_api.SiteCredential(
            public_key=natsjwt.public_of(seed), issued_at=now, expires_at=now + lifetime
        )
        await self.mgmt.patch(
            resources.SITE, site, {"status": {"credential": record.to_dict()}}, subresource="status"
        )
        return self._write_site(site, seed, lifetime=lifetime, now=now)

    def _write_site(
        self, site: str, seed: bytes, *, lifetime: dt.timedelta, now: dt.datetime | None = None
    ) -> Path:
        keys = self._keys()
        claims = credentials.site_user(
            site,
            natsjwt.public_of(seed),
            account=keys.account_public,
            now=now or dt.datetime.now(dt.UTC),
            lifetime=lifetime,
        )
        path = self.site_credential_file(site)
        path.parent.mkdir(exist_ok=True)
        atomic.write_private(path, keys.user_creds(claims, seed))
        return path
