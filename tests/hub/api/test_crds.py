"""The RemoteKamajiControlPlane CRD: generated from hub.api.rkcp, structural, and enforced by an API server.

The committed file must equal what ``hub.api.crds`` renders now (so models and CRD cannot drift);
every node must be structural; and installed into the emulator it must default and refuse exactly
as the models do, serve the status and scale subresources, and print its columns in kubectl.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest
import yaml

from common import kube as ckube
from common.kube import errors as kerrors
from common.kube import resources
from hub import conditions
from hub.api import crds, openapi
from hub.api import rkcp as api
from hub.mapping import tcp
from sandbox import kubeapi
from sandbox.kubeapi.kinds import schema as kube_schema
from tests import helpers
from tests.hub import parity

ROOT = Path(__file__).resolve().parents[3]
CRD_FILE = ROOT / crds.DEFAULT_OUTPUT
RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
KUBECTL = Path("/usr/bin/kubectl")
T0 = dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=dt.UTC)


def rkcp(name: str = "cp1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.KIND,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"site": "site-a", "version": "v1.31.0", **spec},
    }


@pytest.fixture
async def mgmt() -> AsyncIterator[kubeapi.Server]:
    server = kubeapi.Server(name="mgmt", history=200)
    await server.start(port=0)
    server.apply_crd_files([CRD_FILE])
    yield server
    await server.stop()


@pytest.fixture
async def kube(mgmt: kubeapi.Server, tmp_path: Path) -> AsyncIterator[ckube.Kube]:
    api_client = await ckube.api_client_from_kubeconfig(mgmt.write_kubeconfig(tmp_path / "kubeconfig"))
    yield ckube.Kube(api_client)
    await api_client.close()


# Generation ---------------------------------------------------------------------------------


def test_committed_crd_is_what_the_models_generate() -> None:
    assert CRD_FILE.read_text() == crds.render(), "run: python -m hub.api.crds"


def test_check_mode_reports_drift(tmp_path: Path) -> None:
    target = tmp_path / crds.FILENAME
    assert crds.main(["--output", str(target)]) == 0
    assert crds.main(["--check", "--output", str(target)]) == 0
    target.write_text(target.read_text().replace("default: 2", "default: 3"))
    assert crds.main(["--check", "--output", str(target)]) == 1
    assert crds.main(["--check", "--output", str(tmp_path / "absent.yaml")]) == 1


def test_names_labels_columns_subresources() -> None:
    crd = yaml.safe_load(CRD_FILE.read_text())
    assert crd["metadata"]["name"] == "remotekamajicontrolplanes.controlplane.cluster.x-k8s.io"
    assert crd["metadata"]["labels"] == {
        "cluster.x-k8s.io/v1beta1": "v1alpha1",
        "cluster.x-k8s.io/v1beta2": "v1alpha1",
    }
    names = crd["spec"]["names"]
    assert (names["kind"], names["plural"], names["shortNames"]) == (
        "RemoteKamajiControlPlane",
        "remotekamajicontrolplanes",
        ["rkcp"],
    )
    assert crd["spec"]["scope"] == "Namespaced"
    (version,) = crd["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    # CAPI's control-plane columns in KubeadmControlPlane's order, then the site.
    assert [(c["name"], c["jsonPath"]) for c in version["additionalPrinterColumns"]] == [
        ("Cluster", ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"),
        ("Initialized", ".status.initialized"),
        ("API Server Available", ".status.ready"),
        ("Replicas", ".status.replicas"),
        ("Ready", ".status.readyReplicas"),
        ("Updated", ".status.updatedReplicas"),
        ("Unavailable", ".status.unavailableReplicas"),
        ("Age", ".metadata.creationTimestamp"),
        ("Version", ".spec.version"),
        ("Site", ".spec.site"),
    ]
    # The scale subresource as CAPI's contract (ControlPlane: replicas) requires it.
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        },
    }


# Structural schema --------------------------------------------------------------------------


def _nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path or ".", schema
    for key, sub in (schema.get("properties") or {}).items():
        yield from _nodes(sub, f"{path}.{key}")
    if isinstance(schema.get("items"), dict):
        yield from _nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _nodes(schema["additionalProperties"], f"{path}[*]")


def _structural_violations(schema: dict[str, Any]) -> list[str]:
    found = []
    for path, node in _nodes(schema):
        extra = set(node) - openapi.ALLOWED
        if extra:
            found.append(f"{path}: {sorted(extra)}")
        untyped = node.get("x-kubernetes-preserve-unknown-fields") or node.get("x-kubernetes-int-or-string")
        if "type" not in node and not untyped:  # Kubernetes' IntOrString has no type of its own
            found.append(f"{path}: no type")
        if node.get("type") == "object" and not (
            "properties" in node
            or isinstance(node.get("additionalProperties"), dict)
            or node.get("x-kubernetes-preserve-unknown-fields")
            or path == ".metadata"
        ):
            found.append(f"{path}: object with neither properties nor preserve-unknown-fields")
        if node.get("type") == "array" and not isinstance(node.get("items"), dict):
            found.append(f"{path}: array without items")
        if "properties" in node and "additionalProperties" in node:
            found.append(f"{path}: properties next to additionalProperties")
        if node.get("nullable") is False or node.get("default", ...) is None:
            found.append(f"{path}: null default or nullable: false")
        for name in node.get("required") or []:
            if name not in (node.get("properties") or {}):
                found.append(f"{path}: required {name!r} is not a property")
    return found


def test_schema_is_structural() -> None:
    crd = yaml.safe_load(CRD_FILE.read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert "$ref" not in CRD_FILE.read_text()
    assert "anyOf" not in CRD_FILE.read_text()
    assert _structural_violations(schema) == []


def test_schema_defaults_validate_against_their_own_schema() -> None:
    crd = yaml.safe_load(CRD_FILE.read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    bad = []
    for path, node in _nodes(schema):
        if "default" in node:
            value = copy.deepcopy(node["default"])
            # Wrap in an object so the validator's root handling does not apply to the value.
            causes = kube_schema.validate({"v": value}, {"type": "object", "properties": {"v": node}})
            bad += [f"{path}: {cause}" for cause in causes]
    assert bad == []


class _Union(pydantic.BaseModel):
    value: int | str


class _Open(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    known: str | None = None
    anything: dict[str, Any] = pydantic.Field(default_factory=dict)


def test_unions_are_refused_by_the_generator() -> None:
    with pytest.raises(openapi.SchemaError, match=r"\.value: unions are not structural"):
        openapi.schema(_Union.model_json_schema())


def test_free_form_objects_preserve_unknown_fields() -> None:
    schema = openapi.schema(_Open.model_json_schema())
    assert schema == {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "known": {"type": "string"},
            "anything": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }


# On an API server ---------------------------------------------------------------------------


async def test_valid_rkcp_gets_the_defaults(kube: ckube.Kube) -> None:
    created = await kube.create(RKCP, rkcp(), namespace="default")
    spec = created["spec"]
    assert spec["replicas"] == 2
    assert spec["network"] == {"serviceType": "LoadBalancer"}
    assert spec["deletionPolicy"] == "Delete"
    assert spec["kubeconfigSecretKey"] == "admin.conf"
    assert spec["kubelet"] == {
        "preferredAddressTypes": ["InternalIP", "ExternalIP", "Hostname"],
        "cgroupfs": "systemd",
    }
    assert "siteUnavailableDeletionTimeout" not in spec
    # The API server's defaults are the models' defaults: parsing the stored object and
    # parsing the request give the same spec.
    assert api.RemoteKamajiControlPlane.parse(created).spec == api.RemoteKamajiControlPlane.parse(rkcp()).spec


async def test_a_full_spec_round_trips(kube: ckube.Kube) -> None:
    body = rkcp(
        "cp-full",
        targetNamespace="tenants",
        tenantControlPlaneName="tcp-full",
        version="v1.30.2",
        replicas=0,
        dataStoreName="etcd-a",
        network={
            "serviceType": "NodePort",
            "serviceAddress": "10.0.0.10",
            "advertiseAddress": "10.0.0.11",
            "certSANs": ["cp.example.com"],
            "serviceLabels": {"team": "a"},
            "serviceAnnotations": {"lb.example.com/pool": "blue"},
        },
        addons={
            "coreDNS": {},
            "kubeProxy": {"imageTag": "v1.30.2"},
            "konnectivity": {"server": {"port": 8132}},
        },
        kubelet={"preferredAddressTypes": ["Hostname"], "cgroupfs": "cgroupfs", "futureField": {"x": 1}},
        admissionControllers=["NamespaceLifecycle", "ServiceAccount"],
        kubeconfigSecretKey="super-admin.conf",
        controlPlaneEndpoint={"host": "10.0.0.10", "port": 6443},
        deletionPolicy="Orphan",
        siteUnavailableDeletionTimeout="1h30m",
    )
    created = await kube.create(RKCP, body, namespace="default")
    assert created["spec"] == body["spec"]
    model = api.RemoteKamajiControlPlane.parse(created)
    assert model.to_dict()["spec"] == body["spec"]
    assert model.spec.site_unavailable_deletion_timeout_seconds == 5400.0


NOT_CHECKED = "<nil>"
"""kube-apiserver's extra cause when a value breaks an enum or a required field of a CRD that has
CEL rules: "some validation rules were not checked because the object was invalid"."""
SCALE_REPLICAS = ".spec.replicas"
"""kube-apiserver's extra cause for a negative ``spec.replicas`` of a kind with a scale
subresource: "should be a non-negative integer"."""

INVALID = [
    pytest.param({"site": "site.a"}, "spec.site", id="site-with-a-dot"),
    pytest.param({"site": "Site-A"}, "spec.site", id="site-upper-case"),
    pytest.param({"replicas": -1}, ["spec.replicas", SCALE_REPLICAS], id="negative-replicas"),
    pytest.param({"version": "latest"}, "spec.version", id="version-latest"),
    pytest.param({"version": "v1.31"}, "spec.version", id="version-two-parts"),
    pytest.param(
        {"deletionPolicy": "Remove"}, ["spec.deletionPolicy", NOT_CHECKED], id="bad-deletion-policy"
    ),
    pytest.param({"tenantControlPlaneName": "1cp"}, "spec.tenantControlPlaneName", id="tcp-name-not-dns1035"),
    pytest.param({"targetNamespace": "a_b"}, "spec.targetNamespace", id="namespace-not-a-label"),
    pytest.param(
        {"siteUnavailableDeletionTimeout": "10 minutes"}, "spec.siteUnavailableDeletionTimeout", id="duration"
    ),
    pytest.param(
        {"network": {"serviceType": "Ingress"}}, ["spec.network.serviceType", NOT_CHECKED], id="service-type"
    ),
    pytest.param(
        {"kubelet": {"preferredAddressTypes": []}},
        "spec.kubelet.preferredAddressTypes",
        id="no-address-types",
    ),
    pytest.param(
        {"kubelet": {"cgroupfs": "cgroupv2"}}, ["spec.kubelet.cgroupfs", NOT_CHECKED], id="cgroup-driver"
    ),
    pytest.param(
        {"admissionControllers": ["Bogus"]},
        ["spec.admissionControllers[0]", NOT_CHECKED],
        id="admission-controller",
    ),
    pytest.param(
        {"controlPlaneEndpoint": {"host": "h", "port": 70000}}, "spec.controlPlaneEndpoint.port", id="port"
    ),
]


@pytest.mark.parametrize(("override", "field"), INVALID)
async def test_invalid_rkcp_is_refused_naming_the_field(
    kube: ckube.Kube, override: dict[str, Any], field: str | list[str]
) -> None:
    """The causes as kube-apiserver gives them (the emulator is held to it)."""
    expected = [field] if isinstance(field, str) else field
    with pytest.raises(kerrors.Invalid) as info:
        await kube.create(RKCP, rkcp(**override), namespace="default")
    assert info.value.status == 422
    fields = [cause["field"] for cause in info.value.details["causes"]]
    assert fields == expected
    assert expected[0] in info.value.message


@pytest.mark.parametrize(("override", "field"), INVALID)
def test_the_models_refuse_what_the_crd_refuses(override: dict[str, Any], field: str | list[str]) -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        api.RemoteKamajiControlPlane.parse(rkcp(**override))
    locations = [".".join(str(part) for part in error["loc"]) for error in info.value.errors()]
    named = field if isinstance(field, str) else field[0]
    wanted = named.replace("[", ".").replace("]", "")
    assert any(loc == wanted or loc.startswith(wanted + ".") for loc in locations), locations


@pytest.mark.parametrize("row", parity.ROWS, ids=[row.id for row in parity.ROWS])
async def test_every_kamaji_control_plane_field_is_kept(kube: ckube.Kube, row: parity.Row) -> None:
    # A KamajiControlPlane spec moves over unchanged: the CRD keeps (does not prune) each field.
    created = await kube.create(RKCP, rkcp(**row.kcp), namespace="default")
    for key, value in row.kcp.items():
        kept = created["spec"][key]
        assert kept == value or (isinstance(value, dict) and kept == {**kept, **value}), key
    assert (
        api.RemoteKamajiControlPlane.parse(created).to_dict()["spec"]
        == api.RemoteKamajiControlPlane.parse(rkcp(**row.kcp)).to_dict()["spec"]
    )


async def test_a_version_without_the_v_is_taken_and_the_site_gets_it_with_the_v(kube: ckube.Kube) -> None:
    # As a KamajiControlPlane takes it: CAPI compares spec.version and status.version as semantic
    # versions, and the TenantControlPlane always carries the v.
    created = await kube.create(RKCP, rkcp(version="1.31.2"), namespace="default")
    assert created["spec"]["version"] == "1.31.2"
    parsed = api.RemoteKamajiControlPlane.parse(created)
    assert tcp.kubernetes_version(parsed.spec.version) == "v1.31.2"
    for wrong in ("v1.31", "1.31.2-rc.0", "V1.31.2", "vv1.31.2"):
        with pytest.raises(kerrors.Invalid) as info:
            await kube.create(RKCP, rkcp(name="wrong", version=wrong), namespace="default")
        assert [cause["field"] for cause in info.value.details["causes"]] == ["spec.version"], wrong


@pytest.mark.parametrize(
    ("sans", "index"),
    [(["cp1.example.com:6443"], 0), (["203.0.113.7", "[fd00::7]:6443"], 1), (["a b"], 0)],
    ids=["host:port", "[v6]:port", "a space"],
)
async def test_a_cert_san_that_is_no_host_or_ip_is_refused_naming_the_entry(
    kube: ckube.Kube, sans: list[str], index: int
) -> None:
    with pytest.raises(kerrors.Invalid) as info:
        await kube.create(RKCP, rkcp(network={"certSANs": sans}), namespace="default")
    assert [cause["field"] for cause in info.value.details["causes"]] == [f"spec.network.certSANs[{index}]"]


def _rules(node: dict[str, Any]) -> list[tuple[str, str]]:
    return [(r["rule"], r["message"]) for r in node.get("x-kubernetes-validations", [])]


# CEL rules (x-kubernetes-validations) are not evaluated by the emulator (sandbox.kubeapi says
# so), so these tests read the generated CRD; a real API server enforces them.
def test_placement_is_immutable_by_cel_rules() -> None:
    spec = crds.open_api_schema()["properties"]["spec"]
    assert _rules(spec["properties"]["site"]) == [("self == oldSelf", "site is immutable")]
    rules = dict(_rules(spec))
    for field in ("targetNamespace", "tenantControlPlaneName"):
        expression = next(r for r in rules if r.startswith(f"has(self.{field})"))
        assert expression == (
            f"has(self.{field}) == has(oldSelf.{field})"
            f" && (!has(self.{field}) || self.{field} == oldSelf.{field})"
        )
        assert rules[expression] == f"{field} cannot be added, changed or removed after creation"


def test_data_store_and_load_balancer_rules_follow_kamaji() -> None:
    spec = crds.open_api_schema()["properties"]["spec"]
    for field in ("dataStoreSchema", "dataStoreUsername"):
        assert _rules(spec["properties"][field]) == [("self == oldSelf", f"{field} is immutable")]
        assert (f"!has(oldSelf.{field}) || has(self.{field})", f"{field} cannot be removed") in _rules(spec)
    network = spec["properties"]["network"]
    messages = [message for _, message in _rules(network)]
    assert messages == [
        "loadBalancerSourceRanges are supported only with the LoadBalancer service type",
        "loadBalancerClass is supported only with the LoadBalancer service type",
        "allocateLoadBalancerNodePorts is supported only with the LoadBalancer service type",
        "loadBalancerClass cannot be set or unset at runtime",
        "ingress and gateway are mutually exclusive",
    ]
    balancer = network["properties"]["loadBalancerConfig"]["properties"]["loadBalancerClass"]
    assert _rules(balancer) == [("self == oldSelf", "loadBalancerClass is immutable")]


def test_committed_crd_carries_the_rules_and_the_version_pattern() -> None:
    text = CRD_FILE.read_text()
    assert "message: site is immutable" in text
    assert "pattern: ^v?[0-9]+\\.[0-9]+\\.[0-9]+$" in text


async def test_missing_site_and_version_are_required(kube: ckube.Kube) -> None:
    body = rkcp()
    body["spec"] = {"replicas": 1}
    with pytest.raises(kerrors.Invalid) as info:
        await kube.create(RKCP, body, namespace="default")
    causes = {(c["field"], c["reason"]) for c in info.value.details["causes"]}
    required = {("spec.site", "FieldValueRequired"), ("spec.version", "FieldValueRequired")}
    assert causes == required | {(NOT_CHECKED, "FieldValueInvalid")}


async def test_status_written_by_the_models_is_accepted(kube: ckube.Kube) -> None:
    await kube.create(RKCP, rkcp(), namespace="default")
    cond = conditions.new_condition(
        api.AVAILABLE, conditions.TRUE, "AsExpected", observed_generation=1, now=T0
    )
    status = api.Status(
        initialization=api.Initialization(control_plane_initialized=True),
        initialized=True,
        ready=True,
        version="v1.31.0",
        replicas=2,
        ready_replicas=2,
        available_replicas=2,
        up_to_date_replicas=2,
        updated_replicas=2,
        selector="kamaji.clastix.io/name=cp1",
        observed_generation=1,
        conditions=[cond],
    )
    patched = await kube.patch(
        RKCP, "cp1", {"status": status.to_dict()}, namespace="default", subresource="status"
    )
    assert patched["status"] == status.to_dict()
    assert api.RemoteKamajiControlPlane.parse(patched).status == status


async def test_status_refuses_a_bad_condition(kube: ckube.Kube) -> None:
    await kube.create(RKCP, rkcp(), namespace="default")
    bad = {"type": "Available", "status": "Yes", "reason": "x y", "message": "", "lastTransitionTime": "now"}
    with pytest.raises(kerrors.Invalid) as info:
        await kube.patch(
            RKCP, "cp1", {"status": {"conditions": [bad]}}, namespace="default", subresource="status"
        )
    fields = sorted(c["field"] for c in info.value.details["causes"])
    assert fields == [
        NOT_CHECKED,
        "status.conditions[0].lastTransitionTime",
        "status.conditions[0].reason",
        "status.conditions[0].status",
    ]


async def test_scale_subresource(kube: ckube.Kube) -> None:
    await kube.create(RKCP, rkcp(), namespace="default")
    await kube.patch(
        RKCP,
        "cp1",
        {"status": {"replicas": 2, "selector": "kamaji.clastix.io/name=cp1"}},
        namespace="default",
        subresource="status",
    )
    scale = await kube.patch(RKCP, "cp1", {"spec": {"replicas": 3}}, namespace="default", subresource="scale")
    assert scale["status"] == {"replicas": 2, "selector": "kamaji.clastix.io/name=cp1"}
    assert (await kube.get(RKCP, "cp1", namespace="default"))["spec"]["replicas"] == 3


@pytest.mark.skipif(not KUBECTL.exists(), reason=f"kubectl is absent: {KUBECTL}")
async def test_kubectl_get_rkcp_prints_the_columns(
    kube: ckube.Kube, mgmt: kubeapi.Server, tmp_path: Path
) -> None:
    labelled = rkcp("cp1")
    labelled["metadata"]["labels"] = {"cluster.x-k8s.io/cluster-name": "c1"}
    await kube.create(RKCP, labelled, namespace="default")
    await kube.create(RKCP, rkcp("cp2", site="site-b", version="v1.30.1"), namespace="default")
    counts = {"replicas": 3, "readyReplicas": 2, "updatedReplicas": 1, "unavailableReplicas": 1}
    await kube.patch(
        RKCP, "cp1", {"status": {"initialized": True, "ready": True, **counts}},
        namespace="default", subresource="status",
    )  # fmt: skip
    kubeconfig = mgmt.write_kubeconfig(tmp_path / "kubectl.kubeconfig")
    proc = await asyncio.create_subprocess_exec(
        str(KUBECTL),
        "--kubeconfig",
        str(kubeconfig),
        "--cache-dir",
        str(tmp_path / "cache"),
        "get",
        "rkcp",
        "-n",
        "default",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    header = ["NAME", "CLUSTER", "INITIALIZED", "API SERVER AVAILABLE", "REPLICAS", "READY", "UPDATED",
              "UNAVAILABLE", "AGE", "VERSION", "SITE"]  # fmt: skip
    assert _headers(lines[0]) == header
    # Cut rows at the header's column starts: an empty cell is blank, not "<none>".
    starts = [lines[0].index(name) for name in header]
    rows = [
        [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)] for line in lines[1:]
    ]
    without_age = [row[:8] + row[9:] for row in rows]
    assert without_age == [
        ["cp1", "c1", "true", "true", "3", "2", "1", "1", "v1.31.0", "site-a"],
        ["cp2", "", "", "", "", "", "", "", "v1.30.1", "site-b"],
    ]


def _headers(line: str) -> list[str]:
    """The column names of kubectl's header line (two spaces or more between them)."""
    return [h.strip() for h in re.split(r"\s{2,}", line.strip())]


