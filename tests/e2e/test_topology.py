"""End to end, every part a separate process: provision across sites, update, delete, and what
each cluster, the bus and kubectl show."""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import re
from typing import Any

import aiohttp
import pytest
import yaml
from cryptography import x509
from prometheus_client.parser import text_string_to_metric_families

from common import bus
from common import kube as ckube
from common.bus import errors as common_errors
from common.kube import errors as kerrors
from common.kube import resources
from protocol import streams, subjects
from sandbox import kubeapi
from sandbox.kamaji import crds as kamaji_crds
from sandbox.kamaji import reconcile_status as kamaji_status
from sandbox.launcher import System
from tests import helpers, systems
from tests.e2e.conftest import BASE, SITES

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

TCP = resources.TENANT_CONTROL_PLANE
RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
SECRET = resources.SECRET
NS = "default"


def conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or ()}


def b64(secret: dict[str, Any], key: str) -> bytes:
    return base64.b64decode(secret["data"][key])


async def test_every_control_plane_is_ready_at_its_own_site_only(world: System) -> None:
    pools = {site: ipaddress.ip_network(f"10.{i + 1}.0.0/16") for i, site in enumerate(SITES)}
    for name, site in BASE:
        obj = await world.mgmt.get(RKCP, name, namespace=NS)
        status = obj["status"]
        assert status["ready"] is True and status["initialized"] is True, name
        assert status["version"] == "v1.31.0" and status["readyReplicas"] == 2, name
        for type_ in ("Available", "TenantControlPlaneReady", "IntentDelivered", "SecretsSynced"):
            assert conditions(obj)[type_] == "True", (name, type_)
        tcp = await world.site_kube(site).get(TCP, name, namespace=world.namespace)
        labels = tcp["metadata"]["labels"]
        assert labels["kamaji-broker.io/managed-by"] == "kamaji-broker", name
        assert labels["kamaji-broker.io/site"] == site, name
        assert tcp["metadata"]["annotations"]["kamaji-broker.io/owner-uid"] == obj["metadata"]["uid"]
        # The endpoint came from this site's simulator (its own pool) and was written once to the RKCP.
        host, port = tcp["status"]["controlPlaneEndpoint"].rsplit(":", 1)
        assert ipaddress.ip_address(host) in pools[site], name
        assert obj["spec"]["controlPlaneEndpoint"] == {"host": host, "port": int(port)}, name
        for other in SITES:
            if other != site:
                assert await world.site_kube(other).get_or_none(TCP, name, namespace=world.namespace) is None

    # Ready also summarises SiteConnected, which waits for the site's heartbeats to reach the hub.
    async def connected_and_ready() -> bool:
        objs = [await world.mgmt.get(RKCP, name, namespace=NS) for name, _ in BASE]
        return all(conditions(o).get("SiteConnected") == conditions(o).get("Ready") == "True" for o in objs)

    await helpers.eventually(connected_and_ready, within=30, every=0.2)


async def test_every_site_tcp_validates_against_the_real_kamaji_crd(world: System) -> None:
    # Kamaji's own schema in a cluster of its own: a 422 there means a field Kamaji would refuse,
    # and a field missing from what comes back is one its API server would prune silently.
    [crd] = kamaji_crds.load([helpers.kamaji_crd_path()])
    server = kubeapi.Server(name="kamaji-real")
    await server.start(port=0)
    api_client = await ckube.api_client_from_kubeconfig(
        server.write_kubeconfig(world.directory / "kamaji-real.kubeconfig")
    )
    try:
        await server.apply_crd(crd)
        real = ckube.Kube(api_client)
        checked = 0
        for site in SITES:
            await real.create(resources.NAMESPACE, {"metadata": {"name": site}})
            for tcp in (await world.site_kube(site).list(TCP, namespace=world.namespace)).items:
                meta = tcp["metadata"]
                body = {
                    "apiVersion": tcp["apiVersion"],
                    "kind": tcp["kind"],
                    "metadata": {"name": meta["name"], "labels": meta.get("labels") or {},
                                 "annotations": meta.get("annotations") or {}},
                    "spec": tcp["spec"],
                }  # fmt: skip
                try:
                    created = await real.create(TCP, body, namespace=site)
                except kerrors.Invalid as exc:
                    pytest.fail(f"TCP {site}/{meta['name']} is invalid for Kamaji: {exc}")
                assert kamaji_status.is_subset(tcp["spec"], created["spec"]), meta["name"]
                checked += 1
        assert checked >= len(BASE)
    finally:
        await api_client.close()
        await server.stop()


