"""The safety net: every RKCP is reconciled at least once per resync interval, by one timer for
them all; at rest the work queue holds nothing for any RKCP."""

from __future__ import annotations

from typing import Any

from hub.ingest import liveness
from tests import helpers
from tests.hub.conftest import RKCP, SITE, World, condition, create_pair, until_ready


async def test_at_rest_the_work_queue_holds_nothing(world: World) -> None:
    controller = world.start_hub()
    world.start_agent()
    await create_pair(world)
    await until_ready(world)
    queue = controller.queue

    def idle() -> bool:
        return len(queue) == 0 and not queue._active and not queue._heap

    # A timer per RKCP (the resync's, ten hours out) would stay in the queue for good.
    await helpers.eventually(idle, within=20, what="an empty work queue")


async def test_a_status_edited_behind_the_hubs_back_is_written_again_at_the_resync(world: World) -> None:
    """A status edit changes nothing a reconcile decides from: no watch event enqueues the
    RKCP, the resync does."""
    world.start_hub(resync=0.5)
    world.start_agent()
    await create_pair(world)
    ready = await until_ready(world)
    assert condition(ready, "Ready")[0] == "True"
    conditions = [c for c in ready["status"]["conditions"] if c["type"] != "Ready"]
    await world.mgmt.patch(RKCP, "cp1", {"status": {"conditions": conditions}}, namespace="default",
                           subresource="status")  # fmt: skip

    def restored(obj: dict[str, Any] | None) -> bool:
        return condition(obj, "Ready")[0] == "True"

    await helpers.eventually(lambda: world.rkcp(), restored, within=20, what="the Ready condition again")


async def test_news_of_a_sites_backlog_looks_at_the_site_not_at_its_rkcps(world: World) -> None:
    """Only the Site's status shows whether a backlog exists; connectedness every RKCP decides on."""
    controller = world.start_hub()
    world.start_agent()
    await create_pair(world)
    await until_ready(world)
    queue, sites = controller.queue, controller.site_sync.queue
    await helpers.eventually(lambda: len(queue) == 0 and not queue._active, within=20, what="an idle queue")
    # No await between a change and what it queued: no worker takes a key meanwhile.
    controller.on_site_change(SITE, liveness.Change.SITE)
    assert (SITE in sites._due or SITE in sites._held) and len(queue) == 0
    controller.on_site_change(SITE, liveness.Change.CONTROL_PLANES)
    assert ("default", "cp1") in queue._due
