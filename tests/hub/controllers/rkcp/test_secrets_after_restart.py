"""A restarted hub whose first look at a control plane comes after a fresh status.

The previous hub process acknowledged the sealed secrets on the site's stream (so its durable
consumer never delivers them again) and may or may not have written the CAPI Secrets before it
stopped. The site then reports (a status arrives while, or before, the new hub starts) and only
afterwards does the new hub reconcile the RKCP. Whatever the CAPI Secrets are at that moment —
current, missing (acknowledged, never written: a crash between the two), or stale — the RKCP
must end SecretsSynced=True and Ready=True with ``<cluster>-kubeconfig`` equal to the site's.

The restarted hub runs with no workers, so the test decides when the first reconcile happens
(``Reconciler.sync``, what a worker calls): after it knows the RKCP and has recorded the status.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from common import bus
from common.kube import resources
from hub.controllers.rkcp import writing
from protocol import streams, subjects
from protocol.coordinates import Coordinates
from tests import helpers
from tests.hub.conftest import SITE, World, condition, create_pair, until_ready

CP1 = Coordinates(SITE, "tenants", "cp1")
KEY = ("default", "cp1")
NAMES = ("cp1-cluster-kubeconfig", "cp1-cluster-ca")


async def kept(w: World) -> None:
    """The previous process wrote the CAPI Secrets before it stopped."""


async def missing(w: World) -> None:
    """It acknowledged the sealed box and stopped before writing (SIGKILL between the two)."""
    for name in NAMES:
        await w.mgmt.delete(resources.SECRET, name, namespace="default")


async def stale(w: World) -> None:
    """Someone (or an older payload) left other content under another checksum."""
    for name in NAMES:
        await w.mgmt.patch(
            resources.SECRET,
            name,
            {
                "metadata": {"annotations": {writing.CHECKSUM_ANNOTATION: "0" * 64}},
                "stringData": {"value": "stale", "tls.crt": "stale", "tls.key": "stale"},
            },
            namespace="default",
        )


async def resend_status(w: World) -> int:
    """The site reports again (what its agent does on any change): a new message on the status
    subject, after everything the previous hub process acknowledged. Its sequence."""
    stream = streams.site_stream_name(SITE, prefix=w.prefix)
    subject = subjects.status(*CP1, prefix=w.prefix)
    stored = await bus.last_message(w.conn, stream, subject)
    assert stored is not None
    return (await bus.publish(w.conn, subject, stored.data, msg_id=f"resent-{stored.seq}")).seq


@pytest.mark.parametrize("capi_secrets", [kept, missing, stale], ids=["kept", "missing", "stale"])
async def test_a_status_before_the_first_reconcile_after_a_restart_leaves_secrets_synced(
    world: World, capi_secrets: Callable[[World], Awaitable[None]]
) -> None:
    world.start_hub()
    world.start_agent()
    await create_pair(world)
    await until_ready(world)
    site_kc = await world.site.get(resources.SECRET, "cp1-admin-kubeconfig", namespace="tenants")
    await world.stop("hub")
    await capi_secrets(world)

    controller = world.start_hub(workers=0)
    await helpers.eventually(lambda: controller.maps(CP1), within=15)
    seq = await resend_status(world)

    async def status_recorded_first() -> bool:
        held = controller.observations.get(CP1)
        return held is not None and held.status_seq >= seq

    await helpers.eventually(status_recorded_first, within=15)

    seen: list[Any] = []

    async def synced() -> bool:
        await controller.reconciler.sync(KEY)  # what a worker does; the first call is the first reconcile
        obj = await world.rkcp()
        kc = await world.mgmt.get_or_none(resources.SECRET, "cp1-cluster-kubeconfig", namespace="default")
        same = kc is not None and kc["data"]["value"] == site_kc["data"]["admin.conf"]
        seen[:] = [condition(obj, "SecretsSynced"), condition(obj, "Ready"), f"kubeconfig written: {same}"]
        return seen[0] == ("True", "Synced") and seen[1][0] == "True" and same

    try:
        await helpers.eventually(synced, within=15, every=0.2)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: SecretsSynced, Ready, kubeconfig: {seen}") from None
    # The box the load read is kept for its write and no longer: written (missing, stale), or
    # already carried by the Secrets (kept), the hub keeps none of it.
    assert (len(controller.observations.boxes), controller.observations.boxes.bytes) == (0, 0)
