"""Kamaji's TenantControlPlane CRD of the module version the real tier runs, against the newer
one in ../shared/fixtures (what the hub's mapping is written for): every difference is listed
here, so a change of either shows. A field only the newer Kamaji has is one an RKCP may ask for
and the pinned operator's API server refuses (the agent reports it as FieldNotDeclared)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from sandbox.realkamaji import binaries as kamaji_binaries
from tests import helpers

ONLY_IN_FIXTURE = {
    ".spec.addons.konnectivity.agent.hostNetwork",
    ".spec.addons.konnectivity.agent.mode",
    ".spec.addons.konnectivity.agent.replicas",
    ".spec.addons.konnectivity.server.securityContext",
    ".spec.controlPlane.deployment.additionalContainers[].env[].valueFrom.fileKeyRef",
    ".spec.controlPlane.deployment.additionalContainers[].restartPolicyRules",
    ".spec.controlPlane.deployment.additionalInitContainers[].env[].valueFrom.fileKeyRef",
    ".spec.controlPlane.deployment.additionalInitContainers[].restartPolicyRules",
    ".spec.controlPlane.deployment.additionalVolumes[].projected.sources[].podCertificate",
    ".spec.controlPlane.deployment.automountServiceAccountToken",
    ".spec.controlPlane.deployment.containerSecurityContexts",
    ".spec.controlPlane.deployment.podSecurityContext",
    ".spec.controlPlane.deployment.probes",
    ".spec.controlPlane.gateway",
    ".spec.controlPlane.service.additionalPorts",
    ".spec.controlPlane.service.allocateLoadBalancerNodePorts",
    ".spec.dataStoreOverrides",
    ".spec.dataStoreUsername",
    ".spec.kubernetes.kubelet.configurationJSONPatches",
    ".spec.networkProfile.advertiseAddress",
    ".spec.networkProfile.podCidrs",
    ".spec.networkProfile.serviceCidrs",
    ".spec.writePermissions",
    ".status.addons.konnectivity.agent.mode",
    ".status.addons.konnectivity.gateway",
    ".status.kubernetesResources.gateway",
    ".status.observedGeneration",
}
"""Fields (the topmost of each new subtree) the pinned Kamaji's CRD does not declare."""

RULES_ONLY_IN_FIXTURE = {
    ".spec": {
        "!has(oldSelf.dataStoreUsername) || has(self.dataStoreUsername)",
        "!has(self.controlPlane.service.allocateLoadBalancerNodePorts) || "
        "self.controlPlane.service.serviceType == 'LoadBalancer'",
    },
    ".spec.addons.konnectivity.agent": {
        "!(self.mode == 'DaemonSet' && has(self.replicas) && self.replicas != 0) && "
        "!(self.mode == 'Deployment' && has(self.replicas) && self.replicas == 0)"
    },
    ".spec.controlPlane": {"!(has(self.ingress) && has(self.gateway))"},
    ".spec.networkProfile.podCidr": {"self == '' || isCIDR(self)"},
    ".spec.networkProfile.serviceCidr": {"self == '' || isCIDR(self)"},
    ".spec.networkProfile.loadBalancerSourceRanges": {"self.all(r, isCIDR(r))"},
}
"""CEL rules of the newer CRD the pinned one lacks, by the field they sit on."""

STATUSES_ONLY_IN_FIXTURE = {"Unknown", "WriteLimited"}
"""``status.kubernetesResources.version.status`` values only the newer Kamaji reports."""


def _walk(schema: dict[str, Any], prefix: str, out: dict[str, dict[str, Any]]) -> None:
    for key, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}.{key}"
        out[path] = sub
        _walk(sub, path, out)
    if isinstance(schema.get("items"), dict):
        _walk(schema["items"], prefix + "[]", out)


def _fields(crd: dict[str, Any]) -> dict[str, dict[str, Any]]:
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    out: dict[str, dict[str, Any]] = {}
    _walk(version["schema"]["openAPIV3Schema"], "", out)
    return out


def _rules(schema: dict[str, Any]) -> set[str]:
    return {str(r["rule"]) for r in schema.get("x-kubernetes-validations") or ()}


@pytest.fixture(scope="module")
def both(kamaji_build: kamaji_binaries.KamajiBinaries) -> tuple[dict[str, Any], dict[str, Any]]:
    [module_crd] = [p for p in kamaji_build.crds if p.name.endswith("tenantcontrolplanes.yaml")]
    return _fields(helpers.kamaji_crd()), _fields(yaml.safe_load(module_crd.read_text()))


def test_fields_only_the_newer_kamaji_declares(both: tuple[dict[str, Any], dict[str, Any]]) -> None:
    fixture, module = both
    missing = set(fixture) - set(module)
    topmost = {
        p for p in missing if not any(p.startswith(q) and p != q and p[len(q)] in ".[" for q in missing)
    }
    assert topmost == ONLY_IN_FIXTURE
    assert set(module) - set(fixture) == set(), "the pinned Kamaji declares nothing the newer lacks"


def test_rules_and_statuses_only_the_newer_kamaji_has(both: tuple[dict[str, Any], dict[str, Any]]) -> None:
    fixture, module = both
    extra = {p: _rules(s) - _rules(module[p]) for p, s in fixture.items() if p in module}
    assert {p: r for p, r in extra.items() if r} == RULES_ONLY_IN_FIXTURE
    assert all(not (_rules(s) - _rules(fixture[p])) for p, s in module.items() if p in fixture)
    status = ".status.kubernetesResources.version.status"
    assert set(fixture[status]["enum"]) - set(module[status]["enum"]) == STATUSES_ONLY_IN_FIXTURE
    assert set(module[status]["enum"]) <= set(fixture[status]["enum"])
