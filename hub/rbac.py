"""Every Kubernetes permission the hub uses, in one place, by where it is needed.

Each entry is (apiGroup, resource, verbs). The code touches nothing else. The three scopes are
the three ways deploy/hub grants them, so that an install may watch some namespaces only:

- ``NAMESPACED``: in every namespace the hub watches (``--namespaces``, ``--namespace``; all of
  them with ``--all-namespaces``). The ClusterRole ``kamaji-broker-hub``: bound cluster-wide by
  deploy/hub, by one RoleBinding per watched namespace with deploy/hub/namespaced.
- ``CLUSTER``: cluster-scoped kinds, which only a ClusterRoleBinding can grant
  (``kamaji-broker-hub-sites``).
- ``OWN``: in the hub's own namespace only (``--lease-namespace``, ``--bootstrap-namespace``), by
  Roles there.

``CAPI_READS`` is not the hub's: it is what Cluster API's own controllers are granted on our
kinds, through the ClusterRole aggregated into CAPI's manager role and bound to the kubeadm
bootstrap manager (``deploy/hub/capi-aggregation.yaml``).
"""

from __future__ import annotations

from typing import Final

Rule = tuple[str, str, tuple[str, ...]]

NAMESPACED: Final[tuple[Rule, ...]] = (
    # The objects it reconciles; patch for finalizers and spec.controlPlaneEndpoint.
    ("controlplane.cluster.x-k8s.io", "remotekamajicontrolplanes", ("list", "watch", "patch")),
    ("controlplane.cluster.x-k8s.io", "remotekamajicontrolplanes/status", ("patch",)),
    # Owner Clusters: network fields and the paused flag, read only.
    ("cluster.x-k8s.io", "clusters", ("list", "watch")),
    # The Cluster's InfraCluster gets the site's endpoint in spec.controlPlaneEndpoint: any kind of
    # any infrastructure provider (read once, merge-patched), so the whole group, as Cluster API's
    # own core controllers are granted it. The Kamaji provider names each kind it supports
    # instead (awsclusters, kubevirtclusters, ... get/patch); a generic patch cannot.
    ("infrastructure.cluster.x-k8s.io", "*", ("get", "patch")),
    # <cluster>-kubeconfig and <cluster>-ca: watched (by label) for their checksums, created,
    # replaced on a new checksum (read first). Never deleted: their owner reference does it.
    ("", "secrets", ("get", "list", "watch", "create", "update")),
    ("", "events", ("create",)),
)

CLUSTER: Final[tuple[Rule, ...]] = (
    # Placement authorization: Sites are read (cached from a watch); their status is the hub's
    # inventory of each site, written on change.
    # Operator mode: patch for the finalizer that revokes a deleted Site's agent.
    ("kamaji-broker.io", "sites", ("list", "watch", "patch")),
    ("kamaji-broker.io", "sites/status", ("patch",)),
)

LEASES: Final[Rule] = ("coordination.k8s.io", "leases", ("get", "list", "create", "update", "delete"))
"""Leader election: one Lease in --lease-namespace; with --shard, one per replica (listed by
label, deleted at a clean stop)."""
BOOTSTRAP_SECRETS: Final[Rule] = ("", "secrets", ("get", "create", "update", "delete"))
"""Operator mode: a new Site's bootstrap credential in --bootstrap-namespace, deleted once used."""
OWN: Final[tuple[Rule, ...]] = (LEASES, BOOTSTRAP_SECRETS)

RULES: Final[tuple[Rule, ...]] = NAMESPACED + CLUSTER + OWN
"""Everything, whatever the scope (the audit log's view: one identity, every request)."""

CAPI_READS: Final[tuple[Rule, ...]] = (
    # CAPI's kubeadm bootstrap controller (>= 1.14) reads the Cluster's controlPlaneRef object, and
    # the topology controller reads ClusterClass templates: read only, nothing else.
    ("controlplane.cluster.x-k8s.io", "remotekamajicontrolplanes", ("get", "list", "watch")),
    ("controlplane.cluster.x-k8s.io", "remotekamajicontrolplanetemplates", ("get", "list", "watch")),
)
"""What CAPI's controllers may do with our kinds (``cluster.x-k8s.io/aggregate-to-manager``)."""