async def test_cluster_kubeconfig_is_the_sites_admin_kubeconfig_and_verifies_against_its_ca(
    world: System,
) -> None:
    for name, site in BASE:
        kubeconfig = await world.mgmt.get(SECRET, f"{name}-kubeconfig", namespace=NS)
        ca = await world.mgmt.get(SECRET, f"{name}-ca", namespace=NS)
        site_kubeconfig = await world.site_kube(site).get(
            SECRET, f"{name}-admin-kubeconfig", namespace=world.namespace
        )
        assert b64(kubeconfig, "value") == b64(site_kubeconfig, "admin.conf"), name
        config = yaml.safe_load(b64(kubeconfig, "value"))
        [user] = config["users"]
        client_cert = x509.load_pem_x509_certificate(
            base64.b64decode(user["user"]["client-certificate-data"])
        )
        ca_cert = x509.load_pem_x509_certificate(b64(ca, "tls.crt"))
        client_cert.verify_directly_issued_by(ca_cert)  # raises InvalidSignature otherwise
        [cluster] = config["clusters"]
        endpoint = (await world.mgmt.get(RKCP, name, namespace=NS))["spec"]["controlPlaneEndpoint"]
        assert cluster["cluster"]["server"] == f"https://{endpoint['host']}:{endpoint['port']}", name


async def test_site_a_credentials_cannot_read_site_b_intents(world: System) -> None:
    site_a = helpers.options(
        world.nats_url,
        seed_file=await world.site_credential("site-a"),
        inbox_prefix=bus.site_inbox_prefix("site-a"),
    )
    conn = await bus.connect(site_a, deadline=10)
    try:
        own = await bus.bind(conn, streams.agent_consumer("site-a"))  # the identity itself works
        await own.unsubscribe()
        with pytest.raises(common_errors.PermissionDenied) as denied:
            await bus.bind(conn, streams.agent_consumer("site-b"))
        assert "agent-site-b" in str(denied.value.subject)
    finally:
        await conn.close()


