"""Every CEL rule (x-kubernetes-validations) of our CRDs, evaluated by a real kube-apiserver.

The emulator does not evaluate CEL (sandbox.kubeapi says so), so this is where the rules are
proved: for each, an object is created, an update the rule allows passes, and then an update it
forbids fails in the real kubectl with the server's error naming the rule's field and message.
The rules are read from the CRD files, so a rule added without a row here fails
``test_every_rule_has_a_row``. The RemoteKamajiControlPlaneTemplate carries the RKCP's rules
under ``spec.template.spec`` (less those about fields a template has not), and gets each row too.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from common import kube as ckube
from common.kube import resources
from hub.api import rkcp
from hub.api import template as template_api
from sandbox import realkube
from tests.deploy import realcrds


@pytest.fixture(scope="module")
def namespace(real_cluster: realkube.Cluster) -> Iterator[str]:
    """Our CRDs installed on the session's real cluster, and a namespace of this module's own."""
    name = "cel-" + uuid.uuid4().hex[:8]
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


@dataclass(frozen=True)
class Kind:
    """One of our kinds with rules: its CRD, and where an RKCP spec's fields sit in its objects."""

    path: Path
    resource: resources.Resource
    required: dict[str, Any]
    """The spec fields every object of the kind is created with."""
    template: bool

    def fields(self, spec: dict[str, Any]) -> dict[str, Any]:
        """``spec`` (an RKCP spec's fields) where the kind keeps them, as the object's spec."""
        return {"template": {"spec": spec}} if self.template else spec

    def body(self, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        kind = self.resource.kind
        meta = {"name": name}
        return {"apiVersion": rkcp.API_VERSION, "kind": kind, "metadata": meta, "spec": self.fields(spec)}

    @functools.cached_property
    def rules(self) -> dict[str, realcrds.Rule]:
        """The CRD's rules by message (each message says which rule refused)."""
        found = realcrds.rules(realcrds.load(self.path))
        assert len({r.message for r in found}) == len(found), f"two rules of {self.path.name} share a message"
        return {r.message: r for r in found}


RKCP_TEMPLATE = resources.Resource(
    rkcp.NAMES.group, rkcp.NAMES.version, template_api.NAMES.plural, template_api.KIND
)
RKCP = Kind(
    realcrds.crd_file("_remotekamajicontrolplanes.yaml"),
    resources.REMOTE_KAMAJI_CONTROL_PLANE,
    {"site": "site-a", "version": "v1.31.0"},
    template=False,
)
TEMPLATE = Kind(
    realcrds.crd_file("_remotekamajicontrolplanetemplates.yaml"),
    RKCP_TEMPLATE,
    {"site": "site-a"},
    template=True,
)
KINDS = (RKCP, TEMPLATE)


@dataclass(frozen=True)
class Row:
    """An object made of ``before``; the merge patch ``allowed`` passes; then ``forbidden``
    fails with ``message`` (all three are RKCP spec fields)."""

    id: str
    message: str
    before: dict[str, Any]
    allowed: dict[str, Any]
    forbidden: dict[str, Any]


ORPHAN = {"deletionPolicy": "Orphan"}
"""An update to another field: a rule about one field must not stand in the way of the rest."""


def placement(field: str, a: str, b: str) -> list[Row]:
    """A field that can be neither added, changed nor removed once the object exists."""
    message, name = f"{field} cannot be added, changed or removed after creation", field.lower()
    return [
        Row(f"{name}-added", message, {}, ORPHAN, {field: b}),
        Row(f"{name}-changed", message, {field: a}, {field: a, **ORPHAN}, {field: b}),
        Row(f"{name}-removed", message, {field: a}, ORPHAN, {field: None}),
    ]


def kamaji_immutable(field: str) -> list[Row]:
    """A data store field, under the TenantControlPlane's own rules: it may be set later, but
    once set neither changed nor removed."""
    name = field.lower()
    return [
        Row(f"{name}-changed", f"{field} is immutable", {}, {field: "a"}, {field: "b"}),
        Row(f"{name}-removed", f"{field} cannot be removed", {}, {field: "a"}, {field: None}),
    ]


def only_lb(what: str) -> str:
    return f"{what} supported only with the LoadBalancer service type"


def lb_class(value: str | None) -> dict[str, Any]:
    return {"network": {"loadBalancerConfig": {"loadBalancerClass": value}}}


def lb(config: dict[str, Any]) -> dict[str, Any]:
    return {"network": {"serviceType": "LoadBalancer", "loadBalancerConfig": config}}


A_CLASS = {"loadBalancerClass": "lb-a"}
NODE_PORT = {"network": {"serviceType": "NodePort"}}
SOME_RANGES = {"loadBalancerSourceRanges": ["10.0.0.0/8"]}
RANGES = {"network": {"loadBalancerConfig": SOME_RANGES}}
LABELS = {"network": {"serviceLabels": {"team": "a"}}}
NODE_PORTS = {"network": {"allocateLoadBalancerNodePorts": False}}
RUNTIME = "loadBalancerClass cannot be set or unset at runtime"
INGRESS = {"network": {"ingress": {"hostname": "cp.example.com"}}}
A_GATEWAY = {"name": "gw", "namespace": "gw", "hostname": "cp.example.com"}
GATEWAY = {"network": {"ingress": None, "gateway": A_GATEWAY}}

ROWS = [
    Row("site-changed", "site is immutable", {}, ORPHAN, {"site": "site-b"}),
    Row("site-removed", "site cannot be removed", {}, ORPHAN, {"site": None}),
    *placement("targetNamespace", "tenants-a", "tenants-b"),
    *placement("tenantControlPlaneName", "tcp-a", "tcp-b"),
    *kamaji_immutable("dataStoreSchema"),
    *kamaji_immutable("dataStoreUsername"),
    Row("lb-class-changed", "loadBalancerClass is immutable", lb_class("lb-a"), RANGES, lb_class("lb-b")),
    Row("lb-class-set", RUNTIME, {}, RANGES, lb_class("lb-a")),
    Row("lb-class-unset", RUNTIME, lb_class("lb-a"), LABELS, lb_class(None)),
    # From NodePort to LoadBalancer with the option is allowed; back to NodePort with it is not.
    Row("ranges-without-lb", only_lb("loadBalancerSourceRanges are"), NODE_PORT, lb(SOME_RANGES), NODE_PORT),
    Row("lb-class-without-lb", only_lb("loadBalancerClass is"), NODE_PORT, lb(A_CLASS), NODE_PORT),
    Row("node-ports-without-lb", only_lb("allocateLoadBalancerNodePorts is"), {}, NODE_PORTS, NODE_PORT),
    Row("ingress-and-gateway", "ingress and gateway are mutually exclusive", INGRESS, GATEWAY, INGRESS),
]

CASES = [
    pytest.param(kind, row, id=f"{kind.resource.kind}-{row.id}")
    for kind in KINDS
    for row in ROWS
    if row.message in kind.rules
]


def test_every_rule_has_a_row() -> None:
    rows = {row.message for row in ROWS}
    for path in realcrds.OURS:
        missing = [r for r in realcrds.rules(realcrds.load(path)) if r.message not in rows]
        assert missing == [], f"{path.name}: rules without a row in ROWS"
    stale = rows - {message for kind in KINDS for message in kind.rules}
    assert stale == set(), "rows of rules no CRD has"
    # The Site has no rule yet: its first one needs a Kind in KINDS to be tried here.
    assert realcrds.rules(realcrds.load(realcrds.crd_file("_sites.yaml"))) == []


def merged(target: Any, patch: Any) -> Any:
    """``patch`` applied to ``target`` as a JSON merge patch (RFC 7386)."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merged(result.get(key), value)
    return result


@pytest.mark.parametrize(("kind", "row"), CASES)
async def test_the_rule_lets_the_allowed_update_pass_and_refuses_the_forbidden_one(
    real_kube: ckube.Kube, namespace: str, kubectl: realcrds.Kubectl, kind: Kind, row: Row
) -> None:
    name = f"{row.id}-{uuid.uuid4().hex[:6]}"
    body = kind.body(name, {**kind.required, **row.before})
    await real_kube.create(kind.resource, body, namespace=namespace)
    resource = f"{kind.resource.plural}.{kind.resource.group}"
    patch = ["patch", resource, name, "-n", namespace, "--type", "merge", "-o", "json", "-p"]

    allowed = json.loads(await kubectl.ok(*patch, json.dumps({"spec": kind.fields(row.allowed)})))
    assert merged(allowed["spec"], kind.fields(row.allowed)) == allowed["spec"], "the allowed update not made"
    refused = await kubectl.run(*patch, json.dumps({"spec": kind.fields(row.forbidden)}))
    assert refused.returncode == 1
    # One error, the rule's: on its field, with its message (the value is quoted for a string
    # field and left out for an object's).
    rule = kind.rules[row.message]
    where = rf'The {kind.resource.kind} "{name}" is invalid: {re.escape(rule.field)}'
    assert re.fullmatch(rf'{where}: Invalid value: ("[^"]*": )?{re.escape(row.message)}\n', refused.err), (
        refused.err
    )
    assert (await real_kube.get(kind.resource, name, namespace=namespace))["spec"] == allowed["spec"]
