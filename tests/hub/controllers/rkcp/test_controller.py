"""The hub's controller end to end in one process: emulated management cluster, real nats-server,
the real agent loops at an emulated site with the Kamaji simulator."""

from __future__ import annotations

import base64
from typing import Any

import msgspec
import yaml

from common.kube import resources
from hub.api import cluster
from hub.api import rkcp as api
from hub.mapping import tcp as mapping
from hub.reconcile.rkcp import vocabulary
from protocol import keys, messages, streams, subjects
from tests import helpers
from tests.hub.conftest import RKCP, SITE, World, cluster_obj, condition, create_pair, rkcp_obj, until_ready

TCP = resources.TENANT_CONTROL_PLANE


async def test_rkcp_to_ready_with_exact_spec_status_and_secrets(world: World) -> None:
    world.start_hub()
    world.start_agent()
    cl, _ = await create_pair(world)
    obj = await until_ready(world)
    assert vocabulary.FINALIZER in obj["metadata"]["finalizers"]
    # The intent carries exactly the mapped spec, signed by the hub.
    [intent] = await world.intents()
    expected = mapping.tcp_spec(api.RemoteKamajiControlPlane.parse(obj), cluster.Cluster.parse(cl))
    assert intent.spec == expected and intent.owner.uid == obj["metadata"]["uid"] and intent.key_id
    tcp = await world.site.get(TCP, "cp1", namespace="tenants")
    assert tcp["spec"]["networkProfile"]["port"] == 6443 and tcp["spec"]["kubernetes"]["version"] == "v1.31.0"
    s = obj["status"]
    assert (
        s["initialized"]
        and s["initialization"]["controlPlaneInitialized"]
        and s["externalManagedControlPlane"]
    )
    assert s["version"] == "v1.31.0" and s["replicas"] == 2 and s["readyReplicas"] == 2
    for type_ in (
        "Available",
        "Ready",
        "TenantControlPlaneReady",
        "SiteConnected",
        "IntentDelivered",
        "SecretsSynced",
        "StatusFresh",
    ):
        assert condition(obj, type_)[0] == "True", type_
    assert obj["spec"]["controlPlaneEndpoint"]["port"] == 6443
    # <cluster>-kubeconfig is the site's admin kubeconfig; <cluster>-ca its CA.
    kc = await world.mgmt.get(resources.SECRET, "cp1-cluster-kubeconfig", namespace="default")
    ca = await world.mgmt.get(resources.SECRET, "cp1-cluster-ca", namespace="default")
    site_kc = await world.site.get(resources.SECRET, "cp1-admin-kubeconfig", namespace="tenants")
    site_ca = await world.site.get(resources.SECRET, "cp1-ca", namespace="tenants")
    assert kc["data"]["value"] == site_kc["data"]["admin.conf"]
    assert (ca["data"]["tls.crt"], ca["data"]["tls.key"]) == (
        site_ca["data"]["ca.crt"],
        site_ca["data"]["ca.key"],
    )
    for secret in (kc, ca):
        assert secret["type"] == "cluster.x-k8s.io/secret"
        assert secret["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"] == "cp1-cluster"
        [owner] = secret["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"], owner["controller"]) == (
            "RemoteKamajiControlPlane",
            obj["metadata"]["uid"],
            True,
        )
    assert "clusters" in yaml.safe_load(base64.b64decode(kc["data"]["value"]))
    sample = world.hub_metrics.registry.get_sample_value
    assert sample("kb_hub_first_ready_seconds_count", {"site": SITE}) == 1.0
    assert sample("kb_hub_control_planes", {"site": SITE, "phase": "Ready"}) == 1.0
    assert sample("kb_hub_secrets_not_synced", {"site": SITE}) == 0.0
    # Not an update: the first provision is timed by kb_hub_first_ready_seconds only.
    assert sample("kb_hub_update_ready_seconds_count", {"site": SITE}) is None


