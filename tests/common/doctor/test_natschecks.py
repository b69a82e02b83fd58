"""common.doctor.natschecks: what connecting showed, decided (the texts are common.bus's own)."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.doctor import natschecks
from common.doctor.natschecks import Seen

URL = "tls://127.0.0.1:4222"
REFUSED = f"cannot connect to NATS at {URL}: [Errno 111] Connect call failed ('127.0.0.1', 4222)"
DNS = "cannot connect to NATS at tls://nats.invalid:4222: [Errno -2] Name or service not known"
AUTH = f"cannot connect to NATS at {URL}: nats: 'Authorization Violation'"
PIPE = f"cannot connect to NATS at {URL}: [Errno 32] Broken pipe"
BAD_CA = (
    f"cannot connect to NATS at {URL}: TLS: the NATS server's certificate failed verification against "
    "CA file '/x/ca.crt': unable to get local issuer certificate"
)
DEADLINE = f"cannot connect to NATS at {URL}: no connection within 5.0s"


@pytest.mark.parametrize(
    ("id_", "failures", "kind"),
    [
        ("refused", [REFUSED], "refused"),
        ("dns", [DNS], "dns"),
        (
            "authorization, whatever came after",
            [AUTH, PIPE, f"{DEADLINE}; last attempt: [Errno 32] Broken pipe"],
            "auth",
        ),
        ("wrong CA", [BAD_CA], "tls"),
        (
            "a tls:// URL alone is not a TLS failure",
            [f"{DEADLINE}; last attempt: [Errno 111] Connect call failed"],
            "refused",
        ),
        ("only the deadline", [DEADLINE], "timeout"),
        ("unknown", ["something else"], "other"),
    ],
)
def test_classify(id_: str, failures: list[str], kind: str) -> None:
    assert natschecks.classify(failures) == kind, id_


@pytest.mark.parametrize(
    ("seen", "outcome", "detail", "fix"),
    [
        (Seen(connected=True), "PASS", f"connected to {URL} as --nats-seed s.nk", ""),
        (Seen(False, (REFUSED,)), "FAIL", f"refused: {REFUSED}", f"nothing listens at --nats-url ({URL})"),
        (Seen(False, (AUTH, PIPE)), "FAIL", f"auth: {AUTH}", "the server refused --nats-seed s.nk"),
        (Seen(False, (BAD_CA,)), "FAIL", f"tls: {BAD_CA}", "give --nats-ca-file the CA that signed"),
        (Seen(False, (DNS,)), "FAIL", f"dns: {DNS}", f"the host of --nats-url ({URL}) does not resolve"),
    ],
)
def test_reachable(seen: Seen, outcome: str, detail: str, fix: str) -> None:
    got = natschecks.reachable(seen, servers=[URL], identity="--nats-seed s.nk", ca_file=Path("/x/ca.crt"))
    assert (got.outcome, got.detail) == (outcome, detail)
    assert got.fix.startswith(fix)


@pytest.mark.parametrize(
    ("id_", "seen", "uses_tls", "ca", "outcome", "detail"),
    [
        (
            "verified",
            Seen(True),
            True,
            Path("/ca.crt"),
            "PASS",
            "handshake verified the server against CA file /ca.crt",
        ),
        (
            "system CAs",
            Seen(True),
            True,
            None,
            "PASS",
            "handshake verified the server against the system's CAs",
        ),
        (
            "wrong CA",
            Seen(False, (BAD_CA,)),
            True,
            Path("/ca.crt"),
            "FAIL",
            "the server's certificate did not verify against CA file /ca.crt",
        ),
        (
            "plaintext",
            Seen(True),
            False,
            None,
            "WARN",
            f"plaintext: {URL} without TLS (credentials and secrets cross unencrypted)",
        ),
        (
            "not connected otherwise",
            Seen(False, (REFUSED,)),
            True,
            None,
            "SKIP",
            "not connected, for a reason other than TLS",
        ),
    ],
)
def test_tls(id_: str, seen: Seen, uses_tls: bool, ca: Path | None, outcome: str, detail: str) -> None:
    got = natschecks.tls(seen, servers=[URL], ca_file=ca, uses_tls=uses_tls)
    assert (got.outcome, got.detail) == (outcome, detail), id_
    assert bool(got.fix) == (outcome in ("WARN", "FAIL"))
