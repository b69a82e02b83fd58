"""agent.status.loop.StatusLoop against the API emulator, the Kamaji simulator and a real nats-server.

The test plays the hub: it reads the site's stream KB_SITE_<site> (the latest message per
subject) and opens sealed secrets with the hub's private key. A plain NATS subscription on the
site's status subjects records every Status in publish order, to see phase sequences. Waits
poll with a deadline (helpers.eventually); counts come from the agent's metrics.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import nacl.public
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from agent import metrics as agent_metrics
from agent.status import loop as status_loop
from agent.tcp import managed
from common import bus
from common import kube as ckube
from common.bus import topology as bus_topology
from common.kube import resources
from protocol import keys, messages, sealing, streams, subjects
from sandbox import kamaji, kubeapi
from tests import helpers
from tests.agent import wiring

SITE = "site-a"
NS = "tenants"
OWNER_UID = "8d1c-uid"  # helpers.intent's owner


@pytest.fixture
def hub_private() -> nacl.public.PrivateKey:
    return keys.new_sealing_key()


@pytest.fixture
def hub_keys(hub_private: nacl.public.PrivateKey) -> keys.HubPublicKeys:
    entry = keys.public_entry(bytes(hub_private.public_key), created_at=helpers.T0)
    return keys.HubPublicKeys(sealing=(entry,))


@pytest.fixture
async def namespace(kube: ckube.Kube) -> str:
    await kube.create(
        resources.NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    )
    return NS


@pytest.fixture
async def simulator(kube: ckube.Kube, namespace: str) -> AsyncIterator[kamaji.Simulator]:
    async with kamaji.Simulator(kube.api_client, ready_delay=0.2, delete_delay=0) as sim:
        yield sim


class Hub:
    """The test's view from the hub side: latest messages per subject, every Status in order."""

    def __init__(self, conn: bus.Connection, prefix: str) -> None:
        self.conn = conn
        self.prefix = prefix
        self.statuses: list[messages.Status] = []

    async def record(self) -> None:
        async def got(msg: bus.Message) -> None:
            self.statuses.append(messages.decode_status(msg.data))

        await self.conn.subscribe(subjects.site_filter(subjects.Kind.STATUS, SITE, prefix=self.prefix), got)

    async def status(self, name: str, *, site: str = SITE) -> messages.Status | None:
        stream = helpers.stream(subjects.Kind.STATUS, self.prefix)
        found = await bus.last_message(self.conn, stream, subjects.status(site, NS, name, prefix=self.prefix))
        return messages.decode_status(found.data) if found else None

    async def sealed(self, name: str) -> messages.SealedSecrets | None:
        stream = helpers.stream(subjects.Kind.SECRET, self.prefix)
        found = await bus.last_message(self.conn, stream, subjects.secret(SITE, NS, name, prefix=self.prefix))
        return messages.decode_sealed_secrets(found.data) if found else None

    def phases(self, name: str) -> list[str]:
        return [s.phase for s in self.statuses if s.name == name]

    async def until(
        self, name: str, check: Callable[[messages.Status], bool], *, within: float = 15
    ) -> messages.Status:
        async def holds() -> bool:
            found = await self.status(name)
            return found is not None and check(found)

        await helpers.eventually(holds, within=within)
        found = await self.status(name)
        assert found is not None
        return found


@pytest.fixture
async def hub(conn: bus.Connection, topology: str) -> Hub:
    h = Hub(conn, topology)
    await h.record()
    return h


Start = Callable[..., Awaitable[tuple[status_loop.StatusLoop, agent_metrics.Metrics]]]


@pytest.fixture
async def start(
    kube: ckube.Kube, conn: bus.Connection, prefix: str, hub_keys: keys.HubPublicKeys, namespace: str
) -> AsyncIterator[Start]:
    """Start StatusLoops (stopped at teardown); returns each with its metrics once its cache is complete."""
    tasks: list[asyncio.Task[None]] = []

    async def starter(
        *, min_interval: float = 0.01, namespaces: tuple[str, ...] = (NS,)
    ) -> tuple[status_loop.StatusLoop, agent_metrics.Metrics]:
        metrics = agent_metrics.Metrics()
        loop = status_loop.StatusLoop(
            wiring.settings(site=SITE, namespaces=namespaces, status_min_interval=min_interval),
            wiring.deps(conn, kube, hub_keys, site=SITE, prefix=prefix, metrics=metrics),
        )
        tasks.append(asyncio.create_task(loop.run()))
        await asyncio.wait_for(loop.wait_synced(), 10)
        return loop, metrics

    yield starter
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task