async def test_spec_change_publishes_exactly_one_intent_and_resync_none(world: World) -> None:
    world.start_hub()
    world.start_agent()
    await create_pair(world)
    await until_ready(world)
    first = await world.last_intent_seq()
    await world.mgmt.patch(RKCP, "cp1", {"spec": {"version": "v1.32.0"}}, namespace="default")

    async def upgraded() -> bool:
        tcp = await world.site.get_or_none(TCP, "cp1", namespace="tenants")
        obj = await world.rkcp()
        return (
            tcp is not None
            and tcp["spec"]["kubernetes"]["version"] == "v1.32.0"
            and (obj or {}).get("status", {}).get("version") == "v1.32.0"
        )

    await helpers.eventually(upgraded, within=30)

    async def timed() -> bool:
        sample = world.hub_metrics.registry.get_sample_value
        return sample("kb_hub_update_ready_seconds_count", {"site": SITE}) == 1.0

    await helpers.eventually(timed, within=30, what="the update timed once, Ready at its generation")
    second = await world.last_intent_seq()
    assert second > first
    published = world.hub_metrics.registry.get_sample_value(
        "kb_hub_intents_published_total", {"site": SITE, "op": "provision"}
    )
    assert published == 2.0
    # A restarted hub rebuilds its state and publishes nothing for unchanged objects.
    await world.stop("hub")
    world.hub_metrics = type(world.hub_metrics)()
    controller = world.start_hub()
    await helpers.eventually(lambda: bool(controller.rkcps), within=10)
    await until_ready(world)
    obj = await world.rkcp()
    assert condition(obj, "IntentDelivered") == ("True", "Acknowledged")
    assert await world.last_intent_seq() == second
    assert (
        world.hub_metrics.registry.get_sample_value(
            "kb_hub_intents_published_total", {"site": SITE, "op": "provision"}
        )
        is None
    )


async def test_labels_and_annotations_of_the_rkcp_reach_the_tcp_and_follow_it(world: World) -> None:
    """The RKCP's metadata goes in the intent and onto the TCP; a label added later
    (no generation moves) is published once, and a removed one leaves the TCP."""
    world.start_hub()
    world.start_agent()
    await create_pair(world)
    await until_ready(world)
    before = await world.last_intent_seq()
    obj = await world.rkcp()
    assert obj is not None
    generation = obj["metadata"]["generation"]
    await world.mgmt.patch(
        RKCP,
        "cp1",
        {"metadata": {"labels": {"team": "blue"}, "annotations": {"example.com/note": "n"}}},
        namespace="default",
    )

    async def tcp_has(labels: dict[str, str | None]) -> bool:
        tcp = await world.site.get(TCP, "cp1", namespace="tenants")
        have = tcp["metadata"].get("labels") or {}
        return all(have.get(k) == v for k, v in labels.items())

    await helpers.eventually(lambda: tcp_has({"team": "blue"}), within=30)
    [intent] = await world.intents()
    assert intent.labels["team"] == "blue" and intent.annotations == {"example.com/note": "n"}
    assert intent.generation == generation and await world.last_intent_seq() > before
    tcp = await world.site.get(TCP, "cp1", namespace="tenants")
    assert tcp["metadata"]["annotations"]["example.com/note"] == "n"

    await world.mgmt.patch(RKCP, "cp1", {"metadata": {"labels": {"team": None}}}, namespace="default")
    await helpers.eventually(lambda: tcp_has({"team": None}), within=30)
    tcp = await world.site.get(TCP, "cp1", namespace="tenants")
    assert tcp["metadata"]["annotations"]["example.com/note"] == "n"  # still on the RKCP


async def test_an_annotation_larger_than_an_intent_carries_waits_naming_it(world: World) -> None:
    """A 70 KiB annotation (Kubernetes allows 256 KiB) on a Ready RKCP would make every intent
    larger than the intents stream stores: the RKCP waits with a condition of its own reason
    (IntentTooLarge, not the Cluster's) naming the field and the limit, nothing is published (a
    spec change neither), and removing it lets the intent go."""
    world.start_hub()
    world.start_agent()
    await create_pair(world)
    await until_ready(world)
    before = await world.last_intent_seq()
    big = {"example.com/blob": "x" * (70 * 1024)}
    patch = {"metadata": {"annotations": big}, "spec": {"version": "v1.32.0"}}
    await world.mgmt.patch(RKCP, "cp1", patch, namespace="default")

    async def waiting_message() -> str:
        obj = await world.rkcp()
        for cond in (obj or {}).get("status", {}).get("conditions") or ():
            if (cond["type"], cond["status"], cond["reason"]) == ("Ready", "False", "IntentTooLarge"):
                return str(cond["message"])
        return ""

    message = await helpers.eventually(waiting_message, within=30)
    assert message.startswith("metadata.annotations: ") and str(messages.MAX_INTENT_BODY) in message
    assert await world.last_intent_seq() == before
    published = world.hub_metrics.registry.get_sample_value(
        "kb_hub_intents_published_total", {"site": SITE, "op": "provision"}
    )
    assert published == 1.0

    await world.mgmt.patch(
        RKCP, "cp1", {"metadata": {"annotations": {"example.com/blob": None}}}, namespace="default"
    )

    async def upgraded() -> bool:
        tcp = await world.site.get(TCP, "cp1", namespace="tenants")
        return bool(tcp["spec"]["kubernetes"]["version"] == "v1.32.0")

    await helpers.eventually(upgraded, within=30)
    assert await world.last_intent_seq() > before


