"""A new term (a restart, a failover, a share handed over) judges a site from its heartbeat
before it writes what it thinks of the site: no RKCP flaps to ``SiteConnected=Unknown``."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from common.kube import watching
from tests import helpers
from tests.hub.conftest import RKCP, SITE, World, condition, create_pair, until_ready


async def test_a_new_term_writes_no_unknown_site_connection(world: World) -> None:
    world.start_hub(static_sites=frozenset())
    world.start_agent()
    await create_pair(world)
    ready = await until_ready(world)
    assert condition(ready, "SiteConnected")[0] == "True"
    await world.stop("hub")

    seen: list[tuple[str, str]] = []
    latest = {"rv": ready["metadata"]["resourceVersion"]}

    async def record() -> None:
        events = watching.stream(world.mgmt, RKCP, namespace="default", resource_version=latest["rv"])
        async with contextlib.aclosing(events) as items:
            async for item in items:
                if isinstance(item, watching.Synced):
                    continue
                obj: dict[str, Any] = item.object
                seen.append(condition(obj, "SiteConnected"))
                latest["rv"] = obj["metadata"]["resourceVersion"]

    watcher = asyncio.create_task(record())
    try:
        world.hub_metrics = type(world.hub_metrics)()
        controller = world.start_hub(static_sites=frozenset())
        sample = world.hub_metrics.registry.get_sample_value
        queue = controller.queue

        async def judged() -> bool:
            loop_now = asyncio.get_running_loop().time()
            idle = not queue._active and all(due > loop_now + 2 for due in queue._due.values())
            heard = sample("kb_hub_site_connected", {"site": SITE}) == 1.0
            looked = sample("kb_hub_control_planes", {"site": SITE, "phase": "Ready"}) == 1.0
            current = await world.rkcp()
            caught_up = current is not None and current["metadata"]["resourceVersion"] == latest["rv"]
            return idle and heard and looked and caught_up

        # The new term looked at cp1 and heard its site, nothing is left to do soon, and the watch
        # has every write it made.
        await helpers.eventually(judged, within=30, what="the new term done with cp1")
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    assert all(status == "True" for status, _ in seen), seen
