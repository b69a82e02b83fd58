"""Every Kubernetes permission the hub uses, in one place (the hub's ClusterRole follows it).

Each entry is (apiGroup, resource, verbs). The code touches nothing else.
"""

from __future__ import annotations

from typing import Final

RULES: Final[tuple[tuple[str, str, tuple[str, ...]], ...]] = (
    # The objects it reconciles; patch for finalizers and spec.controlPlaneEndpoint.
    ("controlplane.cluster.x-k8s.io", "remotekamajicontrolplanes", ("list", "watch", "patch")),
    ("controlplane.cluster.x-k8s.io", "remotekamajicontrolplanes/status", ("patch",)),
    # Placement authorization: Sites are read (cached from a watch); their status is the hub's
    # inventory of each site, written on change.
    ("kamaji-broker.io", "sites", ("list", "watch")),
    ("kamaji-broker.io", "sites/status", ("patch",)),
    # Owner Clusters: network fields and the paused flag, read only.
    ("cluster.x-k8s.io", "clusters", ("list", "watch")),
    # <cluster>-kubeconfig and <cluster>-ca: watched (by label) for their checksums, created,
    # replaced on a new checksum.
    ("", "secrets", ("get", "list", "watch", "create", "update")),
    ("", "events", ("create",)),
    # Leader election.
    ("coordination.k8s.io", "leases", ("get", "create", "update")),
)