async def test_delete_holds_the_finalizer_until_the_site_reports_deleted(world: World) -> None:
    world.start_hub()
    world.start_agent()
    await create_pair(world)
    await until_ready(world)
    await world.mgmt.delete(RKCP, "cp1", namespace="default")
    await helpers.eventually(lambda: _gone(world), within=30)
    assert await world.site.get_or_none(TCP, "cp1", namespace="tenants") is None
    for kind in (subjects.Kind.INTENT, subjects.Kind.STATUS, subjects.Kind.SECRET):
        from common import bus

        stored = await bus.last_message(
            world.conn,
            streams.stream_name(kind, site=SITE, prefix=world.prefix),
            subjects.control_plane(kind, SITE, "tenants", "cp1", prefix=world.prefix),
        )
        assert stored is None, kind


async def test_orphan_policy_purges_without_deleting_at_the_site(world: World) -> None:
    world.start_hub()
    world.start_agent()
    await create_pair(world, deletionPolicy="Orphan")
    await until_ready(world)
    await world.mgmt.delete(RKCP, "cp1", namespace="default")
    await helpers.eventually(lambda: _gone(world), within=30)
    assert await world.site.get_or_none(TCP, "cp1", namespace="tenants") is not None
    assert await world.last_intent_seq() == 0


async def test_site_silent_past_the_timeout_releases_the_finalizer(world: World) -> None:
    world.start_hub()
    agent_metrics = world.start_agent()
    await create_pair(world, siteUnavailableDeletionTimeout="1s")
    await until_ready(world)
    await world.stop("agent")  # the site goes dark
    del agent_metrics
    await world.mgmt.delete(RKCP, "cp1", namespace="default")
    await helpers.eventually(lambda: _gone(world), within=30)
    stored = await world.intents()
    assert [i.op for i in stored] == ["delete"]  # left for the site to apply when it returns
    assert await world.site.get_or_none(TCP, "cp1", namespace="tenants") is not None
    events = await world.mgmt.list(resources.EVENT, namespace="default")
    assert any(e["reason"] == "SiteUnavailable" and e["type"] == "Warning" for e in events.items)


async def test_two_rkcps_for_one_tcp_the_younger_conflicts(world: World) -> None:
    world.start_hub()
    world.start_agent()
    await create_pair(world, "first", tenantControlPlaneName="shared")
    await until_ready(world, "first")
    await create_pair(world, "second", tenantControlPlaneName="shared")

    async def conflicted() -> bool:
        return condition(await world.rkcp("second"), "Ready") == ("False", "Conflict")

    await helpers.eventually(conflicted, within=20)
    intents = await world.intents()
    assert [i.owner.name for i in intents] == ["first"]


async def test_no_owner_cluster_waits_and_paused_cluster_publishes_nothing(world: World) -> None:
    world.start_hub()
    await world.mgmt.create(RKCP, rkcp_obj("lonely"), namespace="default")

    async def waiting() -> bool:
        return condition(await world.rkcp("lonely"), "Ready") == ("False", "WaitingForCluster")

    await helpers.eventually(waiting, within=20)
    cl = await world.mgmt.create(resources.CLUSTER, cluster_obj("paused", paused=True), namespace="default")
    await world.mgmt.create(RKCP, rkcp_obj("held", cluster=cl), namespace="default")

    async def paused() -> bool:
        return condition(await world.rkcp("held"), "Paused") == ("True", "Paused")

    await helpers.eventually(paused, within=20)
    assert await world.intents() == []


