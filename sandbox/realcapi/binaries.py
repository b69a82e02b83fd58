"""Where Cluster API's manager, clusterctl and Cluster API's manifests are: built from Go modules.

``gomod/build.sh capi`` builds them into a cache outside the checkout (``--dir capi`` prints it),
of the version ``gomod/capi`` pins: ``capi-manager`` (the core controllers and webhooks),
``clusterctl``, ``crds/`` (Cluster API's CustomResourceDefinitions), ``webhooks/manifests.yaml``
(its webhooks' rules as controller-gen writes them) and ``repository/`` (a clusterctl repository
of its core and kubeadm bootstrap providers, as its release renders them). Talks to the file
system.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sandbox.realkube import binaries as kbin

__all__ = ["CapiBinaries", "find"]


@dataclass(frozen=True)
class CapiBinaries:
    manager: Path
    clusterctl: Path
    crds: tuple[Path, ...]
    webhooks: Path
    """controller-gen's ``manifests.yaml``: the mutating and the validating configuration."""
    repository: Path
    """``cluster-api/<version>/`` and ``bootstrap-kubeadm/<version>/``, each with its components
    and ``metadata.yaml``."""

    @property
    def version(self) -> str:
        """The Cluster API release these are of: the repository's one version directory."""
        [made] = [p.name for p in (self.repository / "cluster-api").iterdir() if p.is_dir()]
        return made


def find() -> CapiBinaries:
    """What the cache holds; ``MissingBinaries`` naming what is absent and how to build it."""
    cache = kbin.cache_dir("capi")
    manager, clusterctl = cache / "capi-manager", cache / "clusterctl"
    crds, webhooks, repository = cache / "crds", cache / "webhooks" / "manifests.yaml", cache / "repository"
    missing = [p.name for p in (manager, clusterctl) if not (p.is_file() and os.access(p, os.X_OK))]
    missing += [p.name + "/" for p in (crds, repository) if not p.is_dir()]
    missing += [] if webhooks.is_file() else ["webhooks/manifests.yaml"]
    if missing:
        raise kbin.MissingBinaries(
            f"missing {', '.join(missing)} in {cache}: `make kube-binaries` (or `bash gomod/build.sh "
            "capi`) builds Cluster API's manager and clusterctl from Go modules (Go needed)"
        )
    return CapiBinaries(
        manager=manager,
        clusterctl=clusterctl,
        crds=tuple(sorted(crds.glob("*.yaml"))),
        webhooks=webhooks,
        repository=repository,
    )