async def test_kubectl_lists_rkcps_with_the_printer_columns(world: System) -> None:
    kubectl = helpers.kubectl()
    if not kubectl:
        pytest.skip("kubectl is not installed (looked for it on PATH)")
    proc = await asyncio.create_subprocess_exec(
        kubectl, "--kubeconfig", str(world.mgmt_kubeconfig), "get", "rkcp", "-A",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    header, *rows = out.decode().splitlines()
    # CAPI's control-plane columns in KubeadmControlPlane's order, then the site.
    assert re.split(r"\s{2,}", header.strip()) == [
        "NAMESPACE", "NAME", "CLUSTER", "INITIALIZED", "API SERVER AVAILABLE", "REPLICAS", "READY",
        "UPDATED", "UNAVAILABLE", "AGE", "VERSION", "SITE",
    ]  # fmt: skip
    by_name = {row.split()[1]: row.split() for row in rows}
    for name, site in BASE:
        cells = by_name[name]  # the Cluster is named as its RKCP; AGE (cells[9]) moves
        assert cells[:9] + cells[10:] == [NS, name, name, "true", "true", "2", "2", "2", "0", "v1.31.0", site]


async def _gone(world: System, deleted: list[tuple[str, str]]) -> bool:
    for name, site in deleted:
        if await world.mgmt.get_or_none(RKCP, name, namespace=NS) is not None:
            return False
        if await world.site_kube(site).get_or_none(TCP, name, namespace=world.namespace) is not None:
            return False
        # The CAPI Secrets are owned by the RKCP: garbage-collected with it.
        if await world.mgmt.get_or_none(SECRET, f"{name}-kubeconfig", namespace=NS) is not None:
            return False
    return True


async def test_updates_reach_the_site_and_deletes_purge_the_site_and_the_bus(
    world: System, hub_conn: bus.Connection
) -> None:
    mine = [("life-a-1", "site-a"), ("life-b-1", "site-b"), ("life-a-2", "site-a"), ("life-b-2", "site-b")]
    for name, site in mine:
        await world.create_control_plane(name, site=site)

    async def mine_ready() -> bool:
        snapshot = await world.progress()
        return all(cp.done for cp in snapshot.control_planes if cp.name.startswith("life-"))

    await helpers.eventually(mine_ready, every=0.2, within=60)

    # Update: a version at site-a, replicas at site-b.
    await systems.update_control_plane(world, "life-a-1", version="v1.32.0")
    await systems.update_control_plane(world, "life-b-1", replicas=3)

    async def updated() -> bool:
        tcp_a = await world.site_kube("site-a").get(TCP, "life-a-1", namespace=world.namespace)
        tcp_b = await world.site_kube("site-b").get(TCP, "life-b-1", namespace=world.namespace)
        rkcp_a = (await world.mgmt.get(RKCP, "life-a-1", namespace=NS)).get("status") or {}
        rkcp_b = (await world.mgmt.get(RKCP, "life-b-1", namespace=NS)).get("status") or {}
        return (
            tcp_a["spec"]["kubernetes"]["version"] == "v1.32.0"
            and rkcp_a.get("version") == "v1.32.0"
            and rkcp_a.get("ready") is True
            and tcp_b["spec"]["controlPlane"]["deployment"]["replicas"] == 3
            and rkcp_b.get("replicas") == 3
            and rkcp_b.get("readyReplicas") == 3
        )

    await helpers.eventually(updated, every=0.2, within=60)

    # Delete: gone from the management cluster and the site, and every subject purged.
    deleted = [("life-a-2", "site-a"), ("life-b-2", "site-b")]
    for name, _ in deleted:
        await systems.delete_control_plane(world, name)

    await helpers.eventually(lambda: _gone(world, deleted), every=0.2, within=60)
    for name, site in deleted:
        for kind in (subjects.Kind.INTENT, subjects.Kind.STATUS, subjects.Kind.SECRET):
            subject = subjects.control_plane(kind, site, world.namespace, name)
            stream = streams.stream_name(kind, site=site)
            assert await bus.last_message(hub_conn, stream, subject) is None, subject
    # The updated ones are untouched by the deletes, and so are their subjects.
    for name, site in mine[:2]:
        assert await world.site_kube(site).get_or_none(TCP, name, namespace=world.namespace) is not None
        stored = await bus.last_message(
            hub_conn, streams.stream_name(subjects.Kind.INTENT), subjects.intent(site, world.namespace, name)
        )
        assert stored is not None, name


async def test_each_site_object_shows_the_agents_inventory(world: System) -> None:
    from common.files import keys as keyfiles
    from kamaji_broker import __version__
    from protocol import keys

    public = keys.decode_public_keys((world.keys_dir / keyfiles.PUBLIC_FILE).read_bytes())
    trusted = sorted(public.verify_keys())

    async def inventory() -> bool:
        for site in SITES:
            status = (await world.mgmt.get(resources.SITE, site)).get("status") or {}
            placed = sum(1 for _, s in BASE if s == site)
            if not (
                status.get("connected") is True
                and status.get("agentVersion") == __version__
                and status.get("trustedKeyIds") == trusted
                and (status.get("controlPlanes") or 0) >= placed
                and conditions({"status": status}).get("SigningKeyTrusted") == "True"
            ):
                return False
        return True

    await helpers.eventually(inventory, within=30, every=0.2)


async def _scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a process's /metrics, by (name, labels)."""
    async with aiohttp.ClientSession() as http, http.get(f"{url}/metrics") as r:
        text = await r.text()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_the_processes_export_what_the_dashboard_reads(world: System) -> None:
    """The hub's and the agents' /metrics, as Prometheus scrapes them: every site connected with a
    fresh heartbeat, the base control planes Ready, their Secrets synced, an update timed."""
    await world.create_control_plane("metrics-a", site="site-a")

    async def ready() -> bool:
        snapshot = await world.progress()
        return all(cp.done for cp in snapshot.control_planes if cp.name == "metrics-a")

    await helpers.eventually(ready, every=0.2, within=60)
    await systems.update_control_plane(world, "metrics-a", version="v1.32.0")
    hub: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}

    def sample(name: str, **labels: str) -> float | None:
        return hub.get((name, frozenset(labels.items())))

    async def settled() -> bool:
        hub.clear()
        hub.update(await _scrape(world.hub_health_url))
        return (sample("kb_hub_update_ready_seconds_count", site="site-a") or 0.0) >= 1.0 and all(
            sample("kb_hub_site_connected", site=site) == 1.0
            and sample("kb_hub_secrets_not_synced", site=site) == 0.0
            for site in SITES
        )

    await helpers.eventually(settled, every=0.2, within=60, what="the update timed, every site in sync")
    for site in SITES:
        placed = sum(1 for _, s in BASE if s == site) + (site == "site-a")
        age = sample("kb_hub_site_heartbeat_age_seconds", site=site)
        assert age is not None and age >= 0.0, site
        assert (sample("kb_hub_control_planes", site=site, phase="Ready") or 0.0) >= placed, site
        assert sample("kb_hub_site_backlog", site=site) is not None, site
        agent = await _scrape(world.agent_health_urls[site])
        assert any(n == "kb_agent_info" and dict(labels).get("site") == site for n, labels in agent), site
    for site in SITES:
        placed = sum(1 for _, s in BASE if s == site) + (site == "site-a")
        assert (sample("kb_hub_first_ready_seconds_count", site=site) or 0.0) >= placed, site
    assert sample("kb_hub_intents_published_total", site="site-a", op="provision") is not None
