"""deploy/hub: the kustomize base builds, every document validates, and it fits the hub's code.

RBAC equals ``hub.rbac``'s rules, each scope in its own role; the Deployment's flags and
environment load into ``HubSettings`` with the files its Secret volumes provide, made by the
operator commands of the walkthrough.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from hub import grants, rbac
from hub.api import crds
from hub.credentials import operator
from hub.settings import HubSettings
from kamaji_broker import cli, flags
from tests.deploy import manifests as m

NAMESPACE = "kamaji-broker-system"
AGGREGATE = "cluster.x-k8s.io/aggregate-to-manager"
"""The label that aggregates a ClusterRole into Cluster API's manager role."""


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return m.kustomize(m.DEPLOY / "hub")


def test_every_document_validates(docs: list[dict[str, Any]]) -> None:
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(
        [
            "Namespace", "CustomResourceDefinition", "CustomResourceDefinition", "CustomResourceDefinition",
            "ServiceAccount",
            "ClusterRole", "ClusterRole", "ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding",
            "ClusterRoleBinding", "Role", "Role", "RoleBinding", "RoleBinding",
            "Deployment", "Service", "NetworkPolicy", "PodDisruptionBudget",
        ]
    )  # fmt: skip
    for doc in docs:
        m.validate(doc)
        if doc["kind"] not in ("Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"):
            assert doc["metadata"]["namespace"] == NAMESPACE, doc["metadata"]["name"]


@pytest.mark.parametrize(
    ("filename", "render"),
    [
        (crds.FILENAME, crds.render),
        (crds.SITE_FILENAME, crds.render_site),
        (crds.TEMPLATE_FILENAME, crds.render_template),
    ],
)
def test_the_crds_are_the_generated_ones(
    docs: list[dict[str, Any]], filename: str, render: Callable[[], str]
) -> None:
    rendered = yaml.safe_load(render())
    [crd] = [
        d
        for d in m.of_kind(docs, "CustomResourceDefinition")
        if d["metadata"]["name"] == rendered["metadata"]["name"]
    ]
    assert crd["spec"] == rendered["spec"]
    committed = m.DEPLOY / "crds" / filename
    assert committed.read_text() == render(), "run: python -m hub.api.crds"


def _aggregated(role: Mapping[str, Any]) -> bool:
    return (role["metadata"].get("labels") or {}).get(AGGREGATE) == "true"


def role(docs: list[dict[str, Any]], kind: str, name: str) -> Mapping[str, Any]:
    [found] = [r for r in m.of_kind(docs, kind) if r["metadata"]["name"] == name]
    return found


def test_rbac_is_exactly_what_the_hub_uses(docs: list[dict[str, Any]]) -> None:
    roles = [r for r in m.of_kind(docs, "ClusterRole") if not _aggregated(r)] + m.of_kind(docs, "Role")
    assert m.granted(roles) == m.declared(rbac.RULES)
    # Each scope in its role: what a watched namespace needs, the cluster-scoped Sites, and the
    # Lease and bootstrap Secrets in the hub's own namespace only.
    assert m.granted([role(docs, "ClusterRole", grants.HUB_ROLE)]) == m.declared(rbac.NAMESPACED)
    assert m.granted([role(docs, "ClusterRole", grants.SITES_ROLE)]) == m.declared(rbac.CLUSTER)
    assert m.granted([role(docs, "Role", grants.LEASE_ROLE)]) == m.declared([rbac.LEASES])
    assert m.granted([role(docs, "Role", grants.BOOTSTRAP_ROLE)]) == m.declared([rbac.BOOTSTRAP_SECRETS])
    deployment = m.one(docs, "Deployment")
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    capi_roles = {r["metadata"]["name"] for r in m.of_kind(docs, "ClusterRole") if _aggregated(r)}
    for binding in m.of_kind(docs, "ClusterRoleBinding") + m.of_kind(docs, "RoleBinding"):
        if binding["roleRef"]["name"] in capi_roles:
            continue  # CAPI's, not the hub's (test_capi_controllers_may_read_...)
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
        role_kind = "ClusterRole" if binding["kind"] == "ClusterRoleBinding" else "Role"
        assert binding["roleRef"]["kind"] == role_kind
        assert binding["roleRef"]["name"] in {r["metadata"]["name"] for r in m.of_kind(docs, role_kind)}
    assert account in {a["metadata"]["name"] for a in m.of_kind(docs, "ServiceAccount")}


def test_capi_controllers_may_read_rkcps_and_templates_and_nothing_else(docs: list[dict[str, Any]]) -> None:
    """CAPI ≥ 1.14's kubeadm bootstrap controller reads the controlPlaneRef object: the ClusterRole
    aggregated into CAPI's manager role grants get/list/watch on RKCPs and their templates, only."""
    [role] = [r for r in m.of_kind(docs, "ClusterRole") if _aggregated(r)]
    assert m.granted([role]) == m.declared(rbac.CAPI_READS)
    group = "controlplane.cluster.x-k8s.io"
    assert m.granted([role]) == {
        (group, resource, verb)
        for resource in ("remotekamajicontrolplanes", "remotekamajicontrolplanetemplates")
        for verb in ("get", "list", "watch")
    }
    # Aggregated into CAPI core's manager role; bound, besides, to the kubeadm bootstrap manager
    # (whose role aggregates nothing; the Kamaji provider binds it the same way), to no one else.
    bindings = m.of_kind(docs, "ClusterRoleBinding") + m.of_kind(docs, "RoleBinding")
    subjects = [
        s for b in bindings if b["roleRef"]["name"] == role["metadata"]["name"] for s in b["subjects"]
    ]
    assert subjects == [
        {
            "kind": "ServiceAccount",
            "name": "capi-kubeadm-bootstrap-manager",
            "namespace": "capi-kubeadm-bootstrap-system",
        }
    ]


