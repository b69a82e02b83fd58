"""TLS of the NATS connection: the SSL context clients verify the server with, and TLS failures
in plain words.

The context trusts exactly the CA file it is given (not the system's CAs as well): a site's NATS
server certificate comes from the operator's CA (``kamaji-broker nats-config --tls-generate``,
cert-manager), and nothing else may stand in for it. ``describe`` turns what nats-py reports for
a failed (re)connect into one line that names the CA file and the verification failure, for the
log and for ``/readyz``: a wrong CA must not look like an unreachable server.
"""

from __future__ import annotations

import ssl
from pathlib import Path

TLS_SCHEME = "tls://"


def context(ca_file: Path | None) -> ssl.SSLContext:
    """Verify the server's certificate and hostname against ``ca_file`` (else the system's CAs).

    ``create_default_context`` with a ``cafile`` loads only that file: the system's CAs stay out.
    """
    if ca_file is not None and not ca_file.is_file():
        raise ValueError(f"NATS CA file {str(ca_file)!r} does not exist")
    try:
        ctx = ssl.create_default_context(cafile=str(ca_file) if ca_file is not None else None)
    except ssl.SSLError as exc:
        raise ValueError(f"NATS CA file {str(ca_file)!r} holds no usable PEM certificate: {exc}") from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def wanted(servers: tuple[str, ...], ca_file: Path | None) -> bool:
    """TLS is on with a CA file or a ``tls://`` URL; then it is required (no plaintext fallback)."""
    return ca_file is not None or any(s.strip().startswith(TLS_SCHEME) for s in servers)


def _trust(ca_file: Path | None) -> str:
    return (
        f"CA file {str(ca_file)!r}" if ca_file is not None else "the system's CAs (no --nats-ca-file given)"
    )


_CUT_SHORT = frozenset(
    {
        "APPLICATION_DATA_AFTER_CLOSE_NOTIFY",
        "UNEXPECTED_EOF_WHILE_READING",
        "DECRYPTION_FAILED_OR_BAD_RECORD_MAC",
    }
)
"""Reasons a handshake ends that a bad link gives (a connection cut, or the end of an abandoned
one arriving late), not a server that does not speak TLS as it should."""


def cut_short(exc: BaseException) -> bool:
    """Whether ``exc`` is a TLS handshake the network ended, rather than a misconfiguration."""
    if isinstance(exc, ssl.SSLEOFError | ssl.SSLZeroReturnError):
        return True
    return isinstance(exc, ssl.SSLError) and getattr(exc, "reason", None) in _CUT_SHORT


def describe(exc: BaseException, *, ca_file: Path | None) -> str | None:
    """One line for a TLS failure, or None when ``exc`` is not about TLS."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        why = getattr(exc, "verify_message", None) or getattr(exc, "reason", None) or str(exc)
        return f"TLS: the NATS server's certificate failed verification against {_trust(ca_file)}: {why}"
    if cut_short(exc):
        why = getattr(exc, "reason", None) or type(exc).__name__
        return f"TLS handshake with the NATS server cut short ({why}): the link dropped or closed it"
    if isinstance(exc, ssl.SSLError):
        why = getattr(exc, "reason", None) or str(exc)
        return (
            f"TLS handshake with the NATS server failed ({why}); the server must serve TLS first "
            f"(its tls {{}} block with handshake_first, as `kamaji-broker nats-config` writes it); "
            f"verifying against {_trust(ca_file)}"
        )
    return None
