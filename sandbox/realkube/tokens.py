"""A kubeconfig that authenticates as a ServiceAccount, with a token from the TokenRequest API.

What a pod of that ServiceAccount would get mounted, for a process that runs on this machine
instead of in a pod (no kubelet): the hub and agents then reach the API server bound exactly by
the RBAC their install created, never as the admin. ``request_token`` talks to the API server
through ``common.kube`` (the admin's client); ``kubeconfig`` is pure.
"""

from __future__ import annotations

import base64
from typing import Any

import yaml

from common import kube
from common.kube import resources

__all__ = ["TOKEN_SECONDS", "kubeconfig", "request_token", "user"]

TOKEN_SECONDS = 24 * 3600
"""A day: the longest a test or a sandbox runs; kube-apiserver may shorten it."""


def user(namespace: str, name: str) -> str:
    """The user name the API server gives ServiceAccount ``namespace/name`` (RBAC subjects, can-i --as)."""
    return f"system:serviceaccount:{namespace}:{name}"


async def request_token(admin: kube.Kube, *, namespace: str, name: str, seconds: int = TOKEN_SECONDS) -> str:
    """A bound token of ServiceAccount ``namespace/name`` (POST .../serviceaccounts/<name>/token)."""
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": seconds},
    }
    review = await admin.create_subresource(
        resources.SERVICE_ACCOUNT, name, "token", body, namespace=namespace
    )
    return str(review["status"]["token"])


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
