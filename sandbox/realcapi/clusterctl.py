"""clusterctl as users run it, against file:// repositories: Cluster API's core and kubeadm
bootstrap providers from its module (``gomod/build.sh capi``) and kamaji-broker's release
(``python -m kamaji_broker.release``, what ``make release-manifests`` writes).

``config`` is the clusterctl.yaml that names the three repositories and the variables (pure);
``Clusterctl.run`` runs one clusterctl command with it, its version check off and its home (its
cache and overrides) in the topology's directory, and returns what it printed; a failure is a
``LaunchError`` with that output. ``Clusterctl.init`` is ``clusterctl init --control-plane
kamaji-broker``, which brings the core and kubeadm bootstrap providers along as on a first run.
Talks to the operating system and, through clusterctl, to a management cluster.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import yaml

from sandbox import processes
from sandbox.realcapi import binaries as capi_binaries

__all__ = ["PROVIDER", "Clusterctl", "config"]

PROVIDER: Final = "kamaji-broker"
"""The control-plane provider's name in clusterctl.yaml."""
PROVIDER_LABEL: Final = "control-plane-kamaji-broker"
"""Its repository's directory, as ``kamaji_broker.release`` writes it."""


def config(
    *, capi: capi_binaries.CapiBinaries, release: Path, variables: Mapping[str, str] | None = None
) -> str:
    """clusterctl.yaml naming Cluster API's core and kubeadm bootstrap providers and the release
    directory ``release`` (``<out>/control-plane-kamaji-broker/v<version>/``) as file://
    repositories, with ``variables``."""
    version = capi.version
    providers = [
        ("cluster-api", "CoreProvider", capi.repository / "cluster-api" / version / "core-components.yaml"),
        (
            "kubeadm",
            "BootstrapProvider",
            capi.repository / "bootstrap-kubeadm" / version / "bootstrap-components.yaml",
        ),
        (PROVIDER, "ControlPlaneProvider", release / "control-plane-components.yaml"),
    ]
    document: dict[str, object] = {
        "providers": [{"name": n, "type": t, "url": f"file://{path}"} for n, t, path in providers],
        **dict(variables or {}),
    }
    return yaml.safe_dump(document, sort_keys=False)


class Clusterctl:
    """clusterctl with the repositories of ``config`` (its files in ``directory``)."""

    def __init__(self, directory: Path, *, deploy: Path, variables: Mapping[str, str] | None = None) -> None:
        self.directory = directory
        self.deploy = deploy
        """The checkout's ``deploy/``, the release is built from."""
        self.binaries = capi_binaries.find()
        self.variables = dict(variables or {})
        self._release: Path | None = None

    @property
    def config_file(self) -> Path:
        return self.directory / "clusterctl.yaml"

    @property
    def log(self) -> Path:
        return self.directory / "clusterctl.log"

    def release(self) -> Path:
        """The release's repository directory, built once (``python -m kamaji_broker.release``)."""
        if self._release is None:
            out = self.directory / "release"
            self.directory.mkdir(parents=True, exist_ok=True)
            processes.run(
                [
                    sys.executable,
                    "-m",
                    "kamaji_broker.release",
                    "--deploy",
                    str(self.deploy),
                    "--out",
                    str(out),
                ],
                log=self.log,
            )
            [made] = (out / PROVIDER_LABEL).iterdir()
            self._release = made
            self.config_file.write_text(config(capi=self.binaries, release=made, variables=self.variables))
        return self._release

    def run_sync(
        self, *args: str, kubeconfig: Path | None = None, env: Mapping[str, str] | None = None
    ) -> str:
        """``clusterctl ARGS`` (``--config`` and ``--kubeconfig`` added, ``env`` for a template's
        variables); what it printed."""
        self.release()
        command = [str(self.binaries.clusterctl), *args, "--config", str(self.config_file)]
        if kubeconfig is not None:
            command += ["--kubeconfig", str(kubeconfig)]
        environment = {
            **os.environ,
            **(env or {}),
            "CLUSTERCTL_DISABLE_VERSIONCHECK": "true",
            "HOME": str(self.directory / "home"),
            "XDG_CONFIG_HOME": str(self.directory / "home" / ".config"),
        }
        done = subprocess.run(
            command, env=environment, capture_output=True, text=True, timeout=300, check=False
        )
        shown = " ".join(["clusterctl", *args])
        with open(self.log, "a") as log:
            log.write(f"$ {shown}\n{done.stdout}{done.stderr}\n")
        if done.returncode != 0:
            raise processes.LaunchError(
                f"{shown} exited with code {done.returncode}:\n{done.stdout}{done.stderr}"
            )
        return done.stdout

    async def run(
        self, *args: str, kubeconfig: Path | None = None, env: Mapping[str, str] | None = None
    ) -> str:
        return await asyncio.to_thread(self.run_sync, *args, kubeconfig=kubeconfig, env=env)

    async def init(self, kubeconfig: Path) -> str:
        """``clusterctl init --control-plane kamaji-broker`` on the cluster of ``kubeconfig``."""
        return await self.run("init", "--control-plane", PROVIDER, kubeconfig=kubeconfig)