def _operator_files(tmp_path: Path) -> dict[tuple[str, str], dict[str, str]]:
    """The Secrets of deploy/README.md step 4, made as an operator makes them."""
    kb = [sys.executable, "-m", "kamaji_broker.cli"]
    keys, nats = tmp_path / "keys", tmp_path / "nats"
    printed = subprocess.run(
        [*kb, "keys", "generate", "--out", str(keys), "--print-secret", "kamaji-broker-hub-keys",
         "--namespace", NAMESPACE],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    subprocess.run(
        [*kb, "nats-config", "--dir", str(nats), "--auth", "operator", "--tls-generate", str(nats / "tls"),
         "--tls-host", "nats.nats.svc"],
        capture_output=True, check=True, timeout=60,
    )  # fmt: skip
    hub_keys = yaml.safe_load(printed)
    sealing = {p.name: p.read_text() for p in (keys / "sealing").glob("*.key")}  # --from-file=keys/sealing/
    return {
        ("Secret", hub_keys["metadata"]["name"]): m.secret_data(hub_keys),
        ("Secret", "kamaji-broker-hub-sealing-keys"): sealing,
        # --from-file=nats/hub/
        ("Secret", "kamaji-broker-hub-nats"): {p.name: p.read_text() for p in (nats / "hub").iterdir()},
        ("ConfigMap", "kamaji-broker-nats-ca"): {"ca.crt": (nats / "tls" / "ca.crt").read_text()},
    }


def test_deployment_flags_load_with_the_operator_secrets(
    docs: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deployment = m.one(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mounts = m.materialize(pod, container, sources=_operator_files(tmp_path), root=tmp_path / "pod")
    args = [
        m.local_path(a.split("=", 1)[0], mounts)
        + ("=" + m.local_path(a.split("=", 1)[1], mounts) if "=" in a else "")
        for a in container["args"]
    ]
    assert container["args"][0] == "hub"
    parsed = cli._parser().parse_args(args)
    env = {e["name"]: e for e in container["env"]}
    # The downward API gives these at run time.
    assert env["KB_HUB_LEASE_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert env["KB_HUB_IDENTITY"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    fields = {f"KB_HUB_{n.upper()}" for n in HubSettings.model_fields}
    assert set(env) - {"KB_LOG_LEVEL"} <= fields, "every variable is a hub setting"
    monkeypatch.setenv("KB_HUB_LEASE_NAMESPACE", NAMESPACE)
    monkeypatch.setenv("KB_HUB_IDENTITY", "kamaji-broker-hub-0")
    for name, e in env.items():
        if "value" in e:
            monkeypatch.setenv(name, e["value"])
    settings = flags.load(HubSettings, parsed)
    assert settings.leader_elect and settings.lease_namespace == NAMESPACE
    assert settings.in_cluster and settings.all_namespaces
    assert settings.stream_replicas == 3, "deploy/nats is a 3-node JetStream cluster"
    assert len(list(settings.sealing_keys.glob("*.key"))) == 1
    assert settings.servers == ("tls://nats.nats.svc:4222",)
    # Operator mode: the directory holds what the hub loads, as nats-config wrote it, with the
    # mode Kubernetes gives the Secret's files (its defaultMode)
    assert settings.nats_operator_dir is not None
    (volume,) = [v for v in pod["volumes"] if v["name"] == "nats"]
    for path in settings.nats_operator_dir.iterdir():
        path.chmod(volume["secret"]["defaultMode"])
    assert operator.load(settings.nats_operator_dir).authority.account.startswith("A")
    # TLS verified against the CA nats-config made (mounted from the ConfigMap).
    assert settings.nats_ca_file is not None
    assert settings.nats_ca_file.read_text().startswith("-----BEGIN CERTIFICATE-----")


def _local_arg(arg: str, mounts: dict[str, Path]) -> str:
    flag, eq, value = arg.partition("=")
    return f"{flag}{eq}{m.local_path(value, mounts)}" if eq else arg


def test_deployment_runs_hardened_with_probes(docs: list[dict[str, Any]]) -> None:
    deployment = m.one(docs, "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    port = next(p for p in container["ports"] if p["name"] == "metrics")
    assert any(a == f"--listen=:{port['containerPort']}" for a in container["args"])
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    for probe in (container["livenessProbe"], container["readinessProbe"]):
        assert probe["httpGet"]["port"] == "metrics"
    service = m.one(docs, "Service")
    assert service["spec"]["selector"].items() <= spec["template"]["metadata"]["labels"].items()
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"


def test_network_policy_allows_only_dns_nats_and_the_api_server(docs: list[dict[str, Any]]) -> None:
    policy = m.one(docs, "NetworkPolicy")
    deployment = m.one(docs, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    egress = {(p["protocol"], p["port"]) for rule in policy["spec"]["egress"] for p in rule["ports"]}
    assert egress == {("UDP", 53), ("TCP", 53), ("TCP", 4222), ("TCP", 443), ("TCP", 6443)}
    ingress = [p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]]
    assert ingress == ["metrics"]
