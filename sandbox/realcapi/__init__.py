"""Cluster API's own controllers on a real management cluster, built from its Go module.

binaries    where Cluster API's manager, clusterctl, CRDs, webhook rules and clusterctl
            repository are (``gomod/build.sh capi`` builds them from Go modules)
clusterctl  Clusterctl: clusterctl with file:// repositories of Cluster API's providers and
            kamaji-broker's release (init, generate, describe, upgrade plan, move)
manager     CoreManager: Cluster API's CRDs, its manager in the management cluster's network
            namespace, its webhooks registered by URL (``sandbox.realkube.webhooks``)

The stand-in (``sandbox.capi``) stays the sandbox's fast default; this is what it and the hub's
reading of the Cluster API contract are measured against.
"""

from sandbox.realcapi.clusterctl import Clusterctl
from sandbox.realcapi.manager import CoreManager

__all__ = ["Clusterctl", "CoreManager"]
