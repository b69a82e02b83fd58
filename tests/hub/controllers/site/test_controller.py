"""hub.controllers.site.controller on the management cluster's emulator: what a look at a Site leaves in the
controller's cache when the watch brings the Site back while the look is still writing."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

from common.kube import resources
from hub import metrics as hub_metrics
from hub.controllers import cache
from hub.controllers import deps as config
from hub.controllers.site import controller as site_controller
from hub.controllers.site import credentials
from hub.ingest import liveness, observations, record
from tests import helpers
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


async def _counting(world: World) -> tuple[site_controller.SiteSync, dict[str, int]]:
    """A sync whose site has the control planes ``placed["count"]`` says, its Site remembered."""
    placed = {"count": 0}
    sync = _sync(world)
    sync.control_planes = lambda site: placed["count"]
    sync.remember(await world.mgmt.get(resources.SITE, SITE))
    return sync, placed


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


async def test_a_burst_of_placements_at_a_site_is_one_status_write_per_interval(world: World) -> None:
    """The count of control planes moves with each one placed: written once per interval, the
    last count at the end of it."""
    sync, placed = await _counting(world)
    await sync.sync(SITE)
    first = await world.mgmt.get(resources.SITE, SITE)
    sync.remember(first)
    placed["count"] = 3
    wait = await sync.sync(SITE)
    assert wait is not None and 0 < wait <= site_controller.WRITE_INTERVAL
    again = await world.mgmt.get(resources.SITE, SITE)
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    sync._written_at[SITE] -= site_controller.WRITE_INTERVAL  # the interval has passed
    await sync.sync(SITE)
    assert (await world.mgmt.get(resources.SITE, SITE))["status"]["controlPlanes"] == 3


async def test_a_count_that_stands_still_is_written_without_waiting_for_the_interval(world: World) -> None:
    sync, placed = await _counting(world)
    await sync.sync(SITE)
    sync.remember(await world.mgmt.get(resources.SITE, SITE))
    placed["count"] = 1
    wait = await sync.sync(SITE)
    assert wait == pytest.approx(site_controller.COUNTS_QUIET, abs=0.5)
    placed["count"] = 2  # moved again: the wait starts over
    assert await sync.sync(SITE) == pytest.approx(site_controller.COUNTS_QUIET, abs=0.5)
    counts, moved = sync._moved[SITE]
    sync._moved[SITE] = (counts, moved - site_controller.COUNTS_QUIET)  # it stood still that long
    await sync.sync(SITE)
    assert (await world.mgmt.get(resources.SITE, SITE))["status"]["controlPlanes"] == 2


async def test_a_count_that_moved_reaches_the_site_by_its_requeue_alone(world: World) -> None:
    sync, placed = await _counting(world)
    running = asyncio.create_task(sync.run())

    async def written(count: int) -> bool:
        return bool(
            (await world.mgmt.get(resources.SITE, SITE)).get("status", {}).get("controlPlanes") == count
        )

    try:
        sync.add(SITE)
        await helpers.eventually(lambda: written(0), within=10)
        placed["count"] = 2
        sync.add(SITE)  # a placement: the count is written once it stood still, with no other look
        await helpers.eventually(lambda: written(2), within=10)
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


async def test_what_a_site_says_for_its_credential_follows_its_object(world: World) -> None:
    """Asked for every RKCP reconcile, so kept between changes: each change is seen at once."""
    sync = _sync(world)
    assert not sync.record(SITE).exists  # not remembered yet
    obj = await world.mgmt.get(resources.SITE, SITE)
    sync.remember(obj)
    assert sync.record(SITE).exists and sync.record(SITE).key == ""
    keyed = {**obj, "status": {"credential": {"publicKey": "UKEY"}}}
    sync.remember(keyed)
    assert sync.record(SITE).key == "UKEY"
    sync.remember({**keyed, "metadata": {**obj["metadata"], "deletionTimestamp": "2026-12-07T00:00:00Z"}})
    assert not sync.record(SITE).exists
    sync.forget(SITE)
    assert sync.record(SITE) == credentials.record(None)