async def test_garbage_on_the_bus_is_counted_and_the_hub_lives_on(world: World) -> None:
    from common import bus

    world.start_hub()
    await bus.publish(
        world.conn, subjects.status(SITE, "tenants", "junk", prefix=world.prefix), b"{]", msg_id="junk-1"
    )
    await bus.publish(
        world.conn,
        subjects.secret(SITE, "tenants", "junk", prefix=world.prefix),
        messages.encode(helpers.sealed(namespace="tenants", name="junk")),
        msg_id="junk-2",
    )

    def rejected(stream: str, reason: str) -> float:
        return (
            world.hub_metrics.registry.get_sample_value(
                "kb_hub_bus_rejected_total", {"stream": stream, "reason": reason}
            )
            or 0.0
        )

    # No RKCP maps to "junk": both are counted and never decoded nor opened.
    stream = streams.stream_name(subjects.Kind.STATUS, site=SITE, prefix=world.prefix)
    await helpers.eventually(lambda: rejected(stream, "Unmapped") == 2)
    assert rejected(stream, "DecodeError") == rejected(stream, "DecryptFailed") == 0
    world.start_agent()
    await create_pair(world)
    await until_ready(world)


async def _gone(w: World) -> bool:
    return await w.rkcp() is None


async def test_a_deleted_capi_secret_is_written_again(world: World) -> None:
    world.start_hub()
    world.start_agent()
    await create_pair(world)
    await until_ready(world)
    before = await world.mgmt.get(resources.SECRET, "cp1-cluster-kubeconfig", namespace="default")
    await world.mgmt.delete(resources.SECRET, "cp1-cluster-kubeconfig", namespace="default")
    # The hub keeps no plaintext: it fetches the sealed box from the stream, opens it and writes it.
    await world.mgmt.patch(RKCP, "cp1", {"metadata": {"labels": {"nudge": "1"}}}, namespace="default")

    async def rewritten() -> bool:
        found = await world.mgmt.get_or_none(resources.SECRET, "cp1-cluster-kubeconfig", namespace="default")
        return found is not None and found["data"]["value"] == before["data"]["value"]

    await helpers.eventually(rewritten, within=30)


async def test_after_a_signing_rotation_the_hub_signs_every_intent_again(world: World) -> None:
    """`keys generate --rotate-signing` and a hub roll: what is on the subjects is signed again by
    the new key (once), so retiring the old one (`keys retire`) leaves no intent agents refuse."""
    new = keys.new_signing_key()
    new_id = keys.key_id(bytes(new.verify_key))
    # Agents trust both keys between the two steps of a rotation.
    world.public = msgspec.structs.replace(
        world.public,
        signing=(*world.public.signing, keys.public_entry(bytes(new.verify_key), created_at=helpers.T0)),
    )
    world.start_hub()
    world.start_agent()
    await create_pair(world)
    await until_ready(world)
    tcp_before = await world.site.get(TCP, "cp1", namespace="tenants")
    first = await world.last_intent_seq()
    await world.stop("hub")
    world.signer = new
    world.hub_metrics = type(world.hub_metrics)()
    world.start_hub()

    async def resigned() -> bool:
        return [i.key_id for i in await world.intents()] == [new_id]

    await helpers.eventually(resigned, within=15)
    assert await world.last_intent_seq() > first
    assert (
        world.hub_metrics.registry.get_sample_value(
            "kb_hub_intents_published_total", {"site": SITE, "op": "provision"}
        )
        == 1.0
    )
    obj = await until_ready(world)
    assert condition(obj, "IntentDelivered") == ("True", "Acknowledged")
    tcp_after = await world.site.get(TCP, "cp1", namespace="tenants")
    assert (tcp_after["metadata"]["uid"], tcp_after["spec"]) == (
        tcp_before["metadata"]["uid"],
        tcp_before["spec"],
    )


async def test_the_site_status_is_the_sites_inventory(world: World) -> None:
    from protocol import keys

    world.start_hub()
    world.start_agent()
    await create_pair(world)
    await until_ready(world)
    signing_key_id = keys.key_id(bytes(world.signer.verify_key))

    async def site_status(want: dict[str, Any]) -> bool:
        obj = await world.mgmt.get(resources.SITE, SITE)
        status = obj.get("status") or {}
        conds = {c["type"]: (c["status"], c["reason"]) for c in status.get("conditions") or ()}
        return all((status.get(k) if k != "conditions" else conds) == v for k, v in want.items())

    await helpers.eventually(
        lambda: site_status(
            {
                "connected": True, "controlPlanes": 1, "agentVersion": "0.1.0", "backlog": 0,
                "trustedKeyIds": [signing_key_id],
                "conditions": {
                    "Connected": ("True", "HeartbeatReceived"), "SigningKeyTrusted": ("True", "Trusted"),
                },
            }
        ),
        within=20,
    )  # fmt: skip
    await world.stop("agent")
    await helpers.eventually(
        lambda: site_status({"connected": False, "conditions": {"Connected": ("False", "HeartbeatMissing"),
                                                                "SigningKeyTrusted": ("True", "Trusted")}}),
        within=20,
    )  # fmt: skip
    # A second RKCP at the site is counted.
    await create_pair(world, "cp2")
    await helpers.eventually(lambda: site_status({"controlPlanes": 2}), within=20)


