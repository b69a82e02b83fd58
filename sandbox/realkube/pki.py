"""The key material of one real cluster, as kubeadm lays it out, written into its directory.

    ca.crt, ca.key           the cluster CA: it signs the serving and the client certificates
    server.crt, server.key   kube-apiserver's serving certificate (127.0.0.1, localhost, its address)
    sa.key, sa.pub           the ServiceAccount token signing key (kube-apiserver, controller-manager)
                             and its public half (kube-apiserver verifies tokens with it)
    admin.kubeconfig         kubernetes-admin (system:masters): what an operator's kubectl uses
    <component>.kubeconfig   system:kube-controller-manager, system:kube-scheduler: each component
                             as the user Kubernetes' bootstrap RBAC grants its rights to

Made once per directory and kept (a cluster restarted on its etcd keeps trusting its clients).
Talks to the file system; the certificates come from ``common.files.tls`` and ``sandbox.kamaji.pki``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from common.files import atomic, tls
from sandbox.kamaji import pki as kpki

__all__ = ["COMPONENTS", "Paths", "generate"]

COMPONENTS = {
    "controller-manager": kpki.ClientIdentity(user="system:kube-controller-manager", groups=()),
    "scheduler": kpki.ClientIdentity(user="system:kube-scheduler", groups=()),
}


@dataclass(frozen=True)
class Paths:
    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / tls.CA_CERT

    @property
    def ca_key(self) -> Path:
        return self.directory / tls.CA_KEY

    @property
    def server_cert(self) -> Path:
        return self.directory / tls.SERVER_CERT

    @property
    def server_key(self) -> Path:
        return self.directory / tls.SERVER_KEY

    @property
    def service_account_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def service_account_public_key(self) -> Path:
        return self.directory / "sa.pub"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.directory / "admin.kubeconfig"

    def kubeconfig(self, component: str) -> Path:
        return self.directory / f"{component}.kubeconfig"


def _kubeconfig(
    paths: Paths, identity: kpki.ClientIdentity, *, cluster: str, server: str, now: dt.datetime
) -> str:
    ca = kpki.load_ca(paths.ca.read_bytes(), paths.ca_key.read_bytes())
    cert, key = kpki.new_client_certificate(ca, identity, now=now)
    return kpki.new_kubeconfig(
        cluster=cluster,
        server=server,
        ca_pem=ca.cert_pem,
        user=identity.user,
        client_cert_pem=cert,
        client_key_pem=key,
    )


def generate(
    directory: Path, *, cluster: str, server: str, hosts: tuple[str, ...] = (), now: dt.datetime | None = None
) -> Paths:
    """The CA, serving certificate (for ``hosts`` too), token signing key and kubeconfigs in
    ``directory``; what is there is kept, but every kubeconfig names ``server`` (a restart may
    serve on another port)."""
    now = now or dt.datetime.now(dt.UTC)
    paths = Paths(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tls.generate(directory, hosts=(*tls.DEFAULT_HOSTS, *hosts), now=now)
    if not paths.service_account_key.is_file():
        key = ec.generate_private_key(ec.SECP256R1())
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        atomic.write_private(paths.service_account_key, pem.decode())
        spki = serialization.PublicFormat.SubjectPublicKeyInfo
        public = key.public_key().public_bytes(serialization.Encoding.PEM, spki)
        atomic.write_public(paths.service_account_public_key, public.decode())
    atomic.write_private(
        paths.admin_kubeconfig, _kubeconfig(paths, kpki.ADMIN, cluster=cluster, server=server, now=now)
    )
    for component, identity in COMPONENTS.items():
        text = _kubeconfig(paths, identity, cluster=cluster, server=server, now=now)
        atomic.write_private(paths.kubeconfig(component), text)
    return paths
