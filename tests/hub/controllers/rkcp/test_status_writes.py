"""hub.controllers.rkcp.status_writes: one status patch per change, none when the object already
shows it, and none lost when the cached object lags behind the writer's own last patch."""

from __future__ import annotations

from typing import Any

from hub.api import rkcp as api
from hub.controllers.rkcp.status_writes import StatusWrites
from tests.hub.conftest import RKCP, World, create_pair

KEY = ("default", "cp1")


def with_version(obj: dict[str, Any], version: str) -> tuple[api.RemoteKamajiControlPlane, api.Status]:
    """The object as parsed, and a status that differs from its own by ``version`` alone."""
    r = api.RemoteKamajiControlPlane.parse(obj)
    return r, r.status.model_copy(update={"version": version})


async def version(w: World) -> str:
    return str((await w.mgmt.get(RKCP, "cp1", namespace="default"))["metadata"]["resourceVersion"])


async def test_a_status_the_object_shows_is_not_written(world: World) -> None:
    _, obj = await create_pair(world)
    writes = StatusWrites(world.hub_kube, interval=0.0)
    r = api.RemoteKamajiControlPlane.parse(obj)
    before = await version(world)
    assert await writes.write(KEY, r, r.status, 30.0) == 30.0
    assert await version(world) == before


async def test_going_back_to_what_a_stale_cache_shows_is_written(world: World) -> None:
    """Written A over the cached O; the next decision wants O again while the cache still shows
    O (the watch event of A not in yet): O is written, not skipped as already there."""
    await create_pair(world)
    stale = await world.mgmt.patch(
        RKCP, "cp1", {"status": {"version": "v1.30.0"}}, namespace="default", subresource="status"
    )
    writes = StatusWrites(world.hub_kube, interval=0.0)
    r, a = with_version(stale, "v1.31.0")
    await writes.write(KEY, r, a, None)
    assert (await world.mgmt.get(RKCP, "cp1", namespace="default"))["status"]["version"] == "v1.31.0"
    await writes.write(KEY, r, r.status, None)  # r: the stale object, which shows O
    now = await world.mgmt.get(RKCP, "cp1", namespace="default")
    assert now["status"]["version"] == "v1.30.0"
    # Once the object shows what was last written, nothing more is written.
    fresh = api.RemoteKamajiControlPlane.parse(now)
    before = await version(world)
    await writes.write(KEY, fresh, fresh.status, None)
    assert await version(world) == before


async def test_a_new_control_planes_first_status_waits_for_the_sites_answer_unless_ready(
    world: World,
) -> None:
    """Asked, then Ready within the interval: one write (Ready), not two."""
    _, obj = await create_pair(world)
    r = api.RemoteKamajiControlPlane.parse(obj)
    assert r.status.observed_generation is None and not r.status.conditions
    writes = StatusWrites(world.hub_kube, interval=60.0)
    asked = r.status.model_copy(update={"observed_generation": 1, "version": "v1.31.0"})
    before = await version(world)
    wait = await writes.write(KEY, r, asked, None)
    assert wait is not None and 0 < wait <= 60.0
    assert await version(world) == before
    ready = asked.model_copy(update={"ready": True, "initialized": True})
    assert await writes.write(KEY, r, ready, None) is None
    stored = (await world.mgmt.get(RKCP, "cp1", namespace="default"))["status"]
    assert (stored["ready"], stored["observedGeneration"]) == (True, 1)