async def test_installs_through_the_api_like_kubectl_apply(tmp_path: Path) -> None:
    async with kubeapi.Server(name="fresh", history=50) as server:
        api_client = await ckube.api_client_from_kubeconfig(server.write_kubeconfig(tmp_path / "kubeconfig"))
        try:
            kube = ckube.Kube(api_client)
            crd = yaml.safe_load(CRD_FILE.read_text())
            await kube.create(resources.CUSTOM_RESOURCE_DEFINITION, crd)
            await helpers.eventually(lambda: kube.serves(RKCP), what="the RKCP resource served")
            created = await kube.create(RKCP, rkcp(), namespace="default")
            assert created["spec"]["replicas"] == 2
        finally:
            await api_client.close()


# The Site CRD ---------------------------------------------------------------------------------

SITE_FILE = CRD_FILE.parent / crds.SITE_FILENAME


def test_committed_site_crd_is_what_the_models_generate() -> None:
    assert SITE_FILE.read_text() == crds.render_site(), "run: python -m hub.api.crds"
    crd = yaml.safe_load(SITE_FILE.read_text())
    assert crd["spec"]["scope"] == "Cluster" and crd["spec"]["names"]["plural"] == "sites"
    assert resources.SITE.group == crd["spec"]["group"] and not resources.SITE.namespaced


