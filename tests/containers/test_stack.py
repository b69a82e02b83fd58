"""docker-compose.yml for real: built, brought up with testcontainers' DockerCompose on the host
network (docker-compose.host.yml), checked, disturbed, and taken down.

In file order, on one stack: every health check green; the ``e2e`` service passes; the images run
as the non-root user on a read-only root; an agent and the hub restarted mid-workload lose
nothing (the agent killed, the hub restarted gracefully, another agent restarted while
control planes are being deleted); ``docker compose down -v`` leaves no container, volume or network behind.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from common import kube
from common.kube import resources
from hub.api import site as site_api
from tests import helpers
from tests.containers import engine
from tests.containers.conftest import Stack
from tests.deploy import compose as c
from tests.deploy import manifests as m

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

SERVICES = c.services()
RUNNERS = ("hub", "agent-site-a", "agent-site-b")
ONE_SHOT = "init"
ON_DEMAND = {name for name, s in SERVICES.items() if s.get("profiles")}
LONG_RUNNING = set(SERVICES) - {ONE_SHOT} - ON_DEMAND
OUR_IMAGES = {"kamaji-broker:dev", "kamaji-broker:sandbox"}
SITES = ("site-a", "site-b")
NAMESPACE = "tenants"


def _e2e_check() -> ModuleType:
    """The compose ``e2e`` service's script: its Cluster/RKCP bodies are the ones users see."""
    path = m.ROOT / "deploy" / "compose" / "e2e_check.py"
    spec = importlib.util.spec_from_file_location("compose_e2e_check", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


E2E = _e2e_check()


def test_every_service_is_up_and_healthy(stack: Stack) -> None:
    containers = {ct.Service: ct for ct in stack.get_containers(include_all=True)}
    assert set(containers) == LONG_RUNNING | {ONE_SHOT}
    assert (containers[ONE_SHOT].State, containers[ONE_SHOT].ExitCode) == ("exited", 0)
    for name in LONG_RUNNING:
        assert (containers[name].State, containers[name].Health) == ("running", "healthy"), name


def test_the_e2e_service_passes(stack: Stack) -> None:
    with engine.timed("e2e service"):
        done = stack.compose("run", "--rm", "e2e", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "e2e: every check passed" in done.stdout
    assert done.stdout.count("ok   ") == len(RUNNERS) + 6 * len(SITES)


# errno 30 (EROFS) from writing /, the uid, and whether /tmp (a tmpfs) takes a file.
PROBE = (
    "import os, errno\n"
    "try:\n    open('/probe', 'w')\n    print('writable')\n"
    "except OSError as e:\n    print(errno.errorcode[e.errno])\n"
    "print(os.getuid(), os.getgid())\n"
    "open('/tmp/probe', 'w').close()\n"
)


def test_our_images_run_as_the_non_root_user_on_a_read_only_root(stack: Stack) -> None:
    ours = [
        ct
        for ct in stack.get_containers(include_all=True)
        if ct.ID and engine.inspect(ct.ID)["Config"]["Image"] in OUR_IMAGES
    ]
    assert {ct.Service for ct in ours} == LONG_RUNNING - {"nats"} | {ONE_SHOT}
    for ct in ours:
        assert ct.ID and ct.Service
        info = engine.inspect(ct.ID)
        assert info["Config"]["User"] == "10001:10001", ct.Service
        assert info["HostConfig"]["ReadonlyRootfs"] is True, ct.Service
        assert info["HostConfig"]["CapDrop"] == ["ALL"], ct.Service
        assert info["HostConfig"]["SecurityOpt"] == ["no-new-privileges:true"], ct.Service
        if ct.Service == ONE_SHOT:  # exited: nothing to run in it
            continue
        done = stack.compose("exec", "-T", ct.Service, "python", "-c", PROBE)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["EROFS", "10001", "10001"], (ct.Service, done.stdout)


@dataclass
class Clusters:
    mgmt: kube.Kube
    sites: dict[str, kube.Kube]


@asynccontextmanager
async def _clusters(stack: Stack, directory: Path) -> AsyncIterator[Clusters]:
    """Clients on the emulated clusters, from the kubeconfigs the clusters service wrote."""
    for name in ("mgmt", *SITES):
        done = stack.compose("exec", "-T", "clusters", "cat", f"/state/kube/{name}.kubeconfig")
        assert done.returncode == 0, done.stderr
        (directory / f"{name}.kubeconfig").write_text(done.stdout)
    opened: list[kube.Kube] = []
    try:
        for name in ("mgmt", *SITES):
            opened.append(await kube.connect(in_cluster=False, kubeconfig=directory / f"{name}.kubeconfig"))
        yield Clusters(opened[0], dict(zip(SITES, opened[1:], strict=True)))
    finally:
        for client in opened:
            await client.close()


async def _place(clusters: Clusters, site: str, name: str) -> None:
    mgmt = clusters.mgmt
    cluster = await mgmt.create(resources.CLUSTER, E2E.cluster_body(name), namespace="default")
    body = E2E.rkcp_body(name, cluster_uid=cluster["metadata"]["uid"], site=site, namespace=NAMESPACE)
    await mgmt.create(resources.REMOTE_KAMAJI_CONTROL_PLANE, body, namespace="default")


async def _grant(clusters: Clusters, site: str) -> None:
    grant = site_api.Placement(namespaces=["default"], target_namespaces=[NAMESPACE])
    existing = await clusters.mgmt.get_or_none(resources.SITE, site)
    if existing is None:
        await clusters.mgmt.create(resources.SITE, site_api.manifest(site, placements=[grant]))
    else:
        await clusters.mgmt.patch(resources.SITE, site, {"spec": {"placements": [grant.to_dict()]}})


async def _restart(stack: Stack, *services: str, kill: bool = False) -> None:
    """``docker compose restart`` (SIGTERM, then start), or with ``kill`` a crash: SIGKILL, start."""
    before = {s: stack.started_at(s) for s in services}
    steps = [("kill", "-s", "SIGKILL", *services), ("start", *services)] if kill else [("restart", *services)]
    for step in steps:
        done = await asyncio.to_thread(stack.compose, *step)
        assert done.returncode == 0, done.stderr
    assert all(stack.started_at(s) != before[s] for s in services), "restarted"


async def _state(clusters: Clusters, names: dict[str, str]) -> dict[str, Any]:
    """Per RKCP: ready, kubeconfig Secret present; per site: the TCP names there."""
    listed = await clusters.mgmt.list(resources.REMOTE_KAMAJI_CONTROL_PLANE, namespace="default")
    rkcps = {o["metadata"]["name"]: o for o in listed.items}
    secrets = {
        o["metadata"]["name"] for o in (await clusters.mgmt.list(resources.SECRET, namespace="default")).items
    }
    tcps = {}
    for site, client in clusters.sites.items():
        at_site = await client.list(resources.TENANT_CONTROL_PLANE, namespace=NAMESPACE)
        tcps[site] = sorted(o["metadata"]["name"] for o in at_site.items)
    return {
        "ready": sorted(n for n in names if ((rkcps.get(n) or {}).get("status") or {}).get("ready") is True),
        "secrets": sorted(n for n in names if f"{n}-kubeconfig" in secrets),
        "rkcps": sorted(n for n in names if n in rkcps),
        "tcps": tcps,
    }


async def test_an_agent_and_the_hub_restarted_mid_workload_lose_nothing(stack: Stack, tmp_path: Path) -> None:
    names = {f"restart-{site}-{i}": site for site in SITES for i in range(4)}
    with engine.timed("restarts mid-workload"):
        await _workload_with_restarts(stack, tmp_path, names)


async def _workload_with_restarts(stack: Stack, tmp_path: Path, names: dict[str, str]) -> None:
    by_site = {site: sorted(n for n, s in names.items() if s == site) for site in SITES}
    async with _clusters(stack, tmp_path) as clusters:
        for site in SITES:
            await _grant(clusters, site)
        first, second = list(names)[::2], list(names)[1::2]
        await asyncio.gather(*(_place(clusters, names[n], n) for n in first))
        restarting = asyncio.gather(_restart(stack, "agent-site-a", kill=True), _restart(stack, "hub"))
        await asyncio.gather(*(_place(clusters, names[n], n) for n in second))
        await restarting
        everything = sorted(names)
        await helpers.eventually(
            lambda: _state(clusters, names),
            lambda s: s["ready"] == s["secrets"] == everything and s["tcps"] == by_site,
            within=180,
            every=0.5,
            what="every RKCP Ready with its kubeconfig Secret, each TCP once at its own site",
        )
        for name in names:
            await clusters.mgmt.delete(resources.REMOTE_KAMAJI_CONTROL_PLANE, name, namespace="default")
        await _restart(stack, "agent-site-b")
        await helpers.eventually(
            lambda: _state(clusters, names),
            lambda s: s["rkcps"] == [] and s["tcps"] == {site: [] for site in SITES},
            within=180,
            every=0.5,
            what="every RKCP gone and its TCP deleted at its site",
        )
        for name in names:
            await clusters.mgmt.delete(resources.CLUSTER, name, namespace="default")


def test_down_leaves_no_container_volume_or_network(stack: Stack) -> None:
    assert any(engine.leftovers(engine.PROJECT).values()), "the stack is up before it is taken down"
    with engine.timed("compose down -v"):
        stack.stop()  # docker compose down --volumes
    assert engine.leftovers(engine.PROJECT) == {"containers": [], "volumes": [], "networks": []}
