"""The sandbox directory: making it safe to (re)use, and where everything in it lives.

Owns the directory's marker (only a sandbox's own directory is ever wiped) and every path the
system writes or hands to a process: keys, NATS credentials and TLS files, kubeconfigs, CRDs,
logs. Pure paths, no I/O but ``prepare_directory``. ``Layout`` is the first layer of
``sandbox.launcher.system.System``, which every other layer reads its paths from.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from common.files import natsserver, operator
from sandbox import processes
from sandbox.launcher.options import MGMT, Options

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
"""The checkout's manifests: what an operator installs, and what the release is built from."""

__all__ = ["DEPLOY", "MARKER", "Layout", "prepare_directory"]

MARKER = ".kamaji-broker-sandbox"
"""Written into every sandbox directory (with the launcher's PID): only such a directory is ever
wiped, so ``--dir ~`` by mistake fails instead of deleting a home directory."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def prepare_directory(directory: Path) -> None:
    """Make ``directory`` an empty sandbox directory: create it, or wipe an earlier sandbox's.

    Wiping matters: an earlier run's JetStream store would replay its intents into the fresh
    emulated clusters. Refuses a non-empty directory that is not a sandbox's, and one whose
    sandbox is still running.
    """
    marker = directory / MARKER
    if directory.exists():
        if not directory.is_dir():
            raise processes.LaunchError(f"{directory} exists and is not a directory")
        if any(directory.iterdir()):
            if not marker.is_file():
                raise processes.LaunchError(
                    f"{directory} is not empty and is not a sandbox directory (no {MARKER}); "
                    "choose another --dir"
                )
            owner = marker.read_text().strip()
            if owner.isdigit() and int(owner) != os.getpid() and _alive(int(owner)):
                raise processes.LaunchError(
                    f"a sandbox (pid {owner}) is running in {directory}; stop it first "
                    f"(or delete {marker} if that process is not a sandbox)"
                )
            shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)
    marker.write_text(f"{os.getpid()}\n")


class Layout:
    """``options`` and the paths under ``directory``, fixed when the system is made."""

    def __init__(self, directory: Path, options: Options) -> None:
        self.directory = directory
        self.options = options
        self.keys_dir = directory / "keys"
        """What ``keys generate`` wrote: the signing key, the sealing keys, the hub's public keys."""
        self.nats_dir = directory / "nats"
        """What ``nats-config`` and ``site add`` wrote: server configuration, seeds, Site manifests."""
        self.logs_dir = directory / "logs"
        self.crds_dir = directory / "crds"
        """The RKCP, RKCP template and Site CRDs as ``hub.api.crds`` renders them."""
        self.tls_dir = self.nats_dir / "tls"
        """The CA (ca.crt, ca.key) and the server certificate ``nats-config --tls-generate`` made."""
        self.nats_ca_file = self.tls_dir / "ca.crt"
        """What hub and agents (and any client of this system) verify the server with."""
        self.hub_operator_dir = self.nats_dir / operator.HUB_DIR
        """What ``nats-config --auth operator`` wrote for the hub (``--nats-operator-dir``)."""
        self.hub_credential_file = self.nats_dir / "launcher-hub.creds"
        """Where ``identities.Identities.hub_credential`` writes the launcher's user with the
        hub's permissions (the hub itself mints its own)."""
        self.observer_credential_file = self.nats_dir / natsserver.OBSERVER_CREDS
        """``kamaji-broker status``'s read-only user, as ``nats-config`` wrote it."""
        self.hub_public_keys = self.keys_dir / "hub-public-keys.json"
        self.mgmt_kubeconfig = self.kubeconfig(MGMT)

    @property
    def sites(self) -> tuple[str, ...]:
        return self.options.sites

    @property
    def namespace(self) -> str:
        """The target namespace at every site."""
        return self.options.namespace

    def bootstrap_creds(self, site: str) -> Path:
        """The single-use bootstrap credential ``site add`` wrote: the agent's first start."""
        return self.nats_dir / natsserver.SITES_DIR / f"{site}{natsserver.BOOTSTRAP_SUFFIX}"

    def site_credential_file(self, site: str) -> Path:
        """Where ``identities.Identities.site_credential`` writes a credential of ``site``'s."""
        return self.nats_dir / natsserver.SITES_DIR / f"{site}.creds"

    def site_manifest(self, site: str) -> Path:
        """The ``Site`` object ``site add`` wrote for ``site``."""
        return self.nats_dir / natsserver.SITES_DIR / f"{site}.site.yaml"

    def kubeconfig(self, cluster: str) -> Path:
        """DIR/<cluster>.kubeconfig for ``mgmt`` or a site."""
        return self.directory / f"{cluster}.kubeconfig"

    def log(self, name: str) -> Path:
        return self.logs_dir / f"{name}.log"