async def test_a_placement_the_site_does_not_grant_publishes_nothing(world: World) -> None:
    world.start_hub()
    await create_pair(world, targetNamespace="elsewhere")

    async def refused() -> bool:
        return condition(await world.rkcp(), "Ready") == ("False", "NotAuthorized")

    await helpers.eventually(refused, within=20)
    assert await world.intents() == []
    # Granting it lets the same object through, without touching it.
    grant = {"namespaces": ["default"], "targetNamespaces": ["tenants", "elsewhere"]}
    await world.mgmt.patch(resources.SITE, SITE, {"spec": {"placements": [grant]}})

    async def published() -> bool:
        return [i.namespace for i in await world.intents()] == ["elsewhere"]

    await helpers.eventually(published, within=20)


def _held(root: object, needles: set[object]) -> list[str]:
    """Where, in the controller's own state, any of ``needles`` is still held (as a key, an element
    or a value), walking every object of ``hub.controllers`` reachable from ``root``.

    Not walked: the work queue (a key in it is consumed when due, then dropped) and the released
    deletions (bounded by ``released.REMEMBERED``); nor what other modules own (``hub.ingest.observations``,
    ``hub.ingest.consumer``).
    """
    found: list[str] = []
    seen: set[int] = set()

    def walk(obj: object, path: str) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, str | tuple) and obj in needles:
            found.append(path)
        elif isinstance(obj, dict):
            for k, v in obj.items():
                walk(k, f"{path}[{k!r}]")
                walk(v, f"{path}[{k!r}]")
        elif isinstance(obj, set | frozenset | list | tuple):
            for i, v in enumerate(obj):
                walk(v, f"{path}<{i}>")
        elif type(obj).__module__.startswith("hub.controllers") and type(obj).__name__ not in (
            "WorkQueue",
            "ReleasedDeletions",
        ):
            slots = getattr(type(obj), "__slots__", ())
            fields = vars(obj) if hasattr(obj, "__dict__") else {n: getattr(obj, n) for n in slots}
            for name, v in fields.items():
                walk(v, f"{path}.{name}")

    walk(root, "controller")
    return found


async def test_deleted_rkcps_leave_no_state_behind(world: World) -> None:
    """Every per-RKCP entry (index, status writes, errors, refusals, first-ready, published intents)
    goes with the RKCP: with churn at 10,000 control planes anything kept would grow for ever."""
    controller = world.start_hub()
    world.start_agent()
    needles: set[object] = set()
    for name in ("cp1", "cp2"):
        _, obj = await create_pair(world, name)
        needles |= {("default", name), obj["metadata"]["uid"], (SITE, "tenants", name)}
    lonely = await world.mgmt.create(RKCP, rkcp_obj("lonely"), namespace="default")
    needles |= {("default", "lonely"), lonely["metadata"]["uid"], (SITE, "tenants", "lonely")}
    for name in ("cp1", "cp2"):
        await until_ready(world, name)

    async def waiting() -> bool:
        return condition(await world.rkcp("lonely"), "Ready") == ("False", "WaitingForCluster")

    await helpers.eventually(waiting, within=20)
    assert _held(controller, needles)  # the walk finds what a live RKCP holds
    for name in ("cp1", "cp2", "lonely"):
        await world.mgmt.delete(RKCP, name, namespace="default")

    async def all_gone() -> bool:
        return all([await world.rkcp(name) is None for name in ("cp1", "cp2", "lonely")])

    await helpers.eventually(all_gone, within=30)
    # The DELETED events arrive after the API says gone; the leftovers are named if any stay.
    await helpers.eventually(
        lambda: _held(controller, needles), lambda held: held == [], within=10, what="no state left"
    )
