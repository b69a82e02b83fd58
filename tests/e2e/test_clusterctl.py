"""clusterctl as users run it, against Cluster API's own controllers and the real Kamaji
operator: ``clusterctl init --control-plane kamaji-broker`` (the system's set-up) installed the
providers from file:// repositories; ``clusterctl generate cluster`` from the release's
templates, applied with kubectl, reaches ``Available``; ``clusterctl describe cluster`` shows the
RKCP; ``clusterctl upgrade plan`` reads the release's metadata; the ClusterClass through Cluster
API's topology controller, and a version upgrade of its topology reaching the site. What
clusterctl printed is in DIR/clusterctl/clusterctl.log."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
import yaml

from common.kube import resources
from sandbox.capi import infra
from sandbox.launcher import System
from tests import helpers, systems
from tests.e2e.clusterctl_support import (
    CLUSTER,
    NS,
    available,
    conditions,
    generate,
    kubectl_apply,
    site_version,
)

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

SITE = "site-a"
RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
TCP = resources.TENANT_CONTROL_PLANE


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(real_capi: object, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[System]:
    directory = tmp_path_factory.mktemp("clusterctl") / "sandbox"
    async with systems.running(
        directory, sites=(SITE,), base=(), kubernetes="real", kamaji="real", capi="real"
    ) as topology:
        yield topology


def tree_conditions(lines: list[str], row: int) -> dict[str, tuple[str, str]]:
    """The conditions ``clusterctl describe --show-conditions all`` lists under the object of line
    ``row``: type → (status, reason)."""
    found: dict[str, tuple[str, str]] = {}
    for line in lines[row + 1 :]:
        parts = [p for p in line.split() if p != "│"]
        if (
            len(parts) < 3
            or not parts[0].startswith(("├─", "└─"))
            or parts[1] not in ("True", "False", "Unknown")
        ):
            break
        found[parts[0][2:]] = (parts[1], parts[2])
    return found


@pytest.mark.timeout(300)  # the module's world is set up in it: clusters, Kamaji, clusterctl init
async def test_init_installed_the_providers_and_upgrade_plan_reads_the_release(world: System) -> None:
    log = world.clusterctl.log.read_text()
    assert 'Installing provider="control-plane-kamaji-broker" version="v0.1.0"' in log
    assert 'Installing provider="cluster-api" version="v1.14.2"' in log
    plan = await world.clusterctl.run("upgrade", "plan", kubeconfig=world.kubeconfig("mgmt"))
    assert "Latest release available for the v1beta2 Cluster API contract version" in plan
    [row] = [line for line in plan.splitlines() if line.startswith("control-plane-kamaji-broker")]
    assert row.split()[:4] == [
        "control-plane-kamaji-broker",
        "kamaji-broker-system",
        "ControlPlaneProvider",
        "v0.1.0",
    ]
    assert row.split()[4:] == ["Already", "up", "to", "date"]


async def test_a_generated_cluster_reaches_available_and_describe_shows_it(world: System) -> None:
    docs = await generate(world, SITE, "gen1", "cluster-template.yaml")
    by_kind = {d["kind"]: d for d in docs}
    assert set(by_kind) == {"Cluster", "RemoteKamajiControlPlane"}
    assert by_kind["RemoteKamajiControlPlane"]["spec"]["version"] == "1.31.0"
    await kubectl_apply(
        world.kubeconfig("mgmt"),
        yaml.safe_dump_all(infra.with_infrastructure(docs, name="gen1", namespace=NS)),
    )
    done = await available(world.mgmt, "gen1")
    assert done["status"]["initialization"] == {
        "infrastructureProvisioned": True,
        "controlPlaneInitialized": True,
    }
    rkcp = await world.mgmt.get(RKCP, "gen1", namespace=NS)
    assert rkcp["status"]["version"] == "v1.31.0"
    described = await world.clusterctl.run(
        "describe", "cluster", "gen1", "--namespace", NS, "--show-conditions", "all",
        kubeconfig=world.kubeconfig("mgmt"),
    )  # fmt: skip
    lines = described.splitlines()
    # The RKCP as CAPI's tree shows a control plane: its version and replica counters, and under
    # it our conditions (their reasons CAPI's where CAPI names them).
    [control_plane] = [line for line in lines if "RemoteKamajiControlPlane default/gen1" in line]
    assert control_plane.split()[-5:] == ["1.31.0", "2/2", "2", "2", "2"], described
    shown = tree_conditions(lines, lines.index(control_plane))
    assert shown["Available"] == ("True", "Available"), described
    assert shown["SiteConnected"] == ("True", "HeartbeatReceived"), described
    assert shown["Ready"] == ("True", "AsExpected"), described
    assert any("StandInCluster" in line and "default/gen1" in line for line in lines), described


async def test_the_clusterclass_through_capis_topology_controller(world: System) -> None:
    release = world.clusterctl.release()
    text = await world.clusterctl.run(
        "generate", "yaml", "--from", str(release / "clusterclass-kamaji-broker.yaml"), env={"NAMESPACE": NS}
    )
    # The class's infrastructure is CAPD's in the shipped file; here the stand-in's, as its comment
    # tells a user to put their own.
    shipped = [d for d in yaml.safe_load_all(text) if d]
    await kubectl_apply(world.kubeconfig("mgmt"), yaml.safe_dump_all(infra.in_class(shipped)))
    docs = await generate(world, SITE, "topo1", "cluster-template-topology.yaml")
    await kubectl_apply(world.kubeconfig("mgmt"), yaml.safe_dump_all(docs))
    done = await available(world.mgmt, "topo1")
    assert conditions(done)["TopologyReconciled"]["status"] == "True"
    ref = done["spec"]["controlPlaneRef"]
    rkcp = await world.mgmt.get(RKCP, ref["name"], namespace=NS)
    [owner] = rkcp["metadata"]["ownerReferences"]
    assert (owner["name"], owner.get("controller")) == ("topo1", True)
    # CAPI writes the topology's version into the control plane with its v.
    assert rkcp["spec"]["site"] == SITE and rkcp["spec"]["version"] == "v1.31.0"
    # An upgrade of the topology: CAPI's topology controller moves the RKCP, the hub the site.
    await world.mgmt.patch(CLUSTER, "topo1", {"spec": {"topology": {"version": "v1.32.0"}}}, namespace=NS)

    await helpers.eventually(
        lambda: site_version(world, SITE, ref["name"]),
        lambda v: v == "v1.32.0",
        within=180,
        every=0.5,
        what="v1.32.0 at the site",
    )
    upgraded = await available(world.mgmt, "topo1")
    assert upgraded["spec"]["topology"]["version"] == "v1.32.0"
