"""Tenants of the management cluster attacking each other through RKCPs.

The real hub controller, ingest and site poller on a management cluster; the real agent loops
at a site with the Kamaji simulator; a real nats-server between them. Every case runs on both
backends: emulated clusters, and real ones where the hub, the agent and each tenant act as
ServiceAccounts bound by their RBAC (the hub's and the agent's as we ship it, a tenant's Role in
its own namespace only). Each case asserts the exact refusal (condition and reason, counter),
that nothing of the victim changed (Secrets, TCP, stream sequences) and that every loop is
still alive; on real clusters also that the API server refuses the attacker every direct
attempt at the victim's objects, so that the broker is the only way left, and it leaks nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from common import bus
from common.kube import resources
from protocol import messages, subjects
from tests import helpers
from tests.hub.clusters import RealPair
from tests.hub.conftest import RKCP, SITE, World, open_world
from tests.security import tenant_users as users
from tests.security import tenants_support as t

TCP = resources.TENANT_CONTROL_PLANE


@pytest.fixture
async def world(
    real_backend: RealPair | None, conn: bus.Connection, prefix: str, tmp_path: Path
) -> AsyncIterator[World]:
    # The Site of site-a grants default -> tenants (GRANT); cases widen it when they need to.
    async with open_world(conn, prefix, tmp_path, real=real_backend) as w:
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
    await users.assert_confined(world, namespace)
    assert await t.snapshot(world) == before
    assert await t.no_capi_secrets(world, namespace, name)
    if site != SITE:  # a site name a tenant invents gets no consumer either
        assert not await t.has_consumer(world, site)
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
    await users.assert_confined(world, "evil")
    after = await t.snapshot(world)
    if how == "certificate rotation":  # the victim, and only the victim, got its new CA
        ca = (await t.capi_secrets(world, t.VICTIM_NS, t.VICTIM))["ca"]
        assert ca is not None and ca["data"]["tls.crt"] == t.ROTATED_CA
        after = dataclasses.replace(after, victim_secrets=before.victim_secrets)
    assert after == before
    assert t.alive(world)


# -- sealed secrets naming another owner --------------------------------------------------------

FORGED_OWNERS = ["the attacker's RKCP", "no owner", "an unrelated RKCP"]


@pytest.mark.parametrize("owner", FORGED_OWNERS)
async def test_sealed_secrets_naming_another_owner_are_written_for_no_one(world: World, owner: str) -> None:
    await t.victim_ready(world)
    await t.share_target_namespace(world)
    grab = await t.create_pair(world, "grab", namespace="evil", tenantControlPlaneName=t.VICTIM)
    other = await t.create_pair(world, "other", namespace=t.VICTIM_NS)
    await t.until_condition(world, "grab", namespace="evil", type_="Ready", status="False", reason="Conflict")
    await t.until_ready(world, "other")
    uid = {"the attacker's RKCP": grab, "no owner": None, "an unrelated RKCP": other}[owner]
    before = await t.snapshot(world)
    others = t.data_of(await t.capi_secrets(world, t.VICTIM_NS, "other"))
    refusals = t.refused(world, "OwnerMismatch")
    # Genuinely sealed to the hub's key, on the victim's subject, with the attacker's content.
    payload = messages.SecretsPayload(kubeconfig="attacker's kubeconfig", ca_crt="attacker CA", ca_key="key")
    await t.publish_sealed(
        world, t.seal_for_hub(world, payload, name=t.VICTIM, owner_uid=uid["metadata"]["uid"] if uid else "")
    )

    async def judged() -> bool:
        victim = await world.mgmt.get(RKCP, t.VICTIM, namespace=t.VICTIM_NS)
        return (
            t.refused(world, "OwnerMismatch") > refusals
            and t.condition(victim, "SecretsSynced")[1] == "OwnerMismatch"
        )

    await helpers.eventually(judged, within=20)
    await users.assert_confined(world, "evil")
    assert await t.snapshot(world) == before  # the victim keeps its own Secrets
    assert await t.secrets_in(world, "evil") == []
    assert t.data_of(await t.capi_secrets(world, t.VICTIM_NS, "other")) == others
    assert t.alive(world)


# -- paused ----------------------------------------------------------------------------------


async def test_a_paused_control_plane_gets_no_secrets_until_it_resumes(world: World) -> None:
    await t.victim_ready(world)
    victim = await world.tenant(t.VICTIM_NS)
    await victim.patch(resources.CLUSTER, t.VICTIM, {"spec": {"paused": True}}, namespace=t.VICTIM_NS)
    await t.until_condition(
        world, t.VICTIM, namespace=t.VICTIM_NS, type_="Paused", status="True", reason="Paused"
    )
    before = await t.snapshot(world)
    refusals = t.refused(world, "Paused")
    await t.rotate_ca(world, wait=False)

    async def withheld() -> bool:
        return t.refused(world, "Paused") > refusals

    await helpers.eventually(withheld, within=20)
    assert await t.snapshot(world) == before
    await victim.patch(resources.CLUSTER, t.VICTIM, {"spec": {"paused": False}}, namespace=t.VICTIM_NS)
    await t.rotate_ca(world, wait=True)  # written once the Cluster resumes
    assert t.alive(world)


async def test_a_paused_attacker_gets_nothing_either(world: World) -> None:
    await t.victim_ready(world)
    await t.share_target_namespace(world)
    grab = await t.create_pair(world, "grab", namespace="evil", tenantControlPlaneName=t.VICTIM)
    attacker = await world.tenant("evil")
    await attacker.patch(resources.CLUSTER, "grab", {"spec": {"paused": True}}, namespace="evil")
    await t.until_condition(world, "grab", namespace="evil", type_="Paused", status="True", reason="Paused")
    before = await t.snapshot(world)
    refusals = t.refused(world, "OwnerMismatch")
    await t.redeliver_sealed(world)
    obj = await t.until_refused_or_leaked(world, "grab", namespace="evil", refusals=refusals)
    assert await t.secrets_in(world, "evil") == [] and grab["metadata"]["uid"] == obj["metadata"]["uid"]
    await users.assert_confined(world, "evil")
    assert await t.snapshot(world) == before
    assert t.alive(world)


# -- changing the placement after creation ------------------------------------------------------

ONTO_VICTIM = {"targetNamespace": t.TARGET_NS, "tenantControlPlaneName": t.VICTIM}
MOVES = [
    ("onto the victim's TCP, not granted", False, ONTO_VICTIM, "NotAuthorized"),
    ("to a site without a Site object", False, {"site": "site-b"}, "NotAuthorized"),
    ("onto the victim's TCP in a shared namespace", True, {"tenantControlPlaneName": t.VICTIM}, "Conflict"),
]  # fmt: skip


@pytest.mark.parametrize(("shared", "move", "reason"), [m[1:] for m in MOVES], ids=[m[0] for m in MOVES])
async def test_moving_an_rkcp_after_creation_is_authorized_again(
    world: World, shared: bool, move: dict[str, Any], reason: str
) -> None:
    await t.victim_ready(world)
    if shared:
        await t.share_target_namespace(world)
    # First an honest placement: its own namespace (same-namespace rule) or the shared one.
    target = t.TARGET_NS if shared else "evil"
    await t.create_pair(world, "mover", namespace="evil", targetNamespace=target)

    async def published() -> bool:
        return await t.last_seq(world, subjects.Kind.INTENT, "mover", namespace=target) > 0

    await helpers.eventually(published, within=20)
    if shared:  # its TCP comes up at the site first: the snapshot must not catch it moving
        await t.until_ready(world, "mover", namespace="evil")
    before = await t.snapshot(world)
    own = t.data_of(await t.capi_secrets(world, "evil", "mover"))  # its own, from the honest placement
    refusals = t.refused(world, "OwnerMismatch")
    await users.move(world, "mover", move)
    obj = await t.until_condition(
        world, "mover", namespace="evil", type_="Ready", status="False", reason=reason
    )
    if reason == "Conflict":
        await t.redeliver_sealed(world)
        obj = await t.until_refused_or_leaked(world, "mover", namespace="evil", refusals=refusals)
        assert t.condition(obj, "SecretsSynced")[:2] == ("False", "OwnerMismatch")
    assert t.data_of(await t.capi_secrets(world, "evil", "mover")) == own  # never the victim's
    await users.assert_confined(world, "evil")
    assert await t.snapshot(world) == before  # no intent for the new coordinates, the victim untouched
    assert t.alive(world)


# -- kubectl as the tenant ---------------------------------------------------------------------

KUBECTL_CASES = [
    ("namespace not granted", {"tenantControlPlaneName": "mine"}),
    ("site without a Site object", {"site": "site-b", "targetNamespace": "evil"}),
    ("the victim's TCP", {"tenantControlPlaneName": t.VICTIM}),
]


@pytest.mark.parametrize("spec", [c[1] for c in KUBECTL_CASES], ids=[c[0] for c in KUBECTL_CASES])
async def test_kubectl_as_a_tenant_cannot_place_outside_its_grant(
    world: World, tmp_path: Path, spec: dict[str, Any]
) -> None:
    await t.victim_ready(world)
    before = await t.snapshot(world)
    kubectl = users.Kubectl(await world.clusters.tenant("evil"), tmp_path / "kube-cache")
    await kubectl.create_pair("grab", namespace="evil", **spec)

    async def refused() -> bool:
        return (await kubectl.ready_condition("grab", namespace="evil"))[:2] == ("False", "NotAuthorized")

    await helpers.eventually(refused, within=20)
    message = (await kubectl.ready_condition("grab", namespace="evil"))[2]
    assert "namespace evil" in message and spec.get("site", SITE) in message
    await users.assert_confined(world, "evil")
    assert await t.snapshot(world) == before
    assert await kubectl.run("get", "secrets", "-n", "evil", "-o", "name") == ""
    assert t.alive(world)


# -- the same-namespace rule's sharp edge -------------------------------------------------------


@pytest.mark.parametrize("how", ["republish", "hub restart"])
async def test_a_namespace_named_like_the_victims_target_is_placed_but_gets_no_secrets(
    world: World, how: str
) -> None:
    # Whoever holds management namespace "tenants" may target site namespace "tenants" by the
    # default rule (docs/security.md: set sameNamespace false when the two name spaces have different
    # owners). The conflict rule and the owner check still keep the victim's secrets its own.
    await t.victim_ready(world)
    await t.create_pair(world, "grab", namespace=t.TARGET_NS, tenantControlPlaneName=t.VICTIM)
    await t.until_condition(
        world, "grab", namespace=t.TARGET_NS, type_="Ready", status="False", reason="Conflict"
    )
    before = await t.snapshot(world)
    refusals = t.refused(world, "OwnerMismatch")
    await _redeliver(world, how)
    grab = await t.until_refused_or_leaked(world, "grab", namespace=t.TARGET_NS, refusals=refusals)
    assert await t.secrets_in(world, t.TARGET_NS) == []
    assert t.condition(grab, "SecretsSynced")[:2] == ("False", "OwnerMismatch")
    await users.assert_confined(world, t.TARGET_NS)
    assert await t.snapshot(world) == before
    assert t.alive(world)
