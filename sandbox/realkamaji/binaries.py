"""Where the Kamaji operator, kwok and Kamaji's manifests are: built from Go modules.

``gomod/build.sh kamaji`` builds them into a cache outside the checkout (``--dir kamaji`` prints
it): ``kamaji``, ``kwok``, ``crds/`` (Kamaji's CustomResourceDefinitions), ``webhooks/`` (its
webhooks' rules as controller-gen writes them), of the version ``gomod/kamaji`` pins, and
``kwok-stages.yaml`` (kwok's own "fast" stages: what it does to Nodes and Pods). Talks
to the file system.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sandbox.realkube import binaries as kbin

__all__ = ["KamajiBinaries", "find"]


@dataclass(frozen=True)
class KamajiBinaries:
    kamaji: Path
    kwok: Path
    crds: tuple[Path, ...]
    """Kamaji's CRDs (DataStore, TenantControlPlane), as its module ships them."""
    webhooks: Path
    """The directory of ``mutating-webhook.yaml`` and ``validating-webhook.yaml``."""
    kwok_stages: Path


def find() -> KamajiBinaries:
    """What the cache holds; ``MissingBinaries`` naming what is absent and how to build it."""
    cache = kbin.cache_dir("kamaji")
    kamaji, kwok, crds, webhooks = cache / "kamaji", cache / "kwok", cache / "crds", cache / "webhooks"
    missing = [p.name for p in (kamaji, kwok) if not (p.is_file() and os.access(p, os.X_OK))]
    missing += [p.name + "/" for p in (crds, webhooks) if not p.is_dir()]
    stages = cache / "kwok-stages.yaml"
    missing += [] if stages.is_file() else [stages.name]
    if missing:
        raise kbin.MissingBinaries(
            f"missing {', '.join(missing)} in {cache}: `make kube-binaries` (or `bash gomod/build.sh "
            "kamaji`) builds the Kamaji operator and kwok from Go modules (Go needed)"
        )
    return KamajiBinaries(
        kamaji=kamaji,
        kwok=kwok,
        crds=tuple(sorted(crds.glob("*.yaml"))),
        webhooks=webhooks,
        kwok_stages=stages,
    )
