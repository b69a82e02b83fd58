"""A kubeconfig that authenticates as a ServiceAccount, with a token from the TokenRequest API.

What a pod of that ServiceAccount would get mounted, for a process that runs on this machine
instead of in a pod (no kubelet): the hub and agents then reach the API server bound exactly by
the RBAC their install created, never as the admin. Pure: the token comes from
``common.kube.reviews.service_account_token``.
"""

from __future__ import annotations

import base64
from typing import Any

import yaml

__all__ = ["TOKEN_SECONDS", "kubeconfig", "user"]

TOKEN_SECONDS = 24 * 3600
"""A day: the longest a test or a sandbox runs; kube-apiserver may shorten it."""


def user(namespace: str, name: str) -> str:
    """The user name the API server gives ServiceAccount ``namespace/name`` (RBAC subjects, can-i --as)."""
    return f"system:serviceaccount:{namespace}:{name}"


def kubeconfig(*, server: str, ca_pem: bytes, namespace: str, name: str, token: str) -> str:
    """A kubeconfig (YAML) for ServiceAccount ``namespace/name`` at ``server``, its context's
    namespace ``namespace``, as a pod's mounted token and CA would configure a client."""
    who = user(namespace, name)
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "cluster", "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)}}
        ],
        "users": [{"name": who, "user": {"token": token}}],
        "contexts": [{"name": who, "context": {"cluster": "cluster", "user": who, "namespace": namespace}}],
        "current-context": who,
    }
    return yaml.safe_dump(config, sort_keys=False)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
