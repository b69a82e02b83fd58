"""The safety net: every RKCP is reconciled at least once per resync interval, by one timer for
them all; at rest the work queue holds nothing for any RKCP."""

from __future__ import annotations

from typing import Any

from tests import helpers
from tests.hub.conftest import RKCP, World, condition, create_pair, until_ready


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
