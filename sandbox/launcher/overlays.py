"""The kustomize overlay a platform engineer writes to install the hub for some namespaces only.

``namespaced`` renders it (file name → text) as deploy/README.md shows it: deploy/hub as the
resource, the component deploy/hub/namespaced, the ConfigMap of the watched namespaces and a
RoleBinding of the ClusterRole ``kamaji-broker-hub`` in each of them. Pure: no I/O; the paths
to deploy/ are relative (kustomize refuses absolute ones), from where the overlay is written.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import yaml

__all__ = ["HUB_ROLE", "NAMESPACES_CONFIG_MAP", "namespaced"]

HUB_ROLE = "kamaji-broker-hub"
"""The ClusterRole of what the hub needs in a watched namespace, and each RoleBinding's name."""
NAMESPACES_CONFIG_MAP = "kamaji-broker-hub-namespaces"
"""Key ``namespaces``: the watched namespaces, comma separated (the hub's KB_HUB_NAMESPACES)."""


def namespaced(
    namespaces: Sequence[str], *, overlay: Path, deploy: Path, system_namespace: str
) -> dict[str, str]:
    """The overlay's files, to be written into ``overlay``, for a hub installed in
    ``system_namespace`` that watches ``namespaces``."""
    if not namespaces:
        raise ValueError("a namespaced install watches at least one namespace")
    hub = Path(os.path.relpath(deploy / "hub", overlay))
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [hub.as_posix(), "rolebindings.yaml"],
        "components": [(hub / "namespaced").as_posix()],
        "configMapGenerator": [
            {
                "name": NAMESPACES_CONFIG_MAP,
                "namespace": system_namespace,
                "literals": [f"namespaces={','.join(namespaces)}"],
            }
        ],
    }
    bindings = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": HUB_ROLE, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": HUB_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": HUB_ROLE, "namespace": system_namespace}],
        }
        for namespace in namespaces
    ]
    return {
        "kustomization.yaml": yaml.safe_dump(kustomization, sort_keys=False),
        "rolebindings.yaml": yaml.safe_dump_all(bindings, sort_keys=False),
    }
