"""Certificates and kubeconfigs of a simulated tenant control plane, as Kamaji generates them.

Owns the key material of ``<tcp>-ca`` and ``<tcp>-admin-kubeconfig``: a real self-signed CA and
real kubeconfigs whose client certificates that CA signs, so that whatever consumes them (the
agent, the hub, kubectl) handles genuine PEM and YAML, never placeholders. Pure: no I/O and no
clock reads (``now`` is passed in); only the key generation draws randomness. ECDSA P-256 keeps
generating thousands of control planes cheap (an RSA-2048 key costs ~50x more).
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# libyaml when PyYAML has it: kubeconfigs are written for every TCP, and the pure-Python
# emitter was a fifth of the simulator's CPU under load.
_DUMPER: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

__all__ = [
    "ADMIN",
    "CA_VALIDITY",
    "CLIENT_VALIDITY",
    "SUPER_ADMIN",
    "CertificateAuthority",
    "ClientIdentity",
    "admin_kubeconfig_data",
    "ca_secret_data",
    "kubeconfig_server",
    "load_ca",
    "new_ca",
    "new_client_certificate",
    "new_kubeconfig",
]

CA_VALIDITY = datetime.timedelta(days=3650)
"""Ten years, as kubeadm (and so Kamaji) issues its cluster CA."""

CLIENT_VALIDITY = datetime.timedelta(days=365)
"""One year, as kubeadm issues the admin client certificate."""

# Backdating absorbs clock skew between the simulator and whoever verifies the certificate.
_BACKDATE = datetime.timedelta(minutes=5)


@dataclass(frozen=True)
class CertificateAuthority:
    """A CA as PEM: ``cert_pem`` (CERTIFICATE) and ``key_pem`` (EC PRIVATE KEY)."""

    cert_pem: bytes
    key_pem: bytes


@dataclass(frozen=True)
class ClientIdentity:
    """Who a kubeconfig authenticates as: the certificate's CN and O (Kubernetes user, groups)."""

    user: str
    groups: tuple[str, ...]


ADMIN = ClientIdentity(user="kubernetes-admin", groups=("system:masters",))
SUPER_ADMIN = ClientIdentity(user="kubernetes-super-admin", groups=("system:masters",))


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    # Traditional OpenSSL ("EC PRIVATE KEY") is what kubeadm writes for ECDSA keys.
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def new_ca(common_name: str = "kubernetes", *, now: datetime.datetime) -> CertificateAuthority:
    """A fresh self-signed CA valid for :data:`CA_VALIDITY` from ``now``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    public = key.public_key()
    cert = (
        _builder(name, name, public, now=now, validity=CA_VALIDITY, ca=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CertificateAuthority(cert_pem=cert.public_bytes(serialization.Encoding.PEM), key_pem=_key_pem(key))


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public: ec.EllipticCurvePublicKey,
    *,
    now: datetime.datetime,
    validity: datetime.timedelta,
    ca: bool,
) -> x509.CertificateBuilder:
    """What every certificate here has, as kubeadm issues them: names, key, a random serial, a
    backdated validity, basic constraints and key usage (both critical)."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=ca), critical=True)
    )


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    """Signing and key encipherment, plus certificate signing for a CA (as kubeadm issues them)."""
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=True,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )


def load_ca(cert_pem: bytes, key_pem: bytes) -> CertificateAuthority:
    """Check that ``cert_pem`` and ``key_pem`` form an ECDSA CA and return it; ValueError if not."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    key = serialization.load_pem_private_key(key_pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an ECDSA key")
    if cert.public_key() != key.public_key():
        raise ValueError("the CA certificate does not match its key")
    return CertificateAuthority(cert_pem=cert_pem, key_pem=key_pem)


def new_client_certificate(
    ca: CertificateAuthority, identity: ClientIdentity, *, now: datetime.datetime
) -> tuple[bytes, bytes]:
    """A client certificate for ``identity`` signed by ``ca``: ``(cert_pem, key_pem)``."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an ECDSA key")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in identity.groups]
        + [x509.NameAttribute(NameOID.COMMON_NAME, identity.user)]
    )
    cert = (
        _builder(subject, ca_cert.subject, key.public_key(), now=now, validity=CLIENT_VALIDITY, ca=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def new_kubeconfig(
    *,
    cluster: str,
    server: str,
    ca_pem: bytes,
    user: str,
    client_cert_pem: bytes,
    client_key_pem: bytes,
) -> str:
    """A kubeconfig (YAML) with one cluster, one user and one current context, as kubeadm writes it."""
    context = f"{user}@{cluster}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": cluster, "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)}}
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": _b64(client_cert_pem),
                    "client-key-data": _b64(client_key_pem),
                },
            }
        ],
        "contexts": [{"name": context, "context": {"cluster": cluster, "user": user}}],
        "current-context": context,
        "preferences": {},
    }
    return yaml.dump(config, Dumper=_DUMPER, sort_keys=False)


def kubeconfig_server(text: str | bytes) -> str | None:
    """The server URL of a kubeconfig's current context (else its first cluster); None if unreadable."""
    try:
        config = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError:
        return None
    if not isinstance(config, Mapping):
        return None
    clusters = config.get("clusters")
    if not isinstance(clusters, Sequence) or not clusters:
        return None
    wanted = _context_cluster(config)
    for entry in clusters:
        if isinstance(entry, Mapping) and (wanted is None or entry.get("name") == wanted):
            server = (entry.get("cluster") or {}).get("server")
            return server if isinstance(server, str) else None
    return None


def _context_cluster(config: Mapping[str, Any]) -> str | None:
    current = config.get("current-context")
    for entry in config.get("contexts") or ():
        if isinstance(entry, Mapping) and entry.get("name") == current:
            cluster = (entry.get("context") or {}).get("cluster")
            return cluster if isinstance(cluster, str) else None
    return None


def ca_secret_data(ca: CertificateAuthority) -> dict[str, bytes]:
    """The keys of ``<tcp>-ca``: Kamaji's ``ca.crt``/``ca.key`` plus the ``tls.*`` aliases."""
    return {"ca.crt": ca.cert_pem, "ca.key": ca.key_pem, "tls.crt": ca.cert_pem, "tls.key": ca.key_pem}


def admin_kubeconfig_data(
    ca: CertificateAuthority,
    *,
    cluster: str,
    server: str,
    svc_server: str,
    now: datetime.datetime,
) -> dict[str, bytes]:
    """The keys of ``<tcp>-admin-kubeconfig``.

    ``admin.conf``/``super-admin.conf`` point at ``server`` (the public endpoint), the ``.svc``
    variants at ``svc_server`` (the in-cluster Service); each identity gets its own certificate,
    shared by its two kubeconfigs.
    """
    data: dict[str, bytes] = {}
    for identity, stem in ((ADMIN, "admin"), (SUPER_ADMIN, "super-admin")):
        cert_pem, key_pem = new_client_certificate(ca, identity, now=now)
        for suffix, url in (("conf", server), ("svc", svc_server)):
            text = new_kubeconfig(
                cluster=cluster,
                server=url,
                ca_pem=ca.cert_pem,
                user=identity.user,
                client_cert_pem=cert_pem,
                client_key_pem=key_pem,
            )
            data[f"{stem}.{suffix}"] = text.encode()
    return data
