"""The RemoteKamajiControlPlaneTemplate: its model is the RKCP's spec less the topology's and one
Cluster's fields, its CRD is generated, structural and CAPI-labelled, and an API server carrying
it accepts a template with a full spec and refuses a bad one naming the field.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from common import kube as ckube
from common.kube import errors as kerrors
from common.kube.resources import Resource
from hub.api import crds, openapi
from hub.api import rkcp as api
from hub.api import template as template_api
from sandbox import kubeapi
from tests.hub import parity
from tests.hub.api.test_crds import CRD_FILE, _structural_violations

TEMPLATE_FILE = CRD_FILE.parent / crds.TEMPLATE_FILENAME
TEMPLATE = Resource(
    "controlplane.cluster.x-k8s.io", "v1alpha1", "remotekamajicontrolplanetemplates", template_api.KIND
)


def template(name: str = "tpl", *, metadata: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    resource: dict[str, Any] = {"spec": {"site": "site-a", **spec}}
    if metadata is not None:
        resource["metadata"] = metadata
    return {
        "apiVersion": template_api.API_VERSION,
        "kind": template_api.KIND,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"template": resource},
    }


@pytest.fixture
async def kube(tmp_path: Path) -> AsyncIterator[ckube.Kube]:
    server = kubeapi.Server(name="mgmt")
    await server.start(port=0)
    server.apply_crd_files([CRD_FILE, TEMPLATE_FILE])
    api_client = await ckube.api_client_from_kubeconfig(server.write_kubeconfig(tmp_path / "kubeconfig"))
    yield ckube.Kube(api_client)
    await api_client.close()
    await server.stop()


# The model ------------------------------------------------------------------------------------


def _spec_schemas() -> tuple[dict[str, Any], dict[str, Any]]:
    rkcp = openapi.of(api.Spec, path="spec")
    crd = yaml.safe_load(TEMPLATE_FILE.read_text())
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return rkcp, root["properties"]["spec"]["properties"]["template"]["properties"]["spec"]


def test_the_template_spec_is_the_rkcp_spec_less_what_a_template_must_not_hold() -> None:
    rkcp, spec = _spec_schemas()
    left_out = {"version", "replicas", "controlPlaneEndpoint", "tenantControlPlaneName"}
    assert set(rkcp["properties"]) - set(spec["properties"]) == left_out
    assert set(spec["properties"]) <= set(rkcp["properties"])
    # Each field the template has is the RKCP's field exactly: schema, description, rules.
    for name, schema in spec["properties"].items():
        assert schema == rkcp["properties"][name], name
    # Nothing required: site comes from a ClusterClass patch or the template, version from the topology.
    assert rkcp["required"] == ["site", "version"]
    assert "required" not in spec


def test_the_rules_about_fields_left_out_are_left_out() -> None:
    rkcp, spec = _spec_schemas()
    kept = [r["message"] for r in spec["x-kubernetes-validations"]]
    assert kept == [
        "targetNamespace cannot be added, changed or removed after creation",
        "dataStoreSchema cannot be removed",
        "dataStoreUsername cannot be removed",
        "site cannot be removed",
    ]
    dropped = [r for r in rkcp["x-kubernetes-validations"] if r["message"] not in kept]
    assert [r["message"] for r in dropped] == [
        "tenantControlPlaneName cannot be added, changed or removed after creation"
    ]


def test_a_field_added_to_the_rkcp_spec_reaches_the_template() -> None:
    # The template's fields are derived from api.Spec, not listed: every RKCP field is either in
    # the template or in one of the two named exclusions.
    names = set(api.Spec.model_fields)
    assert names == set(template_api.Fields.model_fields) | template_api.EXCLUDED
    assert not template_api.EXCLUDED & set(template_api.Fields.model_fields)


def test_the_model_parses_what_the_crd_stores() -> None:
    body = template(metadata={"labels": {"team": "a"}}, targetNamespace="tenants", registry="r.example.com")
    parsed = template_api.RemoteKamajiControlPlaneTemplate.parse(body)
    assert parsed.spec.template.spec.to_dict()["site"] == "site-a"
    assert parsed.spec.template.metadata is not None
    assert parsed.spec.template.metadata.labels == {"team": "a"}
    unsited = template_api.RemoteKamajiControlPlaneTemplate.parse(template(site=None))
    assert "site" not in unsited.spec.template.spec.to_dict()


# The CRD --------------------------------------------------------------------------------------


def test_committed_template_crd_is_what_the_models_generate() -> None:
    assert TEMPLATE_FILE.read_text() == crds.render_template(), "run: python -m hub.api.crds"


def test_check_mode_covers_the_template(tmp_path: Path) -> None:
    target = tmp_path / crds.FILENAME
    assert crds.main(["--output", str(target)]) == 0
    written = tmp_path / crds.TEMPLATE_FILENAME
    assert written.read_text() == crds.render_template()
    written.write_text(written.read_text().replace("rkcpt", "rkcpx"))
    assert crds.main(["--check", "--output", str(target)]) == 1


def test_names_labels_and_no_subresources() -> None:
    crd = yaml.safe_load(TEMPLATE_FILE.read_text())
    # CAPI's naming rule: <ControlPlane>Template, and the CRD name CalculateCRDName gives.
    assert crd["metadata"]["name"] == "remotekamajicontrolplanetemplates.controlplane.cluster.x-k8s.io"
    assert crd["metadata"]["labels"] == {
        "cluster.x-k8s.io/v1beta1": "v1alpha1",
        "cluster.x-k8s.io/v1beta2": "v1alpha1",
    }
    names = crd["spec"]["names"]
    assert (names["kind"], names["listKind"], names["categories"]) == (
        "RemoteKamajiControlPlaneTemplate",
        "RemoteKamajiControlPlaneTemplateList",
        ["cluster-api"],
    )
    assert crd["spec"]["scope"] == "Namespaced"
    (version,) = crd["spec"]["versions"]
    assert "subresources" not in version
    root = version["schema"]["openAPIV3Schema"]
    assert root["required"] == ["spec"]
    assert root["properties"]["spec"]["required"] == ["template"]
    assert root["properties"]["spec"]["properties"]["template"]["required"] == ["spec"]
    metadata = root["properties"]["spec"]["properties"]["template"]["properties"]["metadata"]
    assert set(metadata["properties"]) == {"labels", "annotations"}


def test_template_schema_is_structural() -> None:
    crd = yaml.safe_load(TEMPLATE_FILE.read_text())
    assert "$ref" not in TEMPLATE_FILE.read_text() and "anyOf" not in TEMPLATE_FILE.read_text()
    assert _structural_violations(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]) == []


# On an API server -------------------------------------------------------------------------------


FULL = {
    "targetNamespace": "tenants",
    "dataStoreName": "etcd-a",
    "network": {"serviceType": "NodePort", "certSANs": ["cp.example.com"], "serviceLabels": {"team": "a"}},
    "addons": {"coreDNS": {}, "kubeProxy": {}, "konnectivity": {"server": {"port": 8132}}},
    "kubelet": {"preferredAddressTypes": ["Hostname"], "cgroupfs": "cgroupfs"},
    "admissionControllers": ["NamespaceLifecycle", "ServiceAccount"],
    "kubeconfigSecretKey": "super-admin.conf",
    "deletionPolicy": "Orphan",
    "siteUnavailableDeletionTimeout": "1h30m",
}


async def test_a_template_with_a_full_spec_is_accepted(kube: ckube.Kube) -> None:
    everything = parity.ROWS[-1].kcp  # the parity table's everything-at-once row
    spec = {**FULL, **{k: v for k, v in everything.items() if k not in ("version", "replicas")}}
    body = template(metadata={"labels": {"team": "a"}, "annotations": {"note": "x"}}, **spec)
    created = await kube.create(TEMPLATE, body, namespace="default")
    for key, value in body["spec"]["template"]["spec"].items():
        kept = created["spec"]["template"]["spec"][key]
        assert kept == value or (isinstance(value, dict) and kept == {**kept, **value}), key
    assert created["spec"]["template"]["metadata"] == body["spec"]["template"]["metadata"]
    parsed = template_api.RemoteKamajiControlPlaneTemplate.parse(created)
    assert parsed.spec.template.spec.to_dict()["deletionPolicy"] == "Orphan"


async def test_a_template_without_a_site_gets_the_defaults(kube: ckube.Kube) -> None:
    body = template()
    del body["spec"]["template"]["spec"]["site"]
    created = await kube.create(TEMPLATE, body, namespace="default")
    spec = created["spec"]["template"]["spec"]
    assert spec["network"] == {"serviceType": "LoadBalancer"}
    assert spec["deletionPolicy"] == "Delete"
    assert "replicas" not in spec and "version" not in spec


@pytest.mark.parametrize(
    ("override", "field"),
    [
        pytest.param({"site": "Site-A"}, "spec.template.spec.site", id="site"),
        pytest.param({"targetNamespace": "a_b"}, "spec.template.spec.targetNamespace", id="namespace"),
        # kube-apiserver adds "<nil>": some CEL rules were not checked, the object being invalid.
        pytest.param({"deletionPolicy": "Remove"}, "spec.template.spec.deletionPolicy,<nil>", id="policy"),
    ],
)
async def test_a_bad_template_is_refused_naming_the_field(
    kube: ckube.Kube, override: dict[str, Any], field: str
) -> None:
    with pytest.raises(kerrors.Invalid) as info:
        await kube.create(TEMPLATE, template(**override), namespace="default")
    assert [cause["field"] for cause in info.value.details["causes"]] == field.split(",")
