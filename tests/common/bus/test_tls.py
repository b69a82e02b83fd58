"""common.bus.tls: when TLS is on, the context trusts only the CA file, failures in plain words."""

from __future__ import annotations

import ssl
from pathlib import Path

import nats
import pytest

from common.bus import tls
from sandbox import natsd
from tests import helpers


@pytest.mark.parametrize(
    ("servers", "ca", "expected"),
    [
        (("nats://a:4222",), False, False),
        (("tls://a:4222",), False, True),
        (("nats://a:4222", " tls://b:4222"), False, True),
        (("nats://a:4222",), True, True),
    ],
)
def test_tls_is_on_with_a_ca_or_a_tls_url(servers: tuple[str, ...], ca: bool, expected: bool) -> None:
    assert tls.wanted(servers, helpers.nats_tls().ca if ca else None) is expected


def test_context_trusts_only_the_ca_file() -> None:
    ctx = tls.context(helpers.nats_tls().ca)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert ctx.minimum_version >= ssl.TLSVersion.TLSv1_2
    (trusted,) = ctx.get_ca_certs()  # not the system's CAs as well
    assert trusted["subject"] == (
        (("organizationName", "kamaji-broker"),),
        (("commonName", "kamaji-broker NATS CA"),),
    )


def test_context_refuses_a_missing_or_broken_ca_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"NATS CA file '.*nope.crt' does not exist"):
        tls.context(tmp_path / "nope.crt")
    (tmp_path / "bad.crt").write_text("not a certificate\n")
    with pytest.raises(ValueError, match=r"NATS CA file '.*bad.crt' holds no usable PEM certificate"):
        tls.context(tmp_path / "bad.crt")


def _verify_error(message: str) -> ssl.SSLCertVerificationError:
    exc = ssl.SSLCertVerificationError(
        1, f"[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: {message}"
    )
    exc.verify_message = message
    exc.reason = "CERTIFICATE_VERIFY_FAILED"
    return exc


def _ssl_error(reason: str) -> ssl.SSLError:
    exc = ssl.SSLError(1, f"[SSL: {reason}] {reason.lower()}")
    exc.reason = reason
    return exc


@pytest.mark.parametrize(
    ("exc", "ca", "expected"),
    [
        (_verify_error("unable to get local issuer certificate"), Path("/etc/ca.crt"),
         "TLS: the NATS server's certificate failed verification against CA file '/etc/ca.crt': "
         "unable to get local issuer certificate"),
        (_verify_error("certificate has expired"), None,
         "TLS: the NATS server's certificate failed verification against the system's CAs "
         "(no --nats-ca-file given): certificate has expired"),
        (ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number"), Path("/etc/ca.crt"),
         "TLS handshake with the NATS server failed ("),
        (_ssl_error("APPLICATION_DATA_AFTER_CLOSE_NOTIFY"), Path("/etc/ca.crt"),
         "TLS handshake with the NATS server cut short (APPLICATION_DATA_AFTER_CLOSE_NOTIFY): the link"),
        (ssl.SSLEOFError(8, "EOF occurred in violation of protocol"), None,
         "TLS handshake with the NATS server cut short (SSLEOFError)"),
        (ConnectionRefusedError(111, "Connection refused"), None, None),
    ],
)  # fmt: skip
def test_describe(exc: BaseException, ca: Path | None, expected: str | None) -> None:
    described = tls.describe(exc, ca_file=ca)
    if expected is None:
        assert described is None
    else:
        assert described is not None and described.startswith(expected)


async def test_a_raw_nats_client_connects_with_the_helpers_context(nats_server: natsd.NatsServer) -> None:
    """tests.helpers.tls_options: what attack tests give raw nats-py clients for a TLS server."""
    nc = await nats.connect(nats_server.url, **helpers.tls_options(nats_server.url), connect_timeout=5)
    try:
        await nc.flush(timeout=5)
        assert nc.is_connected
    finally:
        await nc.close()


@pytest.mark.parametrize(
    ("exc", "cut"),
    [
        (_ssl_error("APPLICATION_DATA_AFTER_CLOSE_NOTIFY"), True),
        (_ssl_error("UNEXPECTED_EOF_WHILE_READING"), True),
        (ssl.SSLZeroReturnError(6, "TLS/SSL connection has been closed (EOF)"), True),
        (_ssl_error("WRONG_VERSION_NUMBER"), False),
        (_verify_error("certificate has expired"), False),
        (ConnectionResetError(104, "Connection reset by peer"), False),
    ],
)
def test_a_handshake_the_link_cut_short_is_no_misconfiguration(exc: BaseException, cut: bool) -> None:
    assert tls.cut_short(exc) is cut
