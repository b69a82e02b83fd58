"""Tenants of the management cluster attacking each other through RKCPs (issue 10, finding 2).

The real hub controller, ingest and site poller on an emulated management cluster; the real
agent loops at an emulated site with the Kamaji simulator; a real nats-server between them.
Each case asserts the exact refusal (condition and reason, counter), that nothing of the
victim changed (Secrets, TCP, stream sequences) and that every loop is still alive.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from common import bus
from common.kube import resources
from protocol import subjects
from tests.hub.conftest import World, open_world
from tests.security import tenants_support as t

TCP = resources.TENANT_CONTROL_PLANE


@pytest.fixture
async def world(conn: bus.Connection, prefix: str, tmp_path: Path) -> AsyncIterator[World]:
    # The Site grants both tenants the shared target namespace: what remains between them is
    # the conflict rule and the owner check.
    async with open_world(conn, prefix, tmp_path, placements=(t.SHARED,)) as w:
        yield w


async def test_a_conflicting_rkcp_never_gets_the_victims_secrets_even_after_redelivery(world: World) -> None:
    world.start_hub()
    world.start_agent()
    victim = await t.create_pair(world, t.VICTIM, namespace=t.VICTIM_NS)
    await t.until_ready(world)
    before = t.data_of(await t.capi_secrets(world, t.VICTIM_NS, t.VICTIM))
    tcp_before = await world.site.get(TCP, t.VICTIM, namespace=t.TARGET_NS)
    intent_seq = await t.last_seq(world, subjects.Kind.INTENT)

    await t.create_pair(world, "grab", namespace="evil", tenantControlPlaneName=t.VICTIM)
    await t.until_condition(world, "grab", namespace="evil", type_="Ready", status="False", reason="Conflict")
    # The sealed secrets come again (agent restart, rotation, failover): the hub must still
    # write them only for the RKCP whose uid the sealed message names.
    await t.redeliver_sealed(world)
    grab = await t.until_refused_or_leaked(world, "grab", namespace="evil")
    assert await t.secrets_in(world, "evil") == [], "the hub wrote the victim's secrets for evil/grab"
    assert t.condition(grab, "SecretsSynced")[:2] == ("False", "OwnerMismatch")
    # The condition says why, without the victim's identity or any secret material.
    assert victim["metadata"]["uid"] not in t.condition(grab, "SecretsSynced")[2]
    assert t.refused(world, "OwnerMismatch") >= 1
    assert t.data_of(await t.capi_secrets(world, t.VICTIM_NS, t.VICTIM)) == before
    tcp_after = await world.site.get(TCP, t.VICTIM, namespace=t.TARGET_NS)
    assert tcp_after["metadata"]["resourceVersion"] == tcp_before["metadata"]["resourceVersion"]
    assert await t.last_seq(world, subjects.Kind.INTENT) == intent_seq
    assert t.alive(world)
