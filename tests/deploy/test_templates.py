"""deploy/templates/ read as clusterctl reads them: the variables it lists, the substitution it does
(``sandbox.templating``, clusterctl's rules), and the result applied to an API server carrying our
CRDs and CAPI's, which must accept every object as it is."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from common import kube as ckube
from common.kube import resources
from hub.api import crds as crdgen
from hub.api import rkcp as api
from hub.api import template as template_api
from sandbox import crds, kubeapi, templating
from sandbox.capi import controller
from sandbox.templating import Variable
from tests.deploy import manifests as m

TEMPLATES = m.DEPLOY / "templates"
CLUSTER_TEMPLATE = TEMPLATES / "cluster-template.yaml"
TOPOLOGY_TEMPLATE = TEMPLATES / "cluster-template-topology.yaml"
CLUSTER_CLASS = TEMPLATES / "clusterclass-kamaji-broker.yaml"
NS = "team-a"

# What `clusterctl generate cluster my-cluster -n team-a --kubernetes-version v1.31.0` sets, plus
# the provider's own variable the user exports.
GIVEN = {
    "CLUSTER_NAME": "my-cluster",
    "NAMESPACE": NS,
    "KUBERNETES_VERSION": "v1.31.0",
    "CONTROL_PLANE_MACHINE_COUNT": "1",
    "KAMAJI_BROKER_SITE": "site-a",
}
NETWORK_VARIABLES = [
    Variable("API_SERVER_PORT", False, "6443"),
    Variable("POD_CIDR", False, "10.244.0.0/16"),
    Variable("SERVICE_CIDR", False, "10.96.0.0/16"),
    Variable("SERVICE_DOMAIN", False, "cluster.local"),
]


def render(path: Path, values: dict[str, str]) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(templating.substitute(path.read_text(), values)) if d]


@pytest.fixture
async def mgmt(tmp_path: Path) -> AsyncIterator[ckube.Kube]:
    server = kubeapi.Server(name="mgmt")
    await server.start(port=0)
    ours = m.DEPLOY / "crds"
    server.apply_crd_files(
        [ours / crdgen.FILENAME, ours / crdgen.TEMPLATE_FILENAME, crds.CLUSTER, *crds.TOPOLOGY]
    )
    api_client = await ckube.api_client_from_kubeconfig(server.write_kubeconfig(tmp_path / "kubeconfig"))
    k = ckube.Kube(api_client)
    await k.create(resources.NAMESPACE, {"metadata": {"name": NS}})
    yield k
    await api_client.close()
    await server.stop()


async def _apply(k: ckube.Kube, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [await k.create(controller.resource_of(d), d, namespace=NS) for d in docs]


# Variables, as `clusterctl generate cluster --list-variables` shows them ---------------------


def test_cluster_template_variables() -> None:
    assert templating.variables(CLUSTER_TEMPLATE.read_text()) == sorted(
        [
            Variable("CLUSTER_NAME", True),
            Variable("CONTROL_PLANE_MACHINE_COUNT", False, "2"),
            Variable("KAMAJI_BROKER_SERVICE_TYPE", False, "LoadBalancer"),
            Variable("KAMAJI_BROKER_SITE", True),
            Variable("KAMAJI_BROKER_TARGET_NAMESPACE", False, "${NAMESPACE}"),
            Variable("KUBERNETES_VERSION", True),
            Variable("NAMESPACE", True),
            *NETWORK_VARIABLES,
        ],
        key=lambda v: v.name,
    )


def test_topology_and_class_variables() -> None:
    topology = {v.name: v for v in templating.variables(TOPOLOGY_TEMPLATE.read_text())}
    assert {n for n, v in topology.items() if v.required} == {
        "CLUSTER_NAME",
        "KAMAJI_BROKER_SITE",
        "KUBERNETES_VERSION",
        "NAMESPACE",
    }
    assert templating.variables(CLUSTER_CLASS.read_text()) == [
        Variable("KAMAJI_BROKER_SERVICE_TYPE", False, "LoadBalancer"),
        Variable("KAMAJI_BROKER_TARGET_NAMESPACE", False, "${NAMESPACE}"),
        Variable("NAMESPACE", True),
    ]


def test_a_missing_site_is_named_as_clusterctl_names_it() -> None:
    values = {k: v for k, v in GIVEN.items() if k != "KAMAJI_BROKER_SITE"}
    with pytest.raises(templating.MissingVariables, match=r"value for variables \[KAMAJI_BROKER_SITE\]"):
        templating.substitute(CLUSTER_TEMPLATE.read_text(), values)


# Substituted and applied -------------------------------------------------------------------------


async def test_the_cluster_template_is_accepted_as_rendered(mgmt: ckube.Kube) -> None:
    docs = render(CLUSTER_TEMPLATE, GIVEN)
    assert [d["kind"] for d in docs] == ["Cluster", "RemoteKamajiControlPlane"]
    cluster, rkcp = await _apply(mgmt, docs)
    assert cluster["spec"]["controlPlaneRef"]["name"] == rkcp["metadata"]["name"] == "my-cluster"
    assert cluster["spec"]["clusterNetwork"]["apiServerPort"] == 6443
    spec = api.RemoteKamajiControlPlane.parse(rkcp).spec
    assert (spec.site, spec.version, spec.replicas) == ("site-a", "v1.31.0", 1)
    assert spec.target_namespace == NS  # ${KAMAJI_BROKER_TARGET_NAMESPACE:=${NAMESPACE}}
    assert rkcp["metadata"]["labels"] == {"cluster.x-k8s.io/cluster-name": "my-cluster"}


async def test_the_cluster_template_takes_every_variable(mgmt: ckube.Kube) -> None:
    values = {
        **GIVEN,
        "KAMAJI_BROKER_TARGET_NAMESPACE": "tenants",
        "KAMAJI_BROKER_SERVICE_TYPE": "NodePort",
        "API_SERVER_PORT": "8443",
        "SERVICE_CIDR": "10.128.0.0/12",
        "POD_CIDR": "10.64.0.0/16",
        "SERVICE_DOMAIN": "example.internal",
    }
    cluster, rkcp = await _apply(mgmt, render(CLUSTER_TEMPLATE, values))
    network = cluster["spec"]["clusterNetwork"]
    assert (network["apiServerPort"], network["services"]["cidrBlocks"], network["serviceDomain"]) == (
        8443,
        ["10.128.0.0/12"],
        "example.internal",
    )
    assert (rkcp["spec"]["targetNamespace"], rkcp["spec"]["network"]["serviceType"]) == (
        "tenants",
        "NodePort",
    )


async def test_the_class_and_a_cluster_of_it_are_accepted(mgmt: ckube.Kube) -> None:
    made = await _apply(mgmt, render(CLUSTER_CLASS, {"NAMESPACE": NS}))
    assert [d["kind"] for d in made] == ["ClusterClass", template_api.KIND, "DockerClusterTemplate"]
    cluster_class, template, _ = made
    ref = cluster_class["spec"]["controlPlane"]["ref"]
    assert (ref["apiVersion"], ref["kind"], ref["name"]) == (
        template_api.API_VERSION,
        template_api.KIND,
        template["metadata"]["name"],
    )
    # The class's targetNamespace default: ${KAMAJI_BROKER_TARGET_NAMESPACE:=${NAMESPACE}}.
    target = next(v for v in cluster_class["spec"]["variables"] if v["name"] == "targetNamespace")
    assert target["schema"]["openAPIV3Schema"]["default"] == NS
    assert template["spec"]["template"]["spec"]["network"] == {"serviceType": "LoadBalancer"}
    parsed = template_api.RemoteKamajiControlPlaneTemplate.parse(template)
    assert parsed.spec.template.spec.to_dict()["addons"] == {"coreDNS": {}, "kubeProxy": {}}
    [cluster] = await _apply(mgmt, render(TOPOLOGY_TEMPLATE, GIVEN))
    topology = cluster["spec"]["topology"]
    assert (topology["class"], topology["version"], topology["controlPlane"]["replicas"]) == (
        cluster_class["metadata"]["name"],
        "v1.31.0",
        1,
    )
    assert {v["name"]: v["value"] for v in topology["variables"]} == {"site": "site-a", "targetNamespace": NS}


def test_every_template_file_is_tested_here() -> None:
    assert sorted(p.name for p in TEMPLATES.iterdir()) == sorted(
        p.name for p in (CLUSTER_TEMPLATE, TOPOLOGY_TEMPLATE, CLUSTER_CLASS)
    )
