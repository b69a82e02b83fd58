"""``Options``: what a sandbox system is made of and how long it waits for its parts.

Pure data, checked when made. Given to ``sandbox.launcher.system.System`` whole, which reads
it where it needs it (``system.options``) rather than copying fields across. Made by
``sandbox.run`` (the ``kamaji-broker sandbox`` command), ``tests/systems.py`` and ``bench/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["CAPI", "KAMAJI", "KUBERNETES", "MGMT", "Options"]

KUBERNETES = ("emulator", "real")
"""What runs each cluster: ``sandbox.kubeapi`` (one process, starts in a blink) or real
etcd + kube-apiserver + kube-controller-manager (``sandbox.realkube``)."""

KAMAJI = ("simulator", "real")
"""What reconciles each site's TenantControlPlanes: ``sandbox.kamaji``'s simulator or the real
Kamaji operator (``sandbox.realkamaji``: with kwok, a DataStore and a tenant API server per
control plane; needs the real clusters)."""

CAPI = ("stand-in", "real")
"""What plays Cluster API in a management cluster: ``sandbox.capi``'s stand-in (Clusters own
what they point at, ClusterClass topologies made) or Cluster API's own manager, built from its
Go module (``sandbox.realcapi``: with its CRDs and webhooks; needs the real clusters, and runs
each management cluster in a network namespace of its own)."""

MGMT = "mgmt"
"""The management cluster's name (its emulator, its kubeconfig); no site may take it."""


@dataclass(frozen=True, kw_only=True)
class Options:
    sites: tuple[str, ...] = ("site-a", "site-b")
    """One cluster, Kamaji simulator and agent each."""
    kubernetes: str = "emulator"
    """What runs the clusters: one of ``KUBERNETES``."""
    kamaji: str = "simulator"
    """What reconciles the TenantControlPlanes at each site: one of ``KAMAJI``."""
    capi: str = "stand-in"
    """What plays Cluster API in the management clusters: one of ``CAPI``. With ``"real"`` the
    hub is installed as clusterctl installs it (``clusterctl init --control-plane kamaji-broker``)."""
    kamaji_delay: float = 3.0
    """Seconds the Kamaji simulators take from Provisioning (or Upgrading) to Ready."""
    namespace: str = "tenants"
    """The target namespace at every site."""
    rkcp_namespaces: tuple[str, ...] = ("default",)
    """Management namespaces the sites' ``Site`` objects let place control planes in ``namespace``."""
    hub_namespaces: tuple[str, ...] = ()
    """Management namespaces the hub watches (``--namespaces``), installed on real clusters with
    the component deploy/hub/namespaced (a RoleBinding in each); empty: every namespace
    (``--all-namespaces``, deploy/hub as it is)."""
    heartbeat_interval: float = 10.0
    """Seconds between the hub's and the agents' heartbeats."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Added to the hub's and the agents' environment (e.g. ``KB_LOG_LEVEL``): for settings the
    fields here do not cover."""
    args: tuple[str, ...] = ()
    """Added to the hub's and the agents' command lines (e.g. ``-vv``, ``--log-format text``)."""
    start_timeout: float = 60.0
    """Seconds each part (and a child started again) has to become ready."""
    stop_timeout: float = 10.0
    """Seconds a child has after SIGTERM before SIGKILL."""
    nats_nodes: int = 1
    """More than one: a JetStream cluster of that many nodes (children ``nats-0``.., server names
    alike) with streams at ``min(3, nats_nodes)`` replicas."""
    hub_replicas: int = 1
    """More than one: the replicas elect a leader through a Lease in ``default`` of ``mgmt``
    (children ``hub``, ``hub-1``, ...)."""
    lease_duration: float = 4.0
    """Seconds of the hub's Lease, with ``hub_replicas`` > 1."""
    shard: bool = False
    """With ``hub_replicas`` > 1: the replicas share the sites (``--shard``), each leading its
    share through a Lease of its own, instead of one leading them all."""
    site_links: bool = False
    """Each site (its API server, Kamaji simulator and agent) and each nats-server in a network
    namespace of its own, a site reaching NATS over a link the system can shape (delay, loss,
    one way, cut: ``System.link``). Needs root, iptables and linkshaper (``gomod/build.sh
    net``); emulated clusters only."""

    def __post_init__(self) -> None:
        if not self.sites:
            raise ValueError("a system needs at least one site")
        if self.kubernetes not in KUBERNETES:
            raise ValueError(f"kubernetes must be one of {', '.join(KUBERNETES)}, got {self.kubernetes!r}")
        if self.kamaji not in KAMAJI:
            raise ValueError(f"kamaji must be one of {', '.join(KAMAJI)}, got {self.kamaji!r}")
        if self.kamaji == "real" and self.kubernetes != "real":
            raise ValueError("kamaji 'real' runs on real clusters: set kubernetes to 'real' too")
        if self.capi not in CAPI:
            raise ValueError(f"capi must be one of {', '.join(CAPI)}, got {self.capi!r}")
        if self.capi == "real" and self.kubernetes != "real":
            raise ValueError("capi 'real' runs on real clusters: set kubernetes to 'real' too")
        if self.capi == "real" and self.hub_namespaces:
            raise ValueError(
                "capi 'real' installs the hub with clusterctl init, which watches every namespace"
            )
        if self.nats_nodes < 1:
            raise ValueError(f"nats_nodes must be at least 1, got {self.nats_nodes}")
        if self.hub_replicas < 1:
            raise ValueError(f"hub_replicas must be at least 1, got {self.hub_replicas}")
        if self.site_links and (self.kubernetes != "emulator" or self.kamaji != "simulator"):
            raise ValueError(
                "site_links puts emulated sites in network namespaces: kubernetes 'emulator' only"
            )
        if MGMT in self.sites:
            raise ValueError(f"{MGMT!r} names the management cluster; choose another site name")
