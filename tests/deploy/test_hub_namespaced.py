"""deploy/hub/namespaced: the overlay of deploy/README.md builds, validates and grants nothing
namespaced beyond the watched namespaces.

Built by kubectl's kustomize as an operator's overlay (``sandbox.launcher.overlays``): the
ClusterRole ``kamaji-broker-hub`` bound by one RoleBinding per watched namespace and by no
ClusterRoleBinding; the only cluster-wide grant is the Sites'; the Deployment loses
``--all-namespaces`` and its settings load with the namespaces of the overlay's ConfigMap.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from hub import grants, rbac
from hub.settings import HubSettings
from sandbox.launcher import overlays
from tests.deploy import manifests as m

NAMESPACE = "kamaji-broker-system"
WATCHED = ("team-a", "team-b")
ACCOUNT = {"kind": "ServiceAccount", "name": "kamaji-broker-hub", "namespace": NAMESPACE}


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    overlay = tmp_path_factory.mktemp("overlay")
    files = overlays.namespaced(WATCHED, overlay=overlay, deploy=m.DEPLOY, system_namespace=NAMESPACE)
    for name, text in files.items():
        (overlay / name).write_text(text)
    return m.kustomize(overlay)


def _hub_bindings(docs: list[dict[str, Any]], kind: str) -> list[Mapping[str, Any]]:
    return [b for b in m.of_kind(docs, kind) if ACCOUNT in b["subjects"]]


def test_every_document_validates(docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        m.validate(doc)


def test_the_hub_role_is_bound_in_the_watched_namespaces_only(docs: list[dict[str, Any]]) -> None:
    bound = {
        b["metadata"]["namespace"]: b["roleRef"]
        for b in _hub_bindings(docs, "RoleBinding")
        if b["roleRef"]["name"] == grants.HUB_ROLE
    }
    assert set(bound) == set(WATCHED)
    assert all(r["kind"] == "ClusterRole" for r in bound.values())
    cluster_wide = {b["roleRef"]["name"] for b in _hub_bindings(docs, "ClusterRoleBinding")}
    assert cluster_wide == {grants.SITES_ROLE}
    [sites] = [r for r in m.of_kind(docs, "ClusterRole") if r["metadata"]["name"] == grants.SITES_ROLE]
    assert m.granted([sites]) == m.declared(rbac.CLUSTER)
    # The Roles of the hub's own namespace stay as they are.
    own = {b["roleRef"]["name"] for b in _hub_bindings(docs, "RoleBinding") if b["roleRef"]["kind"] == "Role"}
    assert own == {grants.LEASE_ROLE, grants.BOOTSTRAP_ROLE}


def test_the_deployment_watches_the_namespaces_of_the_config_map(
    docs: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deployment = m.one(docs, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "--all-namespaces" not in container["args"]
    env = {e["name"]: e for e in container["env"]}
    ref = env["KB_HUB_NAMESPACES"]["valueFrom"]["configMapKeyRef"]
    [config] = [c for c in m.of_kind(docs, "ConfigMap") if c["metadata"]["name"] == ref["name"]]
    assert config["metadata"]["namespace"] == NAMESPACE
    # As the pod would get it: the ConfigMap's value in the environment, the other flags as given.
    (tmp_path / "sealing").mkdir()
    (tmp_path / "sealing" / "k.key").write_text("x")
    (tmp_path / "signing.key").write_text("x")
    monkeypatch.setenv("KB_HUB_NAMESPACES", config["data"][ref["key"]])
    settings = HubSettings(
        signing_key=tmp_path / "signing.key", sealing_keys=tmp_path / "sealing", in_cluster=True,
        nats_seed=tmp_path / "signing.key", nats_url=env["KB_HUB_NATS_URL"]["value"],
    )  # fmt: skip
    assert settings.watch_namespaces == WATCHED and not settings.all_namespaces