SPEC = {
    "kubernetes": {
        "version": "v1.31.0",
        "kubelet": {"cgroupfs": "systemd", "preferredAddressTypes": ["InternalIP", "ExternalIP", "Hostname"]},
    },
    "controlPlane": {"deployment": {"replicas": 2}, "service": {"serviceType": "LoadBalancer"}},
}


def desired(name: str, *, seq: int = 1, site: str = SITE) -> dict[str, Any]:
    """The TCP the apply loop would create for a provision intent."""
    return managed.desired(helpers.intent(name=name, namespace=NS, site=site, spec=SPEC), seq=seq)


async def create_tcp(kube: ckube.Kube, name: str, *, seq: int = 1, site: str = SITE) -> dict[str, Any]:
    body = desired(name, seq=seq, site=site)
    return await kube.create(managed.TCP, body, namespace=NS)


async def annotate(kube: ckube.Kube, name: str, *, seq: int | None = None, **labels: str) -> None:
    meta: dict[str, Any] = {"labels": labels}
    if seq is not None:
        meta["annotations"] = {managed.INTENT_SEQ: str(seq)}
    await kube.patch(managed.TCP, name, {"metadata": meta}, namespace=NS)


def count(counter: Any) -> float:
    return float(counter._value.get())


def decoded(secret: dict[str, Any], key: str) -> bytes:
    return base64.b64decode(secret["data"][key])


async def test_provision_reports_provisioning_then_ready_with_sealed_secrets(
    kube: ckube.Kube,
    simulator: kamaji.Simulator,
    hub: Hub,
    start: Start,
    hub_private: nacl.public.PrivateKey,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Our own loggers at DEBUG; kubernetes_asyncio's DEBUG logs whole response bodies (Secrets
    # included), which is why the agent must never run that library's logger at DEBUG.
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger="agent")
    await start()
    await create_tcp(kube, "cp1")

    ready = await hub.until("cp1", lambda s: s.phase == "Ready" and bool(s.secrets_checksum))
    phases = hub.phases("cp1")
    assert "Provisioning" in phases
    assert phases.index("Provisioning") < phases.index("Ready")
    assert (ready.namespace, ready.name, ready.site) == (NS, "cp1", SITE)
    assert (ready.owner_uid, ready.intent_seq, ready.observed_generation) == (OWNER_UID, 1, 1)
    assert ready.version == "v1.31.0"
    assert ready.endpoint is not None and ready.endpoint.port == 6443
    assert (ready.replicas, ready.ready_replicas) == (2, 2)

    sealed = await hub.sealed("cp1")
    assert sealed is not None
    assert sealed.owner_uid == OWNER_UID
    assert sealed.checksum == ready.secrets_checksum
    keyring = sealing.Keyring([hub_private])
    plaintext = messages.decode_secrets_payload(
        keyring.open(sealed.ciphertext, key_id=sealed.recipient_key_id)
    )
    assert sealing.checksum(messages.encode(plaintext)) == sealed.checksum

    # What the hub got is exactly what Kamaji generated.
    ca_secret = await kube.get(resources.SECRET, "cp1-ca", namespace=NS)
    kc_secret = await kube.get(resources.SECRET, "cp1-admin-kubeconfig", namespace=NS)
    assert plaintext.ca_crt.encode() == decoded(ca_secret, "ca.crt")
    assert plaintext.ca_key.encode() == decoded(ca_secret, "ca.key")
    assert plaintext.kubeconfig.encode() == decoded(kc_secret, "admin.conf")

    # A usable kubeconfig: its client certificate was issued by the CA the hub received.
    config = yaml.safe_load(plaintext.kubeconfig)
    assert (
        config["clusters"][0]["cluster"]["server"] == f"https://{ready.endpoint.host}:{ready.endpoint.port}"
    )
    user = config["users"][0]["user"]
    client_cert = x509.load_pem_x509_certificate(base64.b64decode(user["client-certificate-data"]))
    ca_cert = x509.load_pem_x509_certificate(plaintext.ca_crt.encode())
    client_cert.verify_directly_issued_by(ca_cert)
    ca_key = serialization.load_pem_private_key(plaintext.ca_key.encode(), password=None)
    assert ca_key.public_key().public_numbers() == ca_cert.public_key().public_numbers()  # type: ignore[union-attr]

    # Nothing of the secrets reached a log line: neither key material nor the kubeconfig's parts.
    assert caplog.records, "the loop logs its publishes"
    text = caplog.text
    for needle in (
        "PRIVATE KEY",
        user["client-key-data"][:40],
        user["client-certificate-data"][:40],
        plaintext.ca_key.splitlines()[1],
        ca_secret["data"]["ca.key"][:40],
    ):
        assert needle not in text


