"""agent.apply.intake: bytes → a verified intent, or the specific reason it is refused, as a table."""

from __future__ import annotations

from typing import Any

import msgspec
import nacl.signing
import pytest

from agent.apply import intake
from protocol import keys, messages, signing, subjects
from tests import helpers

SIGNER = keys.new_signing_key()
TRUSTED = {keys.key_id(bytes(SIGNER.verify_key)): SIGNER.verify_key}
SUBJECT = subjects.intent("site-a", "tenants", "cp1")


def signed(
    intent: messages.Intent | None = None, *, signer: nacl.signing.SigningKey = SIGNER
) -> dict[str, Any]:
    """The JSON document of a signed intent, to tamper with after signing."""
    return dict(msgspec.json.decode(messages.encode(signing.sign(intent or helpers.intent(), signer))))


def edited(**changes: Any) -> bytes:
    return msgspec.json.encode({**signed(), **changes})


def genuine(**kw: Any) -> bytes:
    signer = kw.pop("signer", SIGNER)
    return msgspec.json.encode(signed(helpers.intent(**kw), signer=signer))


TAMPERED_SPEC = {"controlPlane": {"deployment": {"replicas": 9}}}


INTAKE: list[tuple[str, bytes, str]] = [
    # id, raw bytes on SUBJECT, refusal reason
    ("larger than the limit", b" " * (intake.MAX_INTENT_BYTES + 1), "oversized"),
    ("not JSON", b"{not json", "undecodable"),
    ("not UTF-8", b'{"op": "\xff\xfe"}', "undecodable"),
    ("nested 10,000 deep", b"[" * 10_000 + b"]" * 10_000, "undecodable"),
    ("a JSON array", b"[1, 2]", "invalid"),
    ("another schema", edited(schema="kamaji-broker.io/v2"), "unsupported_schema"),
    ("generation negative", edited(generation=-1), "invalid"),
    ("name with a dot", edited(name="cp1.x"), "invalid"),
    ("unsigned", edited(signature="", key_id=""), "unsigned"),
    ("key id removed", edited(key_id=""), "unsigned"),
    ("signed by an untrusted key", genuine(signer=keys.new_signing_key()), "untrusted_key"),
    ("spec tampered after signing", edited(spec=TAMPERED_SPEC), "bad_signature"),
    ("signature not base64", edited(signature="%%%"), "bad_signature"),
    ("other site, genuinely signed", genuine(site="site-b"), "wrong_site"),
    ("other name, genuinely signed", genuine(name="cp2"), "wrong_subject"),
]  # fmt: skip


@pytest.mark.parametrize(("data", "reason"), [c[1:] for c in INTAKE], ids=[c[0] for c in INTAKE])
def test_intake_refuses_with_the_specific_reason(data: bytes, reason: str) -> None:
    found = intake.intake(data, SUBJECT, trusted=TRUSTED, site="site-a")
    assert isinstance(found, intake.Refusal)
    assert found.reason == reason
    assert len(found.message) <= 303


def test_intake_accepts_a_genuine_intent_on_its_subject() -> None:
    found = intake.intake(msgspec.json.encode(signed()), SUBJECT, trusted=TRUSTED, site="site-a")
    assert found == signing.sign(helpers.intent(), SIGNER)


def test_refusal_messages_quote_what_the_sender_wrote() -> None:
    # A newline in a name that decodes (a trailing one) must not start a new log line.
    data = msgspec.json.encode(signed(helpers.intent(name="cp1\n")))
    found = intake.intake(data, SUBJECT, trusted=TRUSTED, site="site-a")
    assert isinstance(found, intake.Refusal) and "\n" not in found.message
