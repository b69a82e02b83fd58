"""sandbox.launcher.overlays: the namespaced install's overlay, as text (built by kubectl in
tests/deploy/test_hub_namespaced.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sandbox.launcher import overlays


@pytest.mark.parametrize(
    ("overlay", "hub"),
    [
        (Path("/w/main/out/hub"), "../../deploy/hub"),
        (Path("/tmp/x/sandbox/hub-namespaced"), "../../../../w/main/deploy/hub"),
    ],
    ids=["inside the repository", "elsewhere"],
)
def test_paths_are_relative_to_the_overlay(overlay: Path, hub: str) -> None:
    files = overlays.namespaced(["a"], overlay=overlay, deploy=Path("/w/main/deploy"), system_namespace="kb")
    k = yaml.safe_load(files["kustomization.yaml"])
    assert k["resources"] == [hub, "rolebindings.yaml"]
    assert k["components"] == [f"{hub}/namespaced"]


def test_one_role_binding_per_namespace_and_the_list_in_the_config_map() -> None:
    files = overlays.namespaced(["a", "b"], overlay=Path("/o"), deploy=Path("/d"), system_namespace="kb")
    bindings = list(yaml.safe_load_all(files["rolebindings.yaml"]))
    assert [(b["metadata"]["namespace"], b["roleRef"]["kind"]) for b in bindings] == [
        ("a", "ClusterRole"),
        ("b", "ClusterRole"),
    ]
    assert all(b["subjects"][0]["namespace"] == "kb" for b in bindings)
    [config] = yaml.safe_load(files["kustomization.yaml"])["configMapGenerator"]
    assert (config["namespace"], config["literals"]) == ("kb", ["namespaces=a,b"])


def test_no_namespace_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one namespace"):
        overlays.namespaced([], overlay=Path("/o"), deploy=Path("/d"), system_namespace="kb")
