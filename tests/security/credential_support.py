"""A world for the credential service's attack cases: a nats-server in operator mode, the
management cluster's emulator with the Site CRD, and ``hub.credentials.service`` running on the
hub's own connection (minted the way the hub mints it) with its system-account connection.

An asker is a raw nats-py client (``ns.Raw``) with a bootstrap credential or a site's; it
sends the request an agent would, or a hostile variant of it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import msgspec

from common import bus
from common import kube as ckube
from common.files import operator
from common.kube import errors as kerrors
from common.kube import resources
from hub import metrics as hub_metrics
from hub.api import site as site_api
from hub.api.crds import SITE_FILENAME
from hub.controllers.site import credentials as sitecredentials
from hub.credentials import revocation, rules
from hub.credentials import service as credentialservice
from protocol import credentials, natsjwt, permissions
from sandbox import kubeapi, natsd
from tests import conftest, helpers
from tests.security import nats_support as ns

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"


@dataclass
class World:
    server: natsd.NatsServer
    conf: Path
    keys: operator.Keys
    kube: ckube.Kube
    metrics: hub_metrics.Metrics
    work: Path
    sites: sitecredentials.SiteCredentials
    """The hub's Site controller for credentials: the finalizer, and what a deletion revokes."""
    after_record: Callable[[str], Awaitable[None]] | None = None

    async def add_site(self, site: str, *, bootstrap: Path | None = None) -> None:
        """Create the Site (naming ``bootstrap`` as the one it was made with, as ``site add``
        writes its manifest), and let the hub hold its finalizer."""
        token = helpers.creds_jwt(bootstrap) if bootstrap is not None else ""
        await self.kube.create(resources.SITE, site_api.manifest(site, bootstrap_jwt=token))
        await self.sites.sync(await self.kube.get(resources.SITE, site))

    async def delete_site(self, site: str) -> None:
        """``kubectl delete site``, and the hub's handling of it: revoked, then released."""
        await self.kube.delete(resources.SITE, site)
        await self.sites.sync(await self.kube.get(resources.SITE, site))
        assert await self.kube.get_or_none(resources.SITE, site) is None

    async def record(self, site: str) -> rules.SiteRecord:
        """What the hub's Site cache would say (read from the API here); then ``after_record``,
        if set (a test's way to change the world between the hub's look and its write)."""
        try:
            obj = await self.kube.get(resources.SITE, site)
        except kerrors.NotFound:
            obj = None
        if obj is not None and self.after_record is not None:
            await self.after_record(site)
        return sitecredentials.record(obj)

    def bootstrap_creds(self, site: str, *, age: dt.timedelta = dt.timedelta(0)) -> Path:
        """A fresh bootstrap credential of ``site`` (made ``age`` ago)."""
        path = self.work / f"{site}-{len(list(self.work.glob('*.creds')))}.creds"
        path.write_text(
            self.keys.bootstrap_creds(
                site,
                now=dt.datetime.now(dt.UTC) - age,
                lifetime=credentials.DEFAULT_BOOTSTRAP_LIFETIME,
                prefix="kb",
            )
        )
        return path

    async def asker(self, creds: Path, site: str) -> ns.Raw:
        """Connected with ``creds``, with the inbox its kind may read (a bootstrap credential's
        own, or the site's), as the agent connects."""
        bootstrap = natsjwt.decode(helpers.creds_jwt(creds), now=0).name.startswith("bootstrap:")
        inbox = permissions.bootstrap_inbox_prefix(site) if bootstrap else bus.site_inbox_prefix(site)
        return await ns.connect(self.server, creds, inbox_prefix=inbox)

    def counted(self, kind: str, result: str) -> float:
        return float(self.metrics.credential_requests.labels(kind, result)._value.get())


async def ask(
    asker: ns.Raw,
    kind: credentials.Kind,
    site: str,
    seed: bytes,
    *,
    credential: str,
    subject_site: str | None = None,
) -> credentials.Reply:
    """Send the request an agent of ``site`` would (on ``subject_site``'s subject if given)."""
    req = credentials.request(kind, site, seed, credential=credential)
    subject = f"kb.{kind.value}.{subject_site or site}"
    msg = await asker.ask(subject, msgspec.json.encode(req))
    return msgspec.json.decode(msg.data, type=credentials.Reply)


@asynccontextmanager
async def world(tmp_path: Path, *, bootstrap_grace: float = 0) -> AsyncIterator[World]:
    """``bootstrap_grace`` 0: a used bootstrap is revoked at once (its own test sets one)."""
    server, conf = conftest.operator_mode_server(tmp_path / "nats")
    server.start()
    cluster = kubeapi.Server(name="mgmt")
    await cluster.start(port=0)
    cluster.apply_crd_files([CRDS / SITE_FILENAME])
    kube = await ckube.connect(in_cluster=False, kubeconfig=cluster.write_kubeconfig(tmp_path / "kubeconfig"))
    keys = operator.Keys.load_or_create(conf)
    hub = await bus.connect(helpers.options(server.url, seed_file=conf / "hub.creds"), deadline=10)
    system = await bus.connect(
        helpers.options(server.url, seed_file=conf / operator.HUB_SYSTEM_CREDS), deadline=10
    )
    (tmp_path / "askers").mkdir()
    authority = revocation.Authority(
        account=keys.account_public,
        account_signing=keys.account_signing,
        operator_signing=keys.operator_signing,
    )
    revoker = revocation.Revoker(system, authority)

    async def revoke(revoked: Mapping[str, int]) -> None:
        await revoker.revoke(revoked, now=dt.datetime.now(dt.UTC))

    w = World(
        server=server,
        conf=conf,
        keys=keys,
        kube=kube,
        metrics=hub_metrics.Metrics(),
        work=tmp_path / "askers",
        sites=sitecredentials.SiteCredentials(kube, revoke, issuer=revocation.issuer(authority)),
    )
    service = credentialservice.CredentialService(
        credentialservice.Deps(conn=hub, revoker=revoker, kube=kube, sites=w.record, metrics=w.metrics),
        bootstrap_grace=bootstrap_grace,
    )
    task = asyncio.create_task(service.run())
    try:
        await helpers.eventually(lambda: _serving(w), what="credential service subscribed")
        yield w
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        for c in (hub, system):
            await c.close()
        await kube.close()
        await cluster.stop()
        server.stop()


async def _serving(w: World) -> bool:
    """The service has subscribed: a request without a Site gets a refusal (not no responders)."""
    creds = w.bootstrap_creds("probe")
    probe = await w.asker(creds, "probe")
    try:
        reply = await ask(
            probe,
            credentials.Kind.BOOTSTRAP,
            "probe",
            natsjwt.new_seed("user"),
            credential=helpers.creds_jwt(creds),
        )
    except Exception:
        return False
    finally:
        await probe.close()
    return "no Site 'probe'" in reply.error