async def test_burst_of_changes_is_coalesced_and_the_last_state_wins(
    kube: ckube.Kube, hub: Hub, start: Start
) -> None:
    _, metrics = await start(min_interval=1.0)
    await create_tcp(kube, "cp1")
    await hub.until("cp1", lambda s: s.phase == "Pending")
    before = count(metrics.status_published)

    for seq in range(2, 22):
        await annotate(kube, "cp1", seq=seq, burst=str(seq))
    await hub.until("cp1", lambda s: s.intent_seq == 21)
    burst = count(metrics.status_published) - before
    assert 1 <= burst <= 4, f"{burst} publishes for 20 changes"

    # Changes that are not significant (labels only) publish nothing: only the next real one counts.
    before = count(metrics.status_published)
    for i in range(5):
        await annotate(kube, "cp1", unrelated=str(i))
    await annotate(kube, "cp1", seq=22)
    await hub.until("cp1", lambda s: s.intent_seq == 22)
    assert count(metrics.status_published) - before == 1


async def test_deleted_tcp_is_reported_deleted(
    kube: ckube.Kube, simulator: kamaji.Simulator, hub: Hub, start: Start
) -> None:
    loop, metrics = await start()
    # What the apply loop does: apply the intent, and record it as what the TCP should be.
    await kube.apply(managed.TCP, desired("cp1", seq=5), manager=managed.MANAGER, namespace=NS)
    loop.desires.record(helpers.intent(name="cp1", namespace=NS, site=SITE, spec=SPEC), seq=5)
    await hub.until("cp1", lambda s: s.phase == "Ready")
    assert metrics.registry.get_sample_value("kb_agent_managed_tcps") == 1

    await kube.delete(managed.TCP, "cp1", namespace=NS)
    deleted = await hub.until("cp1", lambda s: s.phase == "Deleted")
    assert (deleted.owner_uid, deleted.intent_seq) == (OWNER_UID, 5)
    assert await kube.get_or_none(managed.TCP, "cp1", namespace=NS) is None
    assert metrics.registry.get_sample_value("kb_agent_managed_tcps") == 0
    # What it was to be is forgotten with it: the record holds only TCPs that exist.
    await helpers.eventually(lambda: (NS, "cp1") not in loop.desires.by_tcp)


async def test_a_tcp_the_restorer_brings_back_is_never_reported_deleted(
    kube: ckube.Kube, simulator: kamaji.Simulator, hub: Hub, start: Start
) -> None:
    loop, _ = await start()
    asked: list[tuple[str, str, managed.Applied | None]] = []

    async def restore(namespace: str, name: str, vanished: managed.Applied | None) -> bool:
        # What the cleanup loop's restore does once the subject still says provision.
        asked.append((namespace, name, vanished))
        await create_tcp(kube, name, seq=5)
        return True

    loop.restore = restore
    first = await create_tcp(kube, "cp1", seq=5)
    await hub.until("cp1", lambda s: s.phase == "Ready")

    await kube.delete(managed.TCP, "cp1", namespace=NS)

    async def back() -> bool:
        found = await kube.get_or_none(managed.TCP, "cp1", namespace=NS)
        return found is not None and found["metadata"]["uid"] != first["metadata"]["uid"]

    await helpers.eventually(back)
    # The new TCP's own reports follow (from Pending) and it gets Ready again; never a Deleted.
    again = await hub.until("cp1", lambda s: s.phase == "Ready" and hub.phases("cp1").count("Ready") >= 2)
    assert (again.owner_uid, again.intent_seq) == (OWNER_UID, 5)
    assert "Deleted" not in hub.phases("cp1")
    assert asked == [(NS, "cp1", managed.applied(first, site=SITE))]


