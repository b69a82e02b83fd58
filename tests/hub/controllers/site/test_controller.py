"""hub.controllers.site.controller on the management cluster's emulator: what a look at a Site leaves in the
controller's cache when the watch brings the Site back while the look is still writing."""

from __future__ import annotations

from collections.abc import Mapping

from common.kube import resources
from hub import metrics as hub_metrics
from hub.controllers import cache
from hub.controllers import deps as config
from hub.controllers.site import controller as site_controller
from hub.controllers.site import credentials
from hub.ingest import liveness, observations, record
from tests.hub.conftest import SITE, World


async def _revoke(keys: Mapping[str, int]) -> None:
    """Operator mode (a Site then holds the finalizer); nothing is deleted here."""


def _sync(world: World) -> site_controller.SiteSync:
    seen, metrics = observations.Observations(), hub_metrics.Metrics()
    reader = record.Intake(
        record.Deps(conn=world.conn, observations=seen, keyring=world.keyring, metrics=metrics),
        prefix=world.prefix,
    )
    deps = config.Deps(
        kube=world.mgmt, conn=world.conn, signer=world.signer, observations=seen, intake=reader,
        sites=liveness.Sites(), metrics=metrics, revoke=_revoke,
    )  # fmt: skip
    settings = config.Settings(static_sites=frozenset({SITE}), prefix=world.prefix)
    sync: site_controller.SiteSync

    async def watch_delivers(site: str) -> None:
        # Called between the finalizer's write and the status's: the watch's event for the
        # finalizer arrives there.
        sync.remember(await world.mgmt.get(resources.SITE, site))

    sync = site_controller.SiteSync(
        settings, deps, objects=cache.ObjectCache(), control_planes=lambda site: 0,
        ensure_topology=watch_delivers,
    )  # fmt: skip
    return sync


async def test_the_finalizer_the_watch_brought_mid_look_stays_in_the_cache(world: World) -> None:
    sync = _sync(world)
    sync.remember(await world.mgmt.get(resources.SITE, SITE))
    assert await sync.sync(SITE) == sync.resync
    cached = sync.objects.get(site_controller.key(SITE))
    assert cached is not None
    assert credentials.FINALIZER in cached["metadata"]["finalizers"]
    # The next look adds nothing: had the cache gone back to the first read, it would patch the
    # finalizer again with that read's resourceVersion and fail with a Conflict.
    assert await sync.sync(SITE) == sync.resync
    live = await world.mgmt.get(resources.SITE, SITE)
    assert live["metadata"]["finalizers"] == [credentials.FINALIZER]
    assert live["status"]["controlPlanes"] == 0