def test_check_mode_reports_a_stale_site_crd(tmp_path: Path) -> None:
    target = tmp_path / crds.FILENAME
    assert crds.main(["--output", str(target)]) == 0
    (tmp_path / crds.SITE_FILENAME).write_text("stale")
    assert crds.main(["--check", "--output", str(target)]) == 1


async def test_sites_default_refuse_and_print_their_columns(tmp_path: Path) -> None:
    async with kubeapi.Server(name="sites", history=50) as server:
        server.apply_crd_files([SITE_FILE])
        api_client = await ckube.api_client_from_kubeconfig(server.write_kubeconfig(tmp_path / "kubeconfig"))
        try:
            kube = ckube.Kube(api_client)
            created = await kube.create(
                resources.SITE,
                {"apiVersion": "kamaji-broker.io/v1alpha1", "kind": "Site", "metadata": {"name": "site-a"}},
            )
            assert created["spec"] == {"sameNamespace": True}
            grant = {"namespaces": ["Team A"], "targetNamespaces": ["tenants"]}
            bad = {"apiVersion": "kamaji-broker.io/v1alpha1", "kind": "Site", "metadata": {"name": "site-b"},
                   "spec": {"placements": [grant]}}  # fmt: skip
            with pytest.raises(kerrors.Invalid, match=r"spec\.placements\[0\]\.namespaces"):
                await kube.create(resources.SITE, bad)
            status = {"connected": True, "lastHeartbeatTime": "2026-11-30T12:00:00Z", "backlog": 3,
                      "controlPlanes": 2, "agentVersion": "0.1.0", "trustedKeyIds": ["k1"]}  # fmt: skip
            await kube.patch(resources.SITE, "site-a", {"status": status}, subresource="status")
        finally:
            await api_client.close()
        kubeconfig = server.write_kubeconfig(tmp_path / "kubectl.kubeconfig")
        proc = await asyncio.create_subprocess_exec(
            str(KUBECTL), "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "cache"),
            "get", "sites",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
        assert proc.returncode == 0, err.decode()
        header, row = out.decode().splitlines()
        assert header.split() == [
            "NAME",
            "CONNECTED",
            "HEARTBEAT",
            "BACKLOG",
            "CONTROL",
            "PLANES",
            "AGENT",
            "VERSION",
            "AGE",
        ]
        assert row.split()[:2] == ["site-a", "true"] and row.split()[3:5] == ["3", "2"] and "0.1.0" in row
