"""sandbox.kamaji.pki: real certificates and kubeconfigs, checked with cryptography and PyYAML."""

from __future__ import annotations

import base64
import datetime
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from sandbox.kamaji import pki

NOW = datetime.datetime(2025, 6, 1, 12, 0, tzinfo=datetime.UTC)


@pytest.fixture(scope="module")
def ca() -> pki.CertificateAuthority:
    return pki.new_ca(now=NOW)


def names(cert: x509.Certificate, oid: x509.ObjectIdentifier) -> list[str]:
    return [str(a.value) for a in cert.subject.get_attributes_for_oid(oid)]


def test_new_ca_is_a_self_signed_p256_ca_valid_ten_years(ca: pki.CertificateAuthority) -> None:
    cert = x509.load_pem_x509_certificate(ca.cert_pem)
    cert.verify_directly_issued_by(cert)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign is True
    key = serialization.load_pem_private_key(ca.key_pem, password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    assert key.curve.name == "secp256r1"
    assert cert.public_key() == key.public_key()
    assert cert.not_valid_before_utc <= NOW
    assert cert.not_valid_after_utc == NOW + pki.CA_VALIDITY
    assert names(cert, NameOID.COMMON_NAME) == ["kubernetes"]


def test_client_certificate_is_issued_by_the_ca_for_the_identity(ca: pki.CertificateAuthority) -> None:
    cert_pem, key_pem = pki.new_client_certificate(ca, pki.ADMIN, now=NOW)
    cert = x509.load_pem_x509_certificate(cert_pem)
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert_pem))
    assert names(cert, NameOID.COMMON_NAME) == ["kubernetes-admin"]
    assert names(cert, NameOID.ORGANIZATION_NAME) == ["system:masters"]
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert (
        ExtendedKeyUsageOID.CLIENT_AUTH
        in cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    )
    assert cert.not_valid_after_utc == NOW + pki.CLIENT_VALIDITY
    key = serialization.load_pem_private_key(key_pem, password=None)
    assert cert.public_key() == key.public_key()


def test_a_certificate_from_another_ca_does_not_verify(ca: pki.CertificateAuthority) -> None:
    other = pki.new_ca(now=NOW)
    cert_pem, _ = pki.new_client_certificate(other, pki.ADMIN, now=NOW)
    # Same subject as the issuer (both CAs are CN=kubernetes): only the signature can tell.
    with pytest.raises(InvalidSignature):
        x509.load_pem_x509_certificate(cert_pem).verify_directly_issued_by(
            x509.load_pem_x509_certificate(ca.cert_pem)
        )


def test_load_ca_round_trips_and_rejects_a_foreign_key(ca: pki.CertificateAuthority) -> None:
    assert pki.load_ca(ca.cert_pem, ca.key_pem) == ca
    with pytest.raises(ValueError, match="does not match"):
        pki.load_ca(ca.cert_pem, pki.new_ca(now=NOW).key_pem)


def test_ca_secret_data_has_kamajis_keys(ca: pki.CertificateAuthority) -> None:
    data = pki.ca_secret_data(ca)
    assert data == {
        "ca.crt": ca.cert_pem,
        "ca.key": ca.key_pem,
        "tls.crt": ca.cert_pem,
        "tls.key": ca.key_pem,
    }


def user_cert(config: dict[str, Any]) -> x509.Certificate:
    return x509.load_pem_x509_certificate(
        base64.b64decode(config["users"][0]["user"]["client-certificate-data"])
    )


def test_admin_kubeconfig_data(ca: pki.CertificateAuthority) -> None:
    data = pki.admin_kubeconfig_data(
        ca, cluster="tcp1", server="https://10.240.0.1:6443", svc_server="https://tcp1.ns.svc:6443", now=NOW
    )
    assert sorted(data) == ["admin.conf", "admin.svc", "super-admin.conf", "super-admin.svc"]
    expected = {
        "admin.conf": ("https://10.240.0.1:6443", "kubernetes-admin"),
        "admin.svc": ("https://tcp1.ns.svc:6443", "kubernetes-admin"),
        "super-admin.conf": ("https://10.240.0.1:6443", "kubernetes-super-admin"),
        "super-admin.svc": ("https://tcp1.ns.svc:6443", "kubernetes-super-admin"),
    }
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    for key, (server, user) in expected.items():
        config = yaml.safe_load(data[key])
        cluster = config["clusters"][0]["cluster"]
        assert (cluster["server"], config["current-context"]) == (server, f"{user}@tcp1"), key
        assert base64.b64decode(cluster["certificate-authority-data"]) == ca.cert_pem
        cert = user_cert(config)
        cert.verify_directly_issued_by(ca_cert)
        assert names(cert, NameOID.COMMON_NAME) == [user]
        assert pki.kubeconfig_server(data[key]) == server


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("clusters: [{name: a, cluster: {server: 'https://a'}}]", "https://a"),
        (
            "clusters: [{name: a, cluster: {server: 'https://a'}}, {name: b, cluster: {server: 'https://b'}}]\n"
            "contexts: [{name: ctx, context: {cluster: b, user: u}}]\ncurrent-context: ctx",
            "https://b",
        ),
        ("clusters: []", None),
        ("not: [a kubeconfig", None),
        ("- a list", None),
    ],
    ids=["first cluster", "current context's cluster", "no cluster", "not YAML", "not a mapping"],
)
def test_kubeconfig_server(text: str, expected: str | None) -> None:
    assert pki.kubeconfig_server(text) == expected
