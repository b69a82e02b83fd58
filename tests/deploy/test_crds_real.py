"""Our CRDs on a real kube-apiserver: accepted as written, defaulting as the models do, printed
by the real kubectl with their columns, and scaled through the scale subresource.

The emulator's tests of the same files are in tests/hub/api/test_crds.py; this is the ground truth
they stand for. The CEL rules have their own file, test_crds_real_cel.py.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from common import kube as ckube
from common.kube import resources
from hub.api import rkcp as api
from sandbox import realkube
from tests import helpers
from tests.deploy import realcrds

RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
ACCEPTED = {"NamesAccepted": "True", "Established": "True"}
"""Every condition of an accepted CRD: no NonStructuralSchema, no KubernetesAPIApprovalPolicyConformant."""


@pytest.fixture(scope="module")
def namespace(real_cluster: realkube.Cluster) -> Iterator[str]:
    """Our CRDs installed on the session's real cluster, and a namespace of this module's own."""
    name = "crds-" + uuid.uuid4().hex[:8]
    asyncio.run(realcrds.prepare(real_cluster.kubeconfig, namespace=name))
    yield name
    asyncio.run(realcrds.forget(real_cluster.kubeconfig, namespace=name))


@pytest.fixture(scope="module")
def kubectl(
    real_binaries: realkube.Binaries, real_cluster: realkube.Cluster, tmp_path_factory: pytest.TempPathFactory
) -> realcrds.Kubectl:
    return realcrds.Kubectl(
        real_binaries.kubectl, real_cluster.kubeconfig, tmp_path_factory.mktemp("kubectl")
    )


def rkcp(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"site": "site-a", "version": "v1.31.0", **spec},
    }


# Accepted ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", realcrds.OURS, ids=lambda p: p.name)
async def test_our_crd_is_accepted_as_written(real_kube: ckube.Kube, namespace: str, path: Path) -> None:
    # Accepted at all means every CEL rule compiled and fits the cost budget: the API server
    # refuses a CRD (422) whose rule does not.
    crd = realcrds.load(path)
    stored = await real_kube.get(realcrds.CRD, crd["metadata"]["name"])
    assert realcrds.conditions(stored) == ACCEPTED
    assert stored["status"]["acceptedNames"] == crd["spec"]["names"]
    # Nothing dropped or rewritten: the schema, columns and subresources are served as generated.
    assert stored["spec"]["versions"] == crd["spec"]["versions"]


THIRD_PARTY = [helpers.KAMAJI_CRD, *realcrds.SANDBOX]


@pytest.mark.parametrize("path", THIRD_PARTY, ids=lambda p: p.name)
async def test_a_third_party_crd_we_install_is_accepted(real_kube: ckube.Kube, path: Path) -> None:
    # Kamaji's real TenantControlPlane (its CEL rules included) and the sandbox's compact CRDs,
    # each in a group of this test's own (realcrds.renamed says why). A missing file (Kamaji's
    # is in ../shared) fails here naming it.
    crd = realcrds.load(path)
    copied = realcrds.renamed(crd, f"t{uuid.uuid4().hex[:8]}.{crd['spec']['group']}")
    try:
        stored = await realcrds.install(real_kube, copied)
        assert realcrds.conditions(stored) == ACCEPTED
        assert stored["spec"]["versions"] == crd["spec"]["versions"]
    finally:
        await real_kube.delete(realcrds.CRD, copied["metadata"]["name"])


async def test_a_valid_rkcp_gets_the_models_defaults(real_kube: ckube.Kube, namespace: str) -> None:
    body = rkcp("defaults", namespace)
    created = await real_kube.create(RKCP, body, namespace=namespace)
    assert created["spec"] == {
        **body["spec"],
        "replicas": 2,
        "network": {"serviceType": "LoadBalancer"},
        "deletionPolicy": "Delete",
        "kubeconfigSecretKey": "admin.conf",
        "kubelet": {"preferredAddressTypes": ["InternalIP", "ExternalIP", "Hostname"], "cgroupfs": "systemd"},
    }
    assert api.RemoteKamajiControlPlane.parse(created).spec == api.RemoteKamajiControlPlane.parse(body).spec


# Printer columns -----------------------------------------------------------------------------


def header(crd: dict[str, Any]) -> list[str]:
    """The header kubectl prints for ``crd``: NAME, then each printer column's name in capitals
    (no column has a priority, so all of them are printed without ``-o wide``)."""
    (version,) = crd["spec"]["versions"]
    return ["NAME", *(column["name"].upper() for column in version["additionalPrinterColumns"])]


def cells(line: str) -> list[str]:
    """A line of kubectl's table cut where its columns are: three spaces or more apart."""
    return [cell.strip() for cell in re.split(r"\s{3,}", line.strip())]


def columns(lines: list[str], names: list[str]) -> list[list[str]]:
    """Every row under the header ``lines[0]``, cut at the header's column starts (an empty
    cell is blank, so splitting on spaces would shift the row)."""
    starts: list[int] = []
    for name in names:  # left to right: "AGE" is also the start of "AGENT VERSION"
        starts.append(lines[0].index(name, starts[-1] + 1 if starts else 0))
    ends = [*starts[1:], None]
    return [[line[a:b].strip() for a, b in zip(starts, ends, strict=True)] for line in lines[1:]]


def names_of(path: Path) -> list[str]:
    """How kubectl can name the CRD's resource: plural, singular and short names."""
    names = realcrds.load(path)["spec"]["names"]
    return [names["plural"], names["singular"], *names.get("shortNames", [])]


