"""Helpers of the tenant attack cases (tests/security/test_tenants.py).

A tenant of the management cluster is someone who may create RKCPs and Clusters in a namespace
of their own (``World.tenant``: on real clusters a ServiceAccount bound to a Role there). These
helpers build the victim's and the attacker's objects as their tenants, read what the hub wrote
(as the admin, who sees everything), republish a site's last sealed secrets (the redelivery an
agent restart or a rotation causes), and tell whether the hub and agent loops are still alive.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
from typing import Any

from common import bus
from common.bus import errors as bus_errors
from common.kube import resources
from protocol import messages, sealing, streams, subjects
from tests import helpers
from tests.hub import conftest as hub_conftest
from tests.hub.conftest import RKCP, SITE, World

VICTIM_NS = "default"
VICTIM = "site-a-1"
TARGET_NS = "tenants"
SECRET_SUFFIXES = ("kubeconfig", "ca")
SHARED = {"namespaces": [VICTIM_NS, "evil"], "targetNamespaces": [TARGET_NS]}
"""A Site grant that lets the victim's and the attacker's namespaces share ``tenants``."""


def cluster_obj(name: str, *, namespace: str) -> dict[str, Any]:
    return hub_conftest.cluster_obj(name, namespace=namespace, clusterNetwork={"apiServerPort": 6443})


def rkcp_obj(name: str, *, namespace: str, cluster: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return hub_conftest.rkcp_obj(
        name, cluster=cluster, namespace=namespace, **{"site": SITE, "targetNamespace": TARGET_NS, **spec}
    )


async def create_pair(w: World, name: str, *, namespace: str, **spec: Any) -> dict[str, Any]:
    """A Cluster and its RKCP ``namespace/name``, created by the tenant of ``namespace``; the RKCP."""
    tenant = await w.tenant(namespace)
    cl = await tenant.create(resources.CLUSTER, cluster_obj(name, namespace=namespace), namespace=namespace)
    return await tenant.create(
        RKCP, rkcp_obj(name, namespace=namespace, cluster=cl, **spec), namespace=namespace
    )


def condition(obj: dict[str, Any] | None, type_: str) -> tuple[str, str, str]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond["type"] == type_:
            return cond["status"], cond["reason"], cond.get("message", "")
    return "", "", ""


async def capi_secrets(w: World, namespace: str, cluster: str) -> dict[str, dict[str, Any] | None]:
    """``<cluster>-kubeconfig`` and ``<cluster>-ca`` in ``namespace`` (None when absent)."""
    return {
        s: await w.mgmt.get_or_none(resources.SECRET, f"{cluster}-{s}", namespace=namespace)
        for s in SECRET_SUFFIXES
    }


async def no_capi_secrets(w: World, namespace: str, cluster: str) -> bool:
    """Neither ``<cluster>-kubeconfig`` nor ``<cluster>-ca`` exists in ``namespace``."""
    return all(s is None for s in (await capi_secrets(w, namespace, cluster)).values())


async def secrets_in(w: World, namespace: str) -> list[str]:
    """Names of every Secret in ``namespace``."""
    found = await w.mgmt.list(resources.SECRET, namespace=namespace)
    return sorted(s["metadata"]["name"] for s in found.items)


def data_of(secrets: dict[str, dict[str, Any] | None]) -> dict[str, Any]:
    """What must not change of the victim's Secrets: their content and resourceVersion."""
    return {
        k: None if v is None else (v.get("data"), v["metadata"]["resourceVersion"])
        for k, v in secrets.items()
    }


async def until_ready(w: World, name: str = VICTIM, namespace: str = VICTIM_NS) -> dict[str, Any]:
    found: list[dict[str, Any]] = []

    async def check() -> bool:
        obj = await w.mgmt.get_or_none(RKCP, name, namespace=namespace)
        found[:] = [obj] if obj else []
        return (
            obj is not None
            and (obj.get("status") or {}).get("ready") is True
            and condition(obj, "SecretsSynced")[0] == "True"
        )

    await helpers.eventually(check, within=30)
    return found[0]


async def until_condition(
    w: World, name: str, *, namespace: str, type_: str, status: str, reason: str
) -> dict[str, Any]:
    found: list[dict[str, Any]] = []

    async def check() -> bool:
        obj = await w.mgmt.get_or_none(RKCP, name, namespace=namespace)
        found[:] = [obj] if obj else []
        return condition(obj, type_)[:2] == (status, reason)

    await helpers.eventually(check, within=20)
    return found[0]


async def until_refused_or_leaked(w: World, name: str, *, namespace: str, refusals: float) -> dict[str, Any]:
    """Wait until the hub either refused sealed secrets once more than ``refusals`` (a reconcile
    judged the redelivered message) or wrote some Secret into ``namespace`` (the hole): the
    caller asserts which. Returns the RKCP ``namespace/name`` as it is then."""
    found: list[dict[str, Any]] = []

    async def check() -> bool:
        obj = await w.mgmt.get_or_none(RKCP, name, namespace=namespace)
        found[:] = [obj] if obj else []
        judged = (
            refused(w, "OwnerMismatch") > refusals and condition(obj, "SecretsSynced")[1] == "OwnerMismatch"
        )
        return judged or bool(await secrets_in(w, namespace))

    await helpers.eventually(check, within=20)
    return found[0]


async def last_seq(w: World, kind: subjects.Kind, name: str = VICTIM, *, namespace: str = TARGET_NS) -> int:
    stored = await bus.last_message(
        w.conn,
        streams.stream_name(kind, site=SITE, prefix=w.prefix),
        subjects.control_plane(kind, SITE, namespace, name, prefix=w.prefix),
    )
    return stored.seq if stored else 0