async def test_a_tcp_edited_at_the_site_is_reported_drifted_and_reverted_from_the_watch(
    kube: ckube.Kube, simulator: kamaji.Simulator, hub: Hub, start: Start
) -> None:
    loop, _ = await start()
    asked: list[tuple[str, str]] = []
    want = helpers.intent(name="cp1", namespace=NS, site=SITE, spec=SPEC)

    async def revert(namespace: str, name: str) -> bool:
        # What the cleanup loop's revert does: apply the TCP's own intent again.
        asked.append((namespace, name))
        await kube.apply(
            managed.TCP, managed.desired(want, seq=5), manager=managed.MANAGER, namespace=namespace
        )
        return True

    # What the apply loop does: apply the intent, and record it as what the TCP should be.
    await kube.apply(managed.TCP, managed.desired(want, seq=5), manager=managed.MANAGER, namespace=NS)
    loop.desires.record(want, seq=5)
    await hub.until("cp1", lambda s: s.phase == "Ready")
    await kube.patch(managed.TCP, "cp1", {"spec": {"kubernetes": {"version": "v1.20.0"}}}, namespace=NS)
    # No reverter: the hub is told the TCP is not what it asked for, whatever Kamaji says.
    drifted = await hub.until("cp1", lambda s: s.reason == "Drifted")
    assert drifted.phase == "NotReady" and "reverting" in drifted.message and "v1.20.0" not in drifted.message
    # A field Kamaji (or anyone) adds beside ours is not drift.
    await kube.apply(managed.TCP, managed.desired(want, seq=5), manager=managed.MANAGER, namespace=NS)
    await hub.until("cp1", lambda s: s.phase == "Ready")
    beside = {"networkProfile": {"dnsServiceIPs": ["10.96.0.10"]}}
    await kube.patch(managed.TCP, "cp1", {"spec": beside}, namespace=NS)

    loop.revert = revert
    edit = {"controlPlane": {"deployment": {"replicas": 7}}}
    await kube.patch(managed.TCP, "cp1", {"spec": edit}, namespace=NS)
    await helpers.eventually(lambda: _reverted(kube))
    await hub.until("cp1", lambda s: s.phase == "Ready" and s.reason != "Drifted" and s.replicas == 2)
    assert asked and set(asked) == {(NS, "cp1")}


async def _reverted(kube: ckube.Kube) -> bool:
    obj = await kube.get(managed.TCP, "cp1", namespace=NS)
    return obj["spec"]["controlPlane"]["deployment"]["replicas"] == 2 and not managed.drifted(obj, SPEC)


async def test_a_tcp_deleted_for_a_delete_intent_is_not_restored(
    kube: ckube.Kube, simulator: kamaji.Simulator, hub: Hub, start: Start
) -> None:
    loop, _ = await start()
    asked: list[str] = []

    async def restore(namespace: str, name: str, vanished: managed.Applied | None) -> bool:
        asked.append(name)
        return False

    loop.restore = restore
    await create_tcp(kube, "cp1", seq=5)
    await hub.until("cp1", lambda s: s.phase == "Ready")
    loop.deleting(NS, "cp1", 9)  # the apply loop, before it deletes for the delete intent seq 9
    await kube.delete(managed.TCP, "cp1", namespace=NS)
    deleted = await hub.until("cp1", lambda s: s.phase == "Deleted")
    assert deleted.intent_seq == 9 and asked == []