async def printed(kubectl: realcrds.Kubectl, path: Path, *objects: str, namespace: str) -> list[list[str]]:
    """The rows kubectl prints for ``objects`` of the CRD in ``path``, after checking that the
    header is the CRD's columns whichever way the resource is named."""
    expected = header(realcrds.load(path))
    for resource in names_of(path):
        lines = (await kubectl.ok("get", resource, *objects, "-n", namespace)).splitlines()
        assert cells(lines[0]) == expected, resource
    return columns(lines, expected)


async def test_kubectl_prints_the_rkcp_columns(
    real_kube: ckube.Kube, namespace: str, kubectl: realcrds.Kubectl
) -> None:
    path = realcrds.crd_file("_remotekamajicontrolplanes.yaml")
    labelled = rkcp("cp1", namespace)
    labelled["metadata"]["labels"] = {"cluster.x-k8s.io/cluster-name": "c1"}
    await real_kube.create(RKCP, labelled, namespace=namespace)
    await real_kube.create(
        RKCP, rkcp("cp2", namespace, site="site-b", version="v1.30.1"), namespace=namespace
    )
    counts = {"replicas": 3, "readyReplicas": 2, "updatedReplicas": 1, "unavailableReplicas": 1}
    status = {"status": {"initialized": True, "ready": True, **counts}}
    await real_kube.patch(RKCP, "cp1", status, namespace=namespace, subresource="status")
    expected = header(realcrds.load(path))
    rows = await printed(kubectl, path, "cp1", "cp2", namespace=namespace)
    assert expected == ["NAME", "CLUSTER", "INITIALIZED", "API SERVER AVAILABLE", "REPLICAS", "READY",
                        "UPDATED", "UNAVAILABLE", "AGE", "VERSION", "SITE"]  # fmt: skip
    without_age = [row[:8] + row[9:] for row in rows]
    assert without_age == [
        ["cp1", "c1", "true", "true", "3", "2", "1", "1", "v1.31.0", "site-a"],
        ["cp2", "", "", "", "", "", "", "", "v1.30.1", "site-b"],
    ]


async def test_kubectl_prints_the_template_columns(namespace: str, kubectl: realcrds.Kubectl) -> None:
    path = realcrds.crd_file("_remotekamajicontrolplanetemplates.yaml")
    template = {"apiVersion": api.API_VERSION, "kind": f"{api.KIND}Template", "metadata": {"name": "t1"},
                "spec": {"template": {"spec": {"site": "site-a"}}}}  # fmt: skip
    await kubectl.ok("create", "-n", namespace, "-f", "-", stdin=json.dumps(template))
    assert header(realcrds.load(path)) == ["NAME", "SITE", "AGE"]
    [row] = await printed(kubectl, path, "t1", namespace=namespace)
    assert row[:2] == ["t1", "site-a"]


async def test_kubectl_prints_the_site_columns(
    real_kube: ckube.Kube, namespace: str, kubectl: realcrds.Kubectl
) -> None:
    path = realcrds.crd_file("_sites.yaml")
    site = f"site-{namespace}"  # cluster-scoped: named after this module's namespace
    await real_kube.create(
        resources.SITE,
        {"apiVersion": "kamaji-broker.io/v1alpha1", "kind": "Site", "metadata": {"name": site}},
    )
    try:
        status = {"connected": True, "lastHeartbeatTime": "2026-11-30T12:00:00Z", "backlog": 3,
                  "controlPlanes": 2, "agentVersion": "0.1.0"}  # fmt: skip
        await real_kube.patch(resources.SITE, site, {"status": status}, subresource="status")
        [row] = await printed(kubectl, path, site, namespace=namespace)
    finally:
        await real_kube.delete(resources.SITE, site)
    assert header(realcrds.load(path)) == ["NAME", "CONNECTED", "HEARTBEAT", "BACKLOG", "CONTROL PLANES",
                                           "AGENT VERSION", "AGE"]  # fmt: skip
    assert row[:2] + row[3:6] == [site, "true", "3", "2", "0.1.0"]


# Scale subresource ---------------------------------------------------------------------------


async def test_kubectl_scale_sets_spec_replicas_through_the_scale_subresource(
    real_kube: ckube.Kube, namespace: str, kubectl: realcrds.Kubectl
) -> None:
    await real_kube.create(RKCP, rkcp("scaled", namespace), namespace=namespace)
    scale = json.loads(
        await kubectl.ok("get", "rkcp", "scaled", "-n", namespace, "--subresource=scale", "-o", "json")
    )
    # Before the hub writes any status, the scale reads status.replicas as 0 and no selector.
    assert (scale["kind"], scale["spec"], scale["status"]) == ("Scale", {"replicas": 2}, {"replicas": 0})
    selector = "kamaji.clastix.io/name=scaled"
    status = {"status": {"replicas": 2, "selector": selector}}
    await real_kube.patch(RKCP, "scaled", status, namespace=namespace, subresource="status")

    out = await kubectl.ok("scale", "rkcp/scaled", "--replicas=5", "-n", namespace)
    assert out.strip() == f"{api.KIND.lower()}.{api.NAMES.group}/scaled scaled"
    assert (await real_kube.get(RKCP, "scaled", namespace=namespace))["spec"]["replicas"] == 5
    scale = json.loads(
        await kubectl.ok("get", "rkcp", "scaled", "-n", namespace, "--subresource=scale", "-o", "json")
    )
    assert (scale["spec"], scale["status"]) == ({"replicas": 5}, {"replicas": 2, "selector": selector})
    # kubectl's precondition is checked against the scale's spec.replicas: a stale one refuses.
    stale = await kubectl.run("scale", "rkcp/scaled", "--current-replicas=2", "--replicas=1", "-n", namespace)
    assert stale.returncode == 1 and "Expected replicas to be 2, was 5" in stale.err, stale.err
    assert (await real_kube.get(RKCP, "scaled", namespace=namespace))["spec"]["replicas"] == 5