async def has_consumer(w: World, site: str) -> bool:
    consumer = streams.agent_consumer(site, prefix=w.prefix)
    try:
        await bus.consumer_info(w.conn, consumer.stream, consumer.durable_name)
    except bus_errors.ConsumerNotFound:
        return False
    return True


async def stream_last_seq(w: World, kind: subjects.Kind) -> int:
    info = await bus.stream_info(w.conn, streams.stream_name(kind, site=SITE, prefix=w.prefix))
    return info.last_seq


async def redeliver_sealed(w: World, name: str = VICTIM) -> int:
    """Publish the site's last sealed secrets of ``name`` again, byte for byte, as a new message
    (what an agent restart, a certificate rotation or a re-seal puts on the stream); waits until
    the hub holds it and returns its sequence."""
    stream = streams.stream_name(subjects.Kind.SECRET, site=SITE, prefix=w.prefix)
    subject = subjects.secret(SITE, TARGET_NS, name, prefix=w.prefix)
    stored = await bus.last_message(w.conn, stream, subject)
    assert stored is not None, f"no sealed secrets on {subject}"
    ack = await bus.publish(w.conn, subject, stored.data, msg_id=f"redelivery:{stored.seq}")
    await until_held(w, ack.seq, name)
    return ack.seq


async def publish_sealed(w: World, sealed: messages.SealedSecrets) -> int:
    """Publish ``sealed`` on its own subject (a site may publish there); waits until the hub holds it."""
    subject = subjects.secret(sealed.site, sealed.namespace, sealed.name, prefix=w.prefix)
    ack = await bus.publish(w.conn, subject, messages.encode(sealed), msg_id=f"forged:{sealed.checksum}")
    await until_held(w, ack.seq, sealed.name)
    return ack.seq


async def until_held(w: World, seq: int, name: str = VICTIM) -> None:
    async def held() -> bool:
        c = w.controller
        return c is not None and c.observations.held_seq((SITE, TARGET_NS, name))[1] >= seq

    await helpers.eventually(held, within=20)


def seal_for_hub(
    w: World, payload: messages.SecretsPayload, *, name: str, owner_uid: str
) -> messages.SealedSecrets:
    """A genuinely sealed box to the hub's key, naming ``owner_uid`` as its owner."""
    plaintext = messages.encode(payload)
    recipient = w.public.newest_sealing()
    return messages.SealedSecrets(
        site=SITE,
        namespace=TARGET_NS,
        name=name,
        owner_uid=owner_uid,
        recipient_key_id=recipient.key_id,
        ciphertext=sealing.seal(plaintext, recipient),
        checksum=sealing.checksum(plaintext),
        observed_at=messages.utcnow(),
    )


def alive(w: World) -> bool:
    """Every hub and agent loop still runs (none ended, with an error or otherwise)."""
    tasks: list[asyncio.Task[None]] = [t for part in w.tasks.values() for t in part]
    return bool(tasks) and not any(t.done() for t in tasks)


def refused(w: World, reason: str) -> float:
    value = w.hub_metrics.registry.get_sample_value("kb_hub_secrets_refused_total", {"reason": reason})
    return value or 0.0


# -- before / after --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """What an attack must leave as it was: the victim's CAPI Secrets, every TCP at the site
    (with its resourceVersion), and the last sequence of the intent stream."""

    victim_secrets: dict[str, Any]
    tcps: dict[str, str]
    intents_seq: int


async def snapshot(w: World) -> Snapshot:
    tcps = await w.site.list(resources.TENANT_CONTROL_PLANE)
    return Snapshot(
        victim_secrets=data_of(await capi_secrets(w, VICTIM_NS, VICTIM)),
        tcps={
            f"{o['metadata']['namespace']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
            for o in tcps.items
        },
        intents_seq=await stream_last_seq(w, subjects.Kind.INTENT),
    )


async def victim_ready(w: World) -> dict[str, Any]:
    """Hub and agent running, the victim's control plane Ready with its Secrets written, which
    the victim (and, on real clusters, only the victim) can read as itself."""
    w.start_hub()
    w.start_agent()
    await create_pair(w, VICTIM, namespace=VICTIM_NS)
    ready = await until_ready(w)
    victim = await w.tenant(VICTIM_NS)
    assert await victim.get(resources.SECRET, f"{VICTIM}-kubeconfig", namespace=VICTIM_NS)
    return ready


async def share_target_namespace(w: World) -> None:
    """Let the attacker's namespace target ``tenants`` too (an operator sharing it on purpose)."""
    await w.mgmt.patch(resources.SITE, SITE, {"spec": {"placements": [SHARED]}})


ROTATED_CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nrotated\n-----END CERTIFICATE-----\n").decode()


async def rotate_ca(w: World, *, wait: bool = True) -> None:
    """Change the victim's CA at the site (a rotation); with ``wait``, until the victim's CAPI
    Secret has it."""
    await w.site.patch(
        resources.SECRET, f"{VICTIM}-ca", {"data": {"ca.crt": ROTATED_CA}}, namespace=TARGET_NS
    )
    if not wait:
        return

    async def rotated() -> bool:
        ca = (await capi_secrets(w, VICTIM_NS, VICTIM))["ca"]
        return ca is not None and ca["data"]["tls.crt"] == ROTATED_CA

    await helpers.eventually(rotated, within=20)
