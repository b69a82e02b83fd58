"""One real Kubernetes cluster on this machine: etcd, kube-apiserver, kube-controller-manager and,
when asked, kube-scheduler, each an OS process of the binaries ``sandbox.realkube.binaries`` finds.

Laid out in its directory: ``pki/`` (``sandbox.realkube.pki``), ``etcd/`` (the store),
``logs/<component>.log`` and ``audit.log``: one JSON line per request of every user but the
cluster's own (the admin, its components, kube-system's controllers), which tells what a
ServiceAccount did with its rights. Authentication is by client certificate (the admin, each component
as its own user) and ServiceAccount token; authorisation is RBAC and nothing else, so every
request but the admin's is allowed or refused as on a production cluster. Ready when etcd and
kube-apiserver answer ``/readyz`` and the controller manager has made the ``default``
ServiceAccount (its token and ServiceAccount controllers run). ``stop`` ends every process (by
PID, each in a group of its own) and keeps the directory.

Given a ``sandbox.sitenet.Namespace``, the cluster runs inside it: its servers listen on the
namespace's address (this machine reaches them over the veth pair) and its Service network is
the namespace's, routed from this machine, so a Service's cluster IP can be served for real.
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import time
from pathlib import Path

from common import kube
from common.files import atomic
from common.kube import resources, reviews
from sandbox import ports, processes
from sandbox.realkube import binaries as kbin
from sandbox.realkube import pki, tokens
from sandbox.sitenet import Namespace

__all__ = ["SERVICE_CIDR", "Cluster"]

SERVICE_CIDR = "10.96.0.0/16"

AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: None
    userGroups: ["system:masters"]
  - level: None
    users: ["system:kube-controller-manager", "system:kube-scheduler", "system:apiserver"]
  - level: None
    userGroups: ["system:serviceaccounts:kube-system"]
  - level: Metadata
"""
"""Who did what (user, verb, resource, response code), never a body: no Secret reaches the log."""


