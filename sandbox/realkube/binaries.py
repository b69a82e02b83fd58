"""Where the real Kubernetes binaries (and ``linkshaper``) are, and building them when missing.

``gomod/build.sh`` builds kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and
etcd from the Go modules that ``gomod/kubernetes`` and ``gomod/etcd`` pin, into a cache outside
the checkout (``gomod/build.sh --dir`` prints it). A binary in ``$KUBEBUILDER_ASSETS`` (envtest's
convention) is taken first. Talks to the file system and, in ``build``, runs the script.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["NAMES", "Binaries", "MissingBinaries", "build", "find", "linkshaper"]

NAMES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")

GOMOD = Path(__file__).resolve().parents[2] / "gomod"
"""The wrapper modules and the build script, in the checkout (not in an installed package)."""


class MissingBinaries(RuntimeError):
    """Some binary is neither in ``$KUBEBUILDER_ASSETS`` nor in the cache: the message says
    which and how to build them."""


@dataclass(frozen=True)
class Binaries:
    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kubectl: Path


def cache_dir(build_set: str = "kube") -> Path:
    """The directory ``gomod/build.sh`` builds ``build_set`` into (it knows the pinned versions)."""
    script = GOMOD / "build.sh"
    if not script.is_file():
        raise MissingBinaries(f"{script} is not there: the real binaries are built from a checkout")
    out = subprocess.run(
        ["bash", str(script), "--dir", build_set], check=True, capture_output=True, text=True
    )
    return Path(out.stdout.strip())


def _lookup(name: str, cache: Path) -> Path | None:
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    for directory in ([Path(assets)] if assets else []) + [cache]:
        path = directory / name
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def find() -> Binaries:
    """Every binary, from ``$KUBEBUILDER_ASSETS`` or the cache; ``MissingBinaries`` if any is absent."""
    cache = cache_dir()
    found = {name: _lookup(name, cache) for name in NAMES}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise MissingBinaries(
            f"missing {', '.join(missing)} (looked in $KUBEBUILDER_ASSETS and {cache}): "
            "`make kube-binaries` builds them from Go modules (Go needed)"
        )
    return Binaries(**{name.replace("-", "_"): path for name, path in found.items() if path is not None})


def build() -> Binaries:
    """Build what is missing (``gomod/build.sh``; minutes the first time, nothing after) and find them."""
    if shutil.which("go") is None and not os.environ.get("KUBEBUILDER_ASSETS"):
        raise MissingBinaries("go is not installed: the real Kubernetes binaries are built from Go modules")
    subprocess.run(["bash", str(GOMOD / "build.sh")], check=True, stdout=subprocess.DEVNULL)
    return find()


def linkshaper(*, build_missing: bool = False) -> Path:
    """``linkshaper`` (``gomod/build.sh net``: a site's link delayed, lossy or cut), built first
    when missing and ``build_missing``; ``MissingBinaries`` saying how to build it."""
    path = cache_dir("net") / "linkshaper"
    if build_missing and not path.is_file() and shutil.which("go") is not None:
        subprocess.run(["bash", str(GOMOD / "build.sh"), "net"], check=True, stdout=subprocess.DEVNULL)
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise MissingBinaries(
            f"missing {path}: `make kube-binaries` (or `bash gomod/build.sh net`) builds linkshaper "
            "(Go needed)"
        )
    return path
