"""common.files.tls: the names a server certificate carries, and the checks of brought files."""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path

import pytest
from cryptography import x509

from common.files import atomic, tls

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
DEFAULTS = ["ip:127.0.0.1", "dns:localhost"]


@pytest.mark.parametrize(
    ("hosts", "expected"),
    [
        pytest.param([], ["ip:127.0.0.1", "dns:localhost"], id="defaults"),
        pytest.param(["nats.example.com"], [*DEFAULTS, "dns:nats.example.com"], id="dns"),
        pytest.param(["10.0.0.7", "::1"], [*DEFAULTS, "ip:10.0.0.7", "ip:::1"], id="ips"),
        pytest.param(["Nats.Example.COM", "nats.example.com", " "], ["ip:127.0.0.1", "dns:localhost",
                     "dns:nats.example.com"], id="case-and-duplicates"),
        pytest.param(["*.nats-headless.nats.svc.cluster.local"], ["ip:127.0.0.1", "dns:localhost",
                     "dns:*.nats-headless.nats.svc.cluster.local"], id="wildcard-for-routes"),
        pytest.param(["localhost", "127.0.0.1"], ["ip:127.0.0.1", "dns:localhost"], id="defaults-again"),
    ],
)  # fmt: skip
def test_subject_alternative_names(hosts: list[str], expected: list[str]) -> None:
    def show(name: x509.GeneralName) -> str:
        if isinstance(name, x509.IPAddress):
            return f"ip:{name.value}"
        return f"dns:{name.value}"

    assert [show(n) for n in tls.subject_alternative_names(hosts)] == expected


@pytest.mark.parametrize("host", ["nats/x", "user@nats", "nats:4222", "a b", ".nats", "nats..example"])
def test_a_host_that_is_no_name_is_refused(host: str) -> None:
    with pytest.raises(ValueError, match=rf"--tls-host '{host}' is neither an IP address nor a DNS name"):
        tls.subject_alternative_names([host])


def test_without_defaults_only_the_hosts() -> None:
    names = tls.subject_alternative_names(["nats.example.com"], defaults=())
    assert names == [x509.DNSName("nats.example.com")]


def test_server_certificate_never_outlives_its_ca() -> None:
    ca_key, ca = tls.new_ca(now=NOW, days=10)
    _, cert = tls.new_server_certificate(ca_key, ca, hosts=[], now=NOW)
    assert cert.not_valid_after_utc == ca.not_valid_after_utc
    assert tls.signed_by(cert, ca) and not tls.signed_by(cert, tls.new_ca(now=NOW)[1])


def test_generate_renews_a_certificate_near_its_expiry(tmp_path: Path) -> None:
    first = tls.generate(tmp_path, now=NOW)
    old = first.cert.read_bytes()
    assert tls.generate(tmp_path, now=NOW + dt.timedelta(days=30)).cert.read_bytes() == old
    later = NOW + dt.timedelta(days=tls.SERVER_DAYS) - tls.RENEW_BEFORE + dt.timedelta(days=1)
    renewed = tls.generate(tmp_path, now=later)
    assert renewed.cert.read_bytes() != old
    cert = x509.load_pem_x509_certificate(renewed.cert.read_bytes())
    assert cert.not_valid_before_utc > NOW


def test_generate_reissues_a_certificate_of_another_ca(tmp_path: Path) -> None:
    tls.generate(tmp_path / "a", now=NOW)
    tls.generate(tmp_path / "b", now=NOW)
    # b's server certificate copied beside a's CA, as a mix-up would: a is made consistent again.
    for name in (tls.SERVER_CERT, tls.SERVER_KEY):
        (tmp_path / "a" / name).write_bytes((tmp_path / "b" / name).read_bytes())
    paths = tls.generate(tmp_path / "a", now=NOW)
    assert paths.ca is not None
    tls.check(paths)  # raises when not signed by the CA


def test_check_names_an_unreadable_key_without_echoing_it(tmp_path: Path) -> None:
    paths = tls.generate(tmp_path / "t", now=NOW)
    secret = "-----BEGIN PRIVATE KEY-----\nTOPSECRETMATERIAL\n-----END PRIVATE KEY-----\n"
    atomic.write_private(tmp_path / "bad.key", secret)
    with pytest.raises(ValueError, match="is not an unencrypted PEM private key") as refused:
        tls.check(tls.Paths(cert=paths.cert, key=tmp_path / "bad.key", ca=paths.ca))
    assert "TOPSECRETMATERIAL" not in str(refused.value)


def test_check_names_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"--tls-cert '.*nope.crt' does not exist"):
        tls.check(tls.Paths(cert=tmp_path / "nope.crt", key=tmp_path / "nope.key", ca=None))


def test_ip_sans_are_ip_addresses() -> None:
    (entry,) = tls.subject_alternative_names(["192.0.2.1"], defaults=())
    assert entry == x509.IPAddress(ipaddress.ip_address("192.0.2.1"))
