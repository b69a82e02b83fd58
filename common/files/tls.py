"""TLS material for nats-server: a private CA and a server certificate, made with ``cryptography``.

    DIR/ca.crt       the CA certificate: every client (hub, agents) verifies the server with it
    DIR/ca.key       the CA's private key (0600): keep it offline once the server cert is issued
    DIR/server.crt   the server certificate, signed by the CA, SANs 127.0.0.1, localhost + hosts
    DIR/server.key   its private key (0600)

``new_ca`` and ``new_server_certificate`` are pure (``now`` is passed in); ``generate`` owns the
files and is idempotent: an existing CA is kept (clients keep trusting it), and the server
certificate is issued again only when it is missing, names fewer hosts than asked for, is not
signed by that CA, or expires within ``RENEW_BEFORE``. ``check`` validates files an operator
brings (``--tls-cert/--tls-key/--tls-ca``) before a server is configured with them.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes, PublicKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from common.files import atomic

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
SERVER_CERT = "server.crt"
SERVER_KEY = "server.key"

DEFAULT_HOSTS = ("127.0.0.1", "localhost")
"""Always in the server certificate: the sandbox, the tests and a port-forward connect there."""
CA_DAYS = 3650
SERVER_DAYS = 825
"""The longest lifetime public clients accept for a server certificate (CA/Browser Forum)."""
RENEW_BEFORE = dt.timedelta(days=30)

Key = ec.EllipticCurvePrivateKey


@dataclass(frozen=True)
class Paths:
    """Where the server's certificate and key are, and the CA file clients verify it with."""

    cert: Path
    key: Path
    ca: Path | None


def _new_key() -> Key:
    # P-256: what every TLS stack (Go's crypto/tls in nats-server, OpenSSL in Python) supports.
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kamaji-broker"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def subject_alternative_names(
    hosts: Iterable[str], *, defaults: Iterable[str] = DEFAULT_HOSTS
) -> list[x509.GeneralName]:
    """``defaults`` (127.0.0.1, localhost) and ``hosts``, de-duplicated: IP addresses as
    IPAddress entries (clients compare those for IP URLs), everything else as DNS names."""
    seen: list[x509.GeneralName] = []
    for host in (*defaults, *hosts):
        host = host.strip()
        if not host:
            continue
        try:
            entry: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            if any(c in host for c in " /:@") or host.startswith(".") or ".." in host:
                raise ValueError(f"--tls-host {host!r} is neither an IP address nor a DNS name") from None
            entry = x509.DNSName(host.lower())
        if entry not in seen:
            seen.append(entry)
    return seen


