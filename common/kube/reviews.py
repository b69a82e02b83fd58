"""What the API server says about itself and about us: its version, SelfSubjectAccessReviews,
and ServiceAccount tokens.

Used by ``kamaji-broker doctor``: ``version`` proves the API server is reachable with the
process's own kubeconfig or in-cluster credentials, ``allowed`` asks (authorization.k8s.io/v1)
whether this identity may do one thing. Neither changes anything in the cluster.
``service_account_token`` asks the TokenRequest API for a ServiceAccount's bound token (what a
pod of it would mount): the sandbox's real clusters run local processes as their ServiceAccounts.
"""

from __future__ import annotations

from dataclasses import dataclass

from common.kube import resources
from common.kube.client import Kube


@dataclass(frozen=True, order=True)
class Access:
    """One question for the authorizer: may we ``verb`` ``group``/``resource`` in ``namespace``?"""

    verb: str
    group: str
    resource: str
    """The resource, with ``/subresource`` when there is one (``sites/status``), or ``*``."""
    namespace: str = ""
    """Empty: cluster-scoped, or in every namespace."""
    name: str = ""

    def attributes(self) -> dict[str, str]:
        resource, _, subresource = self.resource.partition("/")
        attrs = {"verb": self.verb, "group": self.group, "resource": resource}
        for key, value in (("subresource", subresource), ("namespace", self.namespace), ("name", self.name)):
            if value:
                attrs[key] = value
        return attrs


async def version(kube: Kube) -> str:
    """The server's ``gitVersion`` (GET /version)."""
    found = await kube._call("GET", "/version")  # the package's own client
    return str((found or {}).get("gitVersion") or "unknown")


async def allowed(kube: Kube, access: Access) -> tuple[bool, str]:
    """Whether the authorizer allows ``access`` to this client's identity, and its reason."""
    body = {
        "apiVersion": resources.SELF_SUBJECT_ACCESS_REVIEW.api_version,
        "kind": resources.SELF_SUBJECT_ACCESS_REVIEW.kind,
        "spec": {"resourceAttributes": access.attributes()},
    }
    review = await kube.create(resources.SELF_SUBJECT_ACCESS_REVIEW, body)
    status = review.get("status") or {}
    return bool(status.get("allowed")), str(status.get("reason") or "")


async def service_account_token(kube: Kube, *, namespace: str, name: str, seconds: int) -> str:
    """ServiceAccount ``namespace/name``'s token for ``seconds`` (POST .../serviceaccounts/<name>/token)."""
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": seconds},
    }
    path = resources.SERVICE_ACCOUNT.path(namespace, name, "token")
    review = await kube._call("POST", path, body=body)  # the package's own client
    return str(review["status"]["token"])