async def test_unmanaged_tcps_are_ignored_and_one_that_leaves_management_is_deleted(
    kube: ckube.Kube, hub: Hub, start: Start
) -> None:
    _, metrics = await start()
    foreign = desired("foreign")
    del foreign["metadata"]["labels"]
    await kube.create(managed.TCP, foreign, namespace=NS)
    await create_tcp(kube, "other-site", site="site-b")
    # Created last: once it is reported, events of the earlier ones have been handled too.
    await create_tcp(kube, "mine")
    await hub.until("mine", lambda s: s.phase == "Pending")

    assert await hub.status("foreign") is None
    assert await hub.status("other-site") is None
    assert await hub.status("other-site", site="site-b") is None
    assert {s.name for s in hub.statuses} == {"mine"}
    assert metrics.registry.get_sample_value("kb_agent_managed_tcps") == 1

    # Someone removes our label: the TCP is no longer ours, the hub must not wait for it.
    await kube.patch(managed.TCP, "mine", {"metadata": {"labels": {managed.MANAGED_BY: None}}}, namespace=NS)
    gone = await hub.until("mine", lambda s: s.phase == "Deleted")
    assert gone.owner_uid == OWNER_UID
    assert metrics.registry.get_sample_value("kb_agent_managed_tcps") == 0


async def test_republish_all_publishes_every_status_but_unchanged_secrets_once(
    kube: ckube.Kube, simulator: kamaji.Simulator, hub: Hub, start: Start, conn: bus.Connection, prefix: str
) -> None:
    loop, metrics = await start()
    for name in ("cp1", "cp2"):
        await create_tcp(kube, name)
    for name in ("cp1", "cp2"):
        await hub.until(name, lambda s: s.phase == "Ready" and bool(s.secrets_checksum))
    secrets_before = count(metrics.secrets_published)
    assert secrets_before == 2

    # The site's stream is lost (recreated empty): only anti-entropy brings statuses back.
    assert await bus_topology.delete_stream(conn, helpers.stream(subjects.Kind.STATUS, prefix))
    await bus.ensure_topology(conn, sites=[SITE], prefix=prefix)
    assert await hub.status("cp1") is None

    assert await loop.republish_all() == 2
    for name in ("cp1", "cp2"):
        found = await hub.status(name)
        assert found is not None and found.phase == "Ready"
    assert count(metrics.secrets_published) == secrets_before

    # A change of the secrets (Kamaji reissues the CA) is sealed again, once.
    # (The stream lost the sealed box with the statuses; the agent's status names its checksum.)
    old = await hub.status("cp1")
    assert old is not None and old.secrets_checksum
    await kube.delete(resources.SECRET, "cp1-ca", namespace=NS)
    await annotate(kube, "cp1", touched="1")  # the simulator watches TCPs only: wake it

    # The CA and the kubeconfig change in two writes: the latest status and the latest sealed box
    # agree once both are out (a status read between the two may already be one seal behind).
    async def sealed_as_reported() -> bool:
        fresh, sealed = await hub.status("cp1"), await hub.sealed("cp1")
        return (
            fresh is not None
            and sealed is not None
            and fresh.secrets_checksum not in ("", old.secrets_checksum)
            and sealed.checksum == fresh.secrets_checksum
        )

    await helpers.eventually(sealed_as_reported, within=15, what="the new secrets sealed as reported")
    # The CA and the kubeconfig change in two writes: one or two seals, never a republish of old data.
    assert 1 <= count(metrics.secrets_published) - secrets_before <= 2


async def test_a_failing_bus_delays_the_status_and_loses_nothing(
    kube: ckube.Kube, conn: bus.Connection, prefix: str, start: Start, caplog: pytest.LogCaptureFixture
) -> None:
    # No topology yet: nothing answers a publish, as when the hub has not created the streams.
    _, metrics = await start()
    await create_tcp(kube, "cp1")
    await annotate(kube, "cp1", seq=2)

    async def failed() -> bool:
        return "not published" in caplog.text

    await helpers.eventually(failed, within=30)
    assert count(metrics.status_published) == 0

    await bus.ensure_topology(conn, sites=[SITE], prefix=prefix)
    hub = Hub(conn, prefix)
    found = await hub.until("cp1", lambda s: s.intent_seq == 2, within=60)
    assert found.phase == "Pending"