def _builder(
    subject: x509.Name, issuer: x509.Name, key: Key, *, not_before: dt.datetime, not_after: dt.datetime
) -> x509.CertificateBuilder:
    """A certificate of ``key`` for ``subject``, valid from five minutes before ``not_before``
    (clocks differ a little) to ``not_after``, with a random serial."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before - dt.timedelta(minutes=5))
        .not_valid_after(not_after)
    )


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    """What a key may do: a CA's signs certificates (and CRLs), a server's signs its handshakes."""
    return x509.KeyUsage(
        digital_signature=not ca,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def new_ca(*, now: dt.datetime, days: int = CA_DAYS) -> tuple[Key, x509.Certificate]:
    key = _new_key()
    name = _name("kamaji-broker NATS CA")
    cert = (
        _builder(name, name, key, not_before=now, not_after=now + dt.timedelta(days=days))
        # pathlen 0: this CA signs server certificates only, never another CA.
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def new_server_certificate(
    ca_key: Key,
    ca_cert: x509.Certificate,
    *,
    hosts: Iterable[str],
    now: dt.datetime,
    days: int = SERVER_DAYS,
    defaults: Iterable[str] = DEFAULT_HOSTS,
) -> tuple[Key, x509.Certificate]:
    key = _new_key()
    sans = subject_alternative_names(hosts, defaults=defaults)
    not_after = min(now + dt.timedelta(days=days), ca_cert.not_valid_after_utc)
    cert = (
        _builder(
            _name("kamaji-broker NATS server"), ca_cert.subject, key, not_before=now, not_after=not_after
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        # Server and client auth: the cluster's routes present this certificate to each other.
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


def pem_key(key: Key) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def pem_cert(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _load_cert(path: Path, *, what: str) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(path.read_bytes())
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {str(path)!r} does not exist") from None
    except ValueError as exc:
        raise ValueError(f"{what} {str(path)!r} is not a PEM certificate: {exc}") from None


def _load_key(path: Path, *, what: str) -> PrivateKeyTypes:
    try:
        return serialization.load_pem_private_key(path.read_bytes(), password=None)
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {str(path)!r} does not exist") from None
    except (ValueError, TypeError) as exc:
        # Never echo the file's content: it is a private key.
        raise ValueError(f"{what} {str(path)!r} is not an unencrypted PEM private key ({exc})") from None


def _public_der(public: PublicKeyTypes) -> bytes:
    return public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def check(paths: Paths) -> None:
    """Refuse files that cannot work: unreadable, key not matching the certificate, certificate
    not signed by the CA clients are told to trust. Raises ValueError / FileNotFoundError."""
    cert = _load_cert(paths.cert, what="--tls-cert")
    key = _load_key(paths.key, what="--tls-key")
    if _public_der(key.public_key()) != _public_der(cert.public_key()):
        raise ValueError(f"--tls-key {str(paths.key)!r} is not the key of --tls-cert {str(paths.cert)!r}")
    if paths.ca is not None:
        ca = _load_cert(paths.ca, what="--tls-ca")
        if not signed_by(cert, ca):
            raise ValueError(
                f"--tls-cert {str(paths.cert)!r} is not signed by --tls-ca {str(paths.ca)!r}: "
                "clients verifying with that CA would refuse the server"
            )


def _names(cert: x509.Certificate) -> list[x509.GeneralName]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return []
    return list(ext.value)


def _current(directory: Path, ca: x509.Certificate, wanted: list[x509.GeneralName], now: dt.datetime) -> bool:
    """Whether the server certificate in ``directory`` can stay."""
    cert_file, key_file = directory / SERVER_CERT, directory / SERVER_KEY
    if not (cert_file.is_file() and key_file.is_file()):
        return False
    cert = _load_cert(cert_file, what="server certificate")
    return (
        signed_by(cert, ca)
        and all(name in _names(cert) for name in wanted)
        and cert.not_valid_after_utc - now > RENEW_BEFORE
    )


def generate(directory: Path, *, hosts: Iterable[str] = (), now: dt.datetime | None = None) -> Paths:
    """Make (or keep) the CA and the server certificate in ``directory``; see the module docstring."""
    now = now or dt.datetime.now(dt.UTC)
    wanted = subject_alternative_names(hosts)
    ca_cert_file, ca_key_file = directory / CA_CERT, directory / CA_KEY
    if ca_cert_file.is_file() and ca_key_file.is_file():
        ca_cert = _load_cert(ca_cert_file, what="CA certificate")
        loaded = _load_key(ca_key_file, what="CA key")
        if not isinstance(loaded, ec.EllipticCurvePrivateKey):
            raise ValueError(f"CA key {str(ca_key_file)!r} is not the EC key this command makes")
        ca_key = loaded
    else:
        ca_key, ca_cert = new_ca(now=now)
        atomic.write_private(ca_key_file, pem_key(ca_key))
        atomic.write_public(ca_cert_file, pem_cert(ca_cert))
    if not _current(directory, ca_cert, wanted, now):
        key, cert = new_server_certificate(ca_key, ca_cert, hosts=hosts, now=now)
        atomic.write_private(directory / SERVER_KEY, pem_key(key))
        atomic.write_public(directory / SERVER_CERT, pem_cert(cert))
    return Paths(cert=directory / SERVER_CERT, key=directory / SERVER_KEY, ca=ca_cert_file)
