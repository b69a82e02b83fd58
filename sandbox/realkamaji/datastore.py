"""The site's DataStore: an etcd with TLS that Kamaji keeps every tenant's state in.

Why etcd: it is Kamaji's own default and the driver its maintainers run most (the others go
through kine, a translation layer that would be one more process per control plane), and the
binary is already built for the real clusters. Laid out in its directory:

    ca.crt, ca.key       the DataStore's CA: Kamaji signs each tenant's etcd client certificate
                         with it (so the key is given to Kamaji, as Kamaji's etcd chart does)
    server.crt/.key      etcd's serving certificate, for the namespace's address
    root.crt, root.key   the client certificate Kamaji connects as (CN root)
    data/                the store

``manifests`` are what the site's API server is given: the Secret of those certificates in the
operator's namespace and the ``DataStore`` that points at them. Talks to the file system; the
process is a ``sandbox.processes.Child`` the site runs.
"""

from __future__ import annotations

import base64
import datetime as dt
import ssl
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from common.files import atomic
from common.files import tls as tlsfiles
from sandbox import processes
from sandbox.kamaji import pki as kpki

__all__ = ["NAME", "PORT", "DataStore"]

NAME = "default"
PORT = 2379
SECRET = "kamaji-datastore-etcd"


class DataStore:
    """etcd with TLS on ``host``:``PORT`` (inside the site's namespace: ``prefix`` runs it there)."""

    def __init__(self, directory: Path, *, host: str, etcd: Path, prefix: list[str]) -> None:
        self.directory = directory
        self.host = host
        self._etcd = etcd
        self._prefix = prefix

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{PORT}"

    def _file(self, name: str) -> Path:
        return self.directory / name

    def generate(self, *, now: dt.datetime | None = None) -> None:
        """The CA, etcd's serving certificate and Kamaji's client certificate (kept once made)."""
        now = now or dt.datetime.now(dt.UTC)
        self.directory.mkdir(parents=True, exist_ok=True)
        if not self._file("ca.key").is_file():
            ca = kpki.new_ca("kamaji-datastore-ca", now=now)
            atomic.write_private(self._file("ca.key"), ca.key_pem.decode())
            atomic.write_public(self._file("ca.crt"), ca.cert_pem.decode())
        ca = kpki.load_ca(self._file("ca.crt").read_bytes(), self._file("ca.key").read_bytes())
        ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
        key, cert = tlsfiles.new_server_certificate(
            ca_key, x509.load_pem_x509_certificate(ca.cert_pem), hosts=(self.host,), now=now
        )
        atomic.write_private(self._file("server.key"), tlsfiles.pem_key(key))
        atomic.write_public(self._file("server.crt"), tlsfiles.pem_cert(cert))
        root_cert, root_key = kpki.new_client_certificate(
            ca, kpki.ClientIdentity(user="root", groups=()), now=now
        )
        atomic.write_private(self._file("root.key"), root_key.decode())
        atomic.write_public(self._file("root.crt"), root_cert.decode())

    def child(self, *, log: Path) -> processes.Child:
        d = self.directory
        url = f"https://{self.endpoint}"
        args = [
            *self._prefix,
            str(self._etcd),
            "--name=datastore",
            f"--data-dir={d / 'data'}",
            "--log-level=warn",
        ]
        args += [f"--listen-client-urls={url}", f"--advertise-client-urls={url}"]
        args += [f"--cert-file={d / 'server.crt'}", f"--key-file={d / 'server.key'}"]
        args += [f"--trusted-ca-file={d / 'ca.crt'}", "--client-cert-auth", "--unsafe-no-fsync"]
        args += [
            "--listen-peer-urls=http://127.0.0.1:2380",
            "--initial-advertise-peer-urls=http://127.0.0.1:2380",
        ]
        args += ["--initial-cluster=datastore=http://127.0.0.1:2380"]
        tls = ssl.create_default_context(cafile=str(d / "ca.crt"))
        tls.load_cert_chain(str(d / "root.crt"), str(d / "root.key"))
        return processes.Child(name="datastore", args=args, log=log, health_url=url, health_tls=tls)

    def manifests(self, namespace: str) -> list[dict[str, Any]]:
        """The Secret of the certificates Kamaji needs and the ``DataStore`` naming them."""

        def data(name: str) -> str:
            return base64.b64encode(self._file(name).read_bytes()).decode()

        keys = {"ca.crt": "ca.crt", "ca.key": "ca.key", "tls.crt": "root.crt", "tls.key": "root.key"}
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": SECRET, "namespace": namespace},
            "type": "Opaque",
            "data": {key: data(name) for key, name in keys.items()},
        }

        def ref(key: str) -> dict[str, Any]:
            return {"secretReference": {"name": SECRET, "namespace": namespace, "keyPath": key}}

        store = {
            "apiVersion": "kamaji.clastix.io/v1alpha1",
            "kind": "DataStore",
            "metadata": {"name": NAME},
            "spec": {
                "driver": "etcd",
                "endpoints": [self.endpoint],
                "tlsConfig": {
                    "certificateAuthority": {"certificate": ref("ca.crt"), "privateKey": ref("ca.key")},
                    "clientCertificate": {"certificate": ref("tls.crt"), "privateKey": ref("tls.key")},
                },
            },
        }
        return [secret, store]