async def test_tcps_failing_together_count_as_one_failure(
    kube: ckube.Kube, conn: bus.Connection, prefix: str, start: Start, caplog: pytest.LogCaptureFixture
) -> None:
    """More TCPs than one round syncs at once, and no stream to publish to: the first round's
    syncs fail together and each waits the first failure's backoff (at most 0.5 s), not the
    backoff of as many failures in a row as there were TCPs in the round (up to 30 s)."""
    await asyncio.gather(*(create_tcp(kube, f"cp{i}") for i in range(status_loop.SYNC_CONCURRENCY + 6)))
    await start()
    delays = re.compile(r"status of tcp \S+ not published .*; retrying in ([0-9.]+)s")

    def logged() -> list[float]:
        return [float(m.group(1)) for r in caplog.records if (m := delays.search(r.getMessage()))]

    first_round = await helpers.eventually(
        logged, lambda d: len(d) >= status_loop.SYNC_CONCURRENCY, within=60
    )
    assert max(first_round[: status_loop.SYNC_CONCURRENCY]) <= 0.5


async def test_a_tcp_missing_from_a_relist_is_reported_deleted(
    kube: ckube.Kube, cluster: kubeapi.Server, hub: Hub, start: Start, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="common.kube")
    _, metrics = await start()
    await create_tcp(kube, "kept")
    await create_tcp(kube, "vanished", seq=3)
    for name in ("kept", "vanished"):
        await hub.until(name, lambda s: s.phase == "Pending")

    # While the API server is down the agent cannot watch; meanwhile the TCP is deleted and the
    # history window (200 events) moves past the agent's resourceVersion, so when the server is
    # back the watch gets 410 Gone and only the relist can tell that "vanished" is gone.
    port = cluster.port
    await cluster.stop()
    store = cluster.store
    tcp_type = store.resolve(managed.TCP.group, managed.TCP.version, managed.TCP.plural)
    cm_type = store.resolve("", "v1", "configmaps")
    assert tcp_type is not None and cm_type is not None
    _, gone = store.delete(tcp_type, NS, "vanished")
    assert gone
    for i in range(250):
        store.create(cm_type, NS, {"metadata": {"name": f"filler-{i}", "namespace": NS}}, version="v1")
    await cluster.start(port=port)

    deleted = await hub.until("vanished", lambda s: s.phase == "Deleted", within=60)
    assert (deleted.owner_uid, deleted.intent_seq) == (OWNER_UID, 3)
    kept = await hub.status("kept")
    assert kept is not None and kept.phase == "Pending"
    assert metrics.registry.get_sample_value("kb_agent_managed_tcps") == 1
    # The news came from the relist, not from a replayed DELETED event.
    assert "tenantcontrolplanes expired" in caplog.text


async def test_at_the_site_quota_new_tcps_are_refused_and_logged_while_existing_ones_report(
    kube: ckube.Kube,
    simulator: kamaji.Simulator,
    hub: Hub,
    start: Start,
    conn: bus.Connection,
    prefix: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A site's stream holds 3 messages here (its quota); cp1's status and box take two, cp2's
    status the third, cp2's box is refused by the server (max_msgs): the agent logs the limit,
    keeps running, and cp1's newer status (an update of its subject) still gets through."""
    quota = streams.SiteLimits(max_msg_size=streams.MAX_MSG_SIZE, max_msgs=3, max_bytes=1024 * 1024)
    await bus.ensure_topology(conn, sites=[SITE], prefix=prefix, limits=quota)
    await start()
    await create_tcp(kube, "cp1")
    await hub.until("cp1", lambda s: s.phase == "Ready" and bool(s.secrets_checksum))
    await create_tcp(kube, "cp2")

    async def refused() -> bool:
        return any(
            "refused by the server (max_msgs)" in r.getMessage() and ".cp2" in r.getMessage()
            for r in caplog.records
        )

    await helpers.eventually(refused, within=15)
    await annotate(kube, "cp1", seq=5)
    await hub.until("cp1", lambda s: s.intent_seq == 5)
    assert await hub.sealed("cp2") is None