class Cluster:
    """A real cluster named ``name`` in ``directory``; ``start``, then ``url`` and ``kubeconfig``."""

    def __init__(
        self,
        directory: Path,
        *,
        name: str,
        binaries: kbin.Binaries | None = None,
        scheduler: bool = False,
        netns: Namespace | None = None,
    ) -> None:
        self.directory = directory
        self.name = name
        self._binaries = binaries
        self._scheduler = scheduler
        self.netns = netns
        self.host = netns.address if netns is not None else "127.0.0.1"
        """Where its servers listen."""
        self.service_cidr = str(netns.services) if netns is not None else SERVICE_CIDR
        self.children: dict[str, processes.Child] = {}
        self.port = 0
        self.started_in = 0.0
        """Seconds the last ``start`` took, from the first process to the default ServiceAccount."""

    @property
    def binaries(self) -> kbin.Binaries:
        """The binaries it runs (found on first use when none were given)."""
        if self._binaries is None:
            self._binaries = kbin.find()
        return self._binaries

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    @property
    def pki(self) -> pki.Paths:
        return pki.Paths(self.directory / "pki")

    @property
    def audit_log(self) -> Path:
        return self.directory / "audit.log"

    @property
    def kubeconfig(self) -> Path:
        """The admin's kubeconfig (system:masters)."""
        return self.pki.admin_kubeconfig

    def write_kubeconfig(self, path: Path) -> Path:
        """A copy of the admin's kubeconfig at ``path``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.kubeconfig, path)
        path.chmod(0o600)
        return path

    async def service_account_kubeconfig(self, *, namespace: str, name: str, path: Path) -> Path:
        """Write at ``path`` a kubeconfig of ServiceAccount ``namespace/name`` (a token from the
        TokenRequest API, as a pod of it would mount); return ``path``."""
        admin = await kube.connect(in_cluster=False, kubeconfig=self.kubeconfig)
        try:
            token = await reviews.service_account_token(
                admin, namespace=namespace, name=name, seconds=tokens.TOKEN_SECONDS
            )
        finally:
            await admin.close()
        ca_pem = await asyncio.to_thread(self.pki.ca.read_bytes)
        text = tokens.kubeconfig(server=self.url, ca_pem=ca_pem, namespace=namespace, name=name, token=token)
        atomic.write_private(path, text)
        return path

    def _child(self, component: str, args: list[str], **probe: object) -> processes.Child:
        log = self.directory / "logs" / f"{component}.log"
        if self.netns is not None:
            args = self.netns.exec_prefix() + args
        child = processes.Child(name=f"{component}-{self.name}", args=args, log=log, **probe)  # type: ignore[arg-type]
        self.children[component] = child
        return child

    def _etcd(self, b: kbin.Binaries) -> processes.Child:
        client, peer = ports.free_port(), ports.free_port()
        data = self.directory / "etcd"
        args = [str(b.etcd), f"--name={self.name}", f"--data-dir={data}", "--log-level=warn"]
        args += [
            f"--listen-client-urls=http://{self.host}:{client}",
            f"--advertise-client-urls=http://{self.host}:{client}",
        ]
        args += [
            f"--listen-peer-urls=http://{self.host}:{peer}",
            f"--initial-advertise-peer-urls=http://{self.host}:{peer}",
        ]
        # One member, a store that tests throw away: no fsync (envtest does the same).
        args += [f"--initial-cluster={self.name}=http://{self.host}:{peer}", "--unsafe-no-fsync"]
        self._etcd_url = f"http://{self.host}:{client}"
        return self._child("etcd", args, health_url=self._etcd_url)

    def _apiserver(self, b: kbin.Binaries) -> processes.Child:
        p = self.pki
        args = [str(b.kube_apiserver), f"--etcd-servers={self._etcd_url}", "--etcd-prefix=/registry"]
        args += [
            f"--bind-address={self.host}",
            f"--advertise-address={self.host}",
            f"--secure-port={self.port}",
        ]
        args += [f"--tls-cert-file={p.server_cert}", f"--tls-private-key-file={p.server_key}"]
        args += [f"--client-ca-file={p.ca}", "--authorization-mode=RBAC", "--allow-privileged=true"]
        args += [f"--service-account-key-file={p.service_account_public_key}"]
        args += [f"--service-account-signing-key-file={p.service_account_key}"]
        args += ["--service-account-issuer=https://kubernetes.default.svc.cluster.local"]
        args += [
            f"--service-cluster-ip-range={self.service_cidr}",
            f"--cert-dir={self.directory / 'apiserver'}",
        ]
        args += [
            "--profiling=false",
            "--enable-priority-and-fairness=false",
            "--endpoint-reconciler-type=none",
        ]
        policy = self.directory / "audit-policy.yaml"
        policy.write_text(AUDIT_POLICY)
        args += [
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-mode=blocking",
        ]
        tls = ssl.create_default_context(cafile=str(p.ca))
        return self._child("kube-apiserver", args, health_url=self.url, health_tls=tls)

    def _controller_manager(self, b: kbin.Binaries) -> processes.Child:
        p = self.pki
        args = [str(b.kube_controller_manager), f"--kubeconfig={p.kubeconfig('controller-manager')}"]
        args += [f"--service-account-private-key-file={p.service_account_key}", f"--root-ca-file={p.ca}"]
        args += [f"--cluster-signing-cert-file={p.ca}", f"--cluster-signing-key-file={p.ca_key}"]
        args += ["--use-service-account-credentials=true", "--leader-elect=false", "--secure-port=0"]
        args += [f"--service-cluster-ip-range={self.service_cidr}", "--profiling=false"]
        return self._child("kube-controller-manager", args)

    def _scheduler_child(self, b: kbin.Binaries) -> processes.Child:
        config = self.pki.kubeconfig("scheduler")
        args = [str(b.kube_scheduler), f"--kubeconfig={config}", "--leader-elect=false", "--secure-port=0"]
        return self._child("kube-scheduler", args)

    async def start(self, *, timeout: float = 90.0) -> None:
        """Start every process and wait until the cluster serves; ``LaunchError`` with the end of
        the failing component's log if one exits or is not ready within ``timeout``."""
        began = time.monotonic()
        b = self.binaries
        self.port = ports.free_port()
        pki.generate(self.pki.directory, cluster=self.name, server=self.url, hosts=(self.host,))
        try:
            for make in (self._etcd, self._apiserver):
                child = make(b)
                child.start()
                await child.wait_ready(timeout=timeout - (time.monotonic() - began))
            later = [self._controller_manager(b)] + ([self._scheduler_child(b)] if self._scheduler else [])
            for child in later:
                child.start()
            await self._wait_default_service_account(later, deadline=began + timeout)
        except BaseException:
            await self.stop()
            raise
        self.started_in = time.monotonic() - began

    async def _wait_default_service_account(self, watched: list[processes.Child], *, deadline: float) -> None:
        client = await kube.connect(in_cluster=False, kubeconfig=self.kubeconfig)
        try:
            while await client.get_or_none(resources.SERVICE_ACCOUNT, "default", namespace="default") is None:
                for child in watched:
                    if child.returncode is not None:
                        raise processes.LaunchError(
                            f"{child.name} exited with code {child.returncode} while starting; "
                            f"end of {child.log}:\n{processes.tail(child.log)}"
                        )
                if time.monotonic() > deadline:
                    raise processes.LaunchError(
                        f"cluster {self.name}: no default ServiceAccount yet (kube-controller-manager "
                        f"not working?); end of {watched[0].log}:\n{processes.tail(watched[0].log)}"
                    )
                await asyncio.sleep(0.1)
        finally:
            await client.close()

    async def stop(self, *, timeout: float = 10.0) -> None:
        """SIGTERM to every process, controllers first and etcd last; SIGKILL after ``timeout``."""
        for child in reversed(list(self.children.values())):
            child.terminate()
            await child.wait_stopped(timeout=timeout)
