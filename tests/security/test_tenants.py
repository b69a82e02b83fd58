"""Tenants of the management cluster attacking each other through RKCPs (issue 10, finding 2).

The real hub controller, ingest and site poller on an emulated management cluster; the real
agent loops at an emulated site with the Kamaji simulator; a real nats-server between them.
Each case asserts the exact refusal (condition and reason, counter), that nothing of the
victim changed (Secrets, TCP, stream sequences) and that every loop is still alive.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from common import bus
from common.kube import resources
from tests.hub.conftest import SITE, World, open_world
from tests.security import tenants_support as t

TCP = resources.TENANT_CONTROL_PLANE


@pytest.fixture
async def world(conn: bus.Connection, prefix: str, tmp_path: Path) -> AsyncIterator[World]:
    # The Site of site-a grants default -> tenants (GRANT); cases widen it when they need to.
    async with open_world(conn, prefix, tmp_path) as w:
        yield w


# -- placement authorization -------------------------------------------------------------------

# (id, the attacker's namespace, RKCP spec overrides) against a Site that grants only
# default -> tenants (and the same-namespace rule).
UNAUTHORIZED = [
    ("namespace not granted the target", "evil", {"tenantControlPlaneName": "mine"}),
    ("grab the victim's TCP by targetNamespace and name", "evil", {"tenantControlPlaneName": t.VICTIM}),
    ("RKCP named like the victim's TCP", "evil", {}),
    ("granted namespace, target not granted", t.VICTIM_NS, {"targetNamespace": "kube-system"}),
    ("a namespace that only starts like a granted one", "default-evil", {"tenantControlPlaneName": "x1"}),
    ("site without a Site object", "evil", {"site": "site-b", "targetNamespace": "evil"}),
    ("no Site object, victim's coordinates", "evil", {"site": "site-b", "tenantControlPlaneName": t.VICTIM}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("namespace", "spec"), [c[1:] for c in UNAUTHORIZED], ids=[c[0] for c in UNAUTHORIZED]
)
async def test_an_unauthorized_placement_is_refused_and_publishes_nothing(
    world: World, namespace: str, spec: dict[str, Any]
) -> None:
    await t.victim_ready(world)
    before = await t.snapshot(world)
    name = "grab" if spec else t.VICTIM
    await t.create_pair(world, name, namespace=namespace, **spec)
    obj = await t.until_condition(
        world, name, namespace=namespace, type_="Ready", status="False", reason="NotAuthorized"
    )
    message = t.condition(obj, "Ready")[2]
    site, target = spec.get("site", SITE), spec.get("targetNamespace", t.TARGET_NS)
    assert site in message and f"namespace {namespace}" in message and f"target namespace {target}" in message
    assert await t.snapshot(world) == before
    assert set((await t.capi_secrets(world, namespace, name)).values()) == {None}
    assert t.alive(world)


# -- conflicts: secrets only for their owner, whatever redelivers them ---------------------------


async def _redeliver(w: World, how: str) -> None:
    """Make the site's sealed secrets of the victim reach the hub again."""
    if how == "republish":
        await t.redeliver_sealed(w)
    elif how == "hub restart":
        # A new leader reads the sealed secrets from the stream again (hub restart or failover).
        await w.stop("hub")
        w.start_hub()
    elif how == "agent restart and re-seal":
        await w.stop("agent")
        w.start_agent()
        await t.redeliver_sealed(w)
    elif how == "certificate rotation":
        # The site's CA changes: the agent seals and publishes new secrets, which the victim gets.
        await t.rotate_ca(w)


GRABS = [
    (form, how, spec)
    for form, spec in (
        ("by tenantControlPlaneName", {"tenantControlPlaneName": t.VICTIM}),
        ("by RKCP name", {}),
    )
    for how in ("republish", "hub restart", "agent restart and re-seal", "certificate rotation")
]


@pytest.mark.parametrize(("how", "spec"), [g[1:] for g in GRABS], ids=[f"{g[0]}, {g[1]}" for g in GRABS])
async def test_a_tenant_grabbing_anothers_tcp_conflicts_and_never_gets_its_secrets(
    world: World, how: str, spec: dict[str, Any]
) -> None:
    await t.victim_ready(world)
    name = "grab" if spec else t.VICTIM
    await t.share_target_namespace(world)
    await t.create_pair(world, name, namespace="evil", **spec)
    await t.until_condition(world, name, namespace="evil", type_="Ready", status="False", reason="Conflict")
    before = await t.snapshot(world)
    refusals = t.refused(world, "OwnerMismatch")
    await _redeliver(world, how)
    grab = await t.until_refused_or_leaked(world, name, namespace="evil", refusals=refusals)
    assert await t.secrets_in(world, "evil") == [], "the hub wrote the victim's secrets for the attacker"
    assert t.condition(grab, "SecretsSynced")[:2] == ("False", "OwnerMismatch")
    assert t.condition(grab, "Ready")[:2] == ("False", "Conflict")
    after = await t.snapshot(world)
    if how == "certificate rotation":  # the victim, and only the victim, got its new CA
        ca = (await t.capi_secrets(world, t.VICTIM_NS, t.VICTIM))["ca"]
        assert ca is not None and ca["data"]["tls.crt"] == t.ROTATED_CA
        after = dataclasses.replace(after, victim_secrets=before.victim_secrets)
    assert after == before
    assert t.alive(world)
