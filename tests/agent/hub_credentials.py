"""The hub's credential service as the agent's operator-mode tests meet it: the real
``hub.credentials.service.CredentialService`` on a real nats-server, with the hub's users of a conf
dir made by ``tests.conftest.operator_mode_server``, the Site of ``site-a`` in an emulated
cluster (the site's own emulator plays the management cluster here), and switches the tests
need: no Site (``remove_site``: every request refused by name), the hub down (``stop``), a
short credential lifetime.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

from common import bus
from common import kube as ckube
from common.files import operator
from common.kube import errors as kerrors
from common.kube import resources
from hub import metrics as hub_metrics
from hub.api import site as site_api
from hub.controllers.site import credentials as sitecredentials
from hub.credentials import revocation, rules
from hub.credentials import service as credentialservice
from protocol import credentials, subjects
from tests import helpers

SITE = "site-a"


@dataclass
class Responder:
    conn: bus.Connection
    system: bus.Connection
    kube: ckube.Kube
    keys: operator.Keys
    prefix: str = subjects.DEFAULT_PREFIX
    metrics: hub_metrics.Metrics = field(default_factory=hub_metrics.Metrics)
    service: credentialservice.CredentialService | None = None
    task: asyncio.Task[None] | None = None
    _lifetime: dt.timedelta = dt.timedelta(hours=1)

    @property
    def lifetime(self) -> dt.timedelta:
        return self._lifetime

    @lifetime.setter
    def lifetime(self, value: dt.timedelta) -> None:
        """The lifetime of the JWTs minted from now on."""
        self._lifetime = value
        if self.service is not None:
            self.service.lifetime = value

    def kinds(self) -> list[credentials.Kind]:
        """The requests granted so far, bootstraps first."""
        granted = self.metrics.credential_requests
        return [
            k for k in credentials.Kind for _ in range(int(granted.labels(k.value, "granted")._value.get()))
        ]

    async def site_key(self) -> str:
        """The key the hub recorded for the site (its Site's ``status.credential``)."""
        return (await self._record(SITE)).key

    async def add_site(self) -> None:
        with contextlib.suppress(kerrors.Conflict):
            await self.kube.create(resources.SITE, site_api.manifest(SITE))

    async def remove_site(self) -> None:
        await self.kube.delete(resources.SITE, SITE)

    async def _record(self, site: str) -> rules.SiteRecord:
        return sitecredentials.record(await self.kube.get_or_none(resources.SITE, site))

    async def start(self) -> Responder:
        authority = revocation.Authority(
            account=self.keys.account_public,
            account_signing=self.keys.account_signing,
            operator_signing=self.keys.operator_signing,
        )
        deps = credentialservice.Deps(
            conn=self.conn, revoker=revocation.Revoker(self.system, authority), kube=self.kube,
            sites=self._record, metrics=self.metrics,
        )  # fmt: skip
        self.service = credentialservice.CredentialService(deps, prefix=self.prefix, lifetime=self._lifetime)
        self.task = asyncio.create_task(self.service.run())
        await asyncio.wait_for(self.service.serving.wait(), 10)
        return self

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        self.task = self.service = None

    async def close(self) -> None:
        await self.stop()
        await self.conn.close()
        await self.system.close()


async def responder(url: str, conf: Path, kube: ckube.Kube) -> Responder:
    """A started service for ``site-a`` (its Site created), connected with ``conf``'s users."""
    conn = await bus.connect(helpers.options(url, seed_file=conf / "hub.creds"), deadline=10)
    system = await bus.connect(helpers.options(url, seed_file=conf / operator.HUB_SYSTEM_CREDS), deadline=10)
    r = Responder(conn, system, kube, operator.Keys.load_or_create(conf))
    await r.add_site()
    return await r.start()


def bootstrap_creds(
    conf: Path,
    path: Path,
    *,
    site: str = SITE,
    prefix: str = subjects.DEFAULT_PREFIX,
    age: dt.timedelta = dt.timedelta(0),
) -> Path:
    """A bootstrap .creds for ``site`` issued ``age`` ago (valid for an hour), as ``kamaji-broker
    site add`` hands it over."""
    keys = operator.Keys.load_or_create(conf)
    now = dt.datetime.now(dt.UTC) - age
    path.write_text(keys.bootstrap_creds(site, now=now, lifetime=dt.timedelta(hours=1), prefix=prefix))
    return path
