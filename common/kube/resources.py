"""The Kubernetes resources hub, agent and the sandbox's Kamaji simulator touch.

``Resource`` names a resource by group, version and plural and builds its REST paths, so one
generic client serves built-ins and custom resources alike; ``discovered`` finds one of a kind in
a group version's discovery document. The permissions each process needs
are declared next to the code that uses them (``agent.rbac``, ``hub.rbac``) from these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
            if subresource is not None:
                base += f"/{subresource}"
        return base


def discovered(group: str, version: str, entries: Iterable[Mapping[str, Any]], kind: str) -> Resource | None:
    """The resource of ``kind`` among a group version's discovery ``entries`` (None: not served).
    Subresources (``foos/status``) carry their parent's kind too, so they are skipped."""
    for e in entries:
        name = str(e.get("name") or "")
        if e.get("kind") == kind and name and "/" not in name:
            return Resource(group, version, name, kind, namespaced=bool(e.get("namespaced")))
    return None


CUSTOM_RESOURCE_DEFINITION = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False
)
NAMESPACE = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
SECRET = Resource("", "v1", "secrets", "Secret")
SERVICE_ACCOUNT = Resource("", "v1", "serviceaccounts", "ServiceAccount")
EVENT = Resource("", "v1", "events", "Event")
LEASE = Resource("coordination.k8s.io", "v1", "leases", "Lease")
TENANT_CONTROL_PLANE = Resource("kamaji.clastix.io", "v1alpha1", "tenantcontrolplanes", "TenantControlPlane")
CLUSTER = Resource("cluster.x-k8s.io", "v1beta1", "clusters", "Cluster")
SITE = Resource("kamaji-broker.io", "v1alpha1", "sites", "Site", namespaced=False)
REMOTE_KAMAJI_CONTROL_PLANE = Resource(
    "controlplane.cluster.x-k8s.io", "v1alpha1", "remotekamajicontrolplanes", "RemoteKamajiControlPlane"
)
SELF_SUBJECT_ACCESS_REVIEW = Resource(
    "authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", namespaced=False
)
