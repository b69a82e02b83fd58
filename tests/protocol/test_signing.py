"""protocol.signing: Ed25519 over canonical bytes, trusted keys by id (rotation)."""

from __future__ import annotations

import base64

import msgspec
import pytest

from protocol import errors, keys, messages, signing
from tests import helpers

HUB = keys.new_signing_key()
OTHER = keys.new_signing_key()
TRUSTED = {keys.key_id(bytes(HUB.verify_key)): HUB.verify_key}


def signed_bytes() -> bytes:
    return messages.encode(signing.sign(helpers.intent(), HUB))


def test_sign_sets_key_id_and_verifies() -> None:
    intent = signing.sign(helpers.intent(), HUB)
    assert intent.key_id == keys.key_id(bytes(HUB.verify_key))
    assert len(base64.b64decode(intent.signature)) == 64
    assert signing.verify(messages.encode(intent), TRUSTED) == intent


def test_field_order_does_not_matter() -> None:
    doc = msgspec.json.decode(signed_bytes())
    reordered = dict(reversed(list(doc.items())))
    reordered["spec"] = dict(reversed(list(doc["spec"].items())))
    assert signing.verify(msgspec.json.encode(reordered), TRUSTED).name == "cp1"


def test_canonical_bytes_ignore_the_signature_field() -> None:
    doc = msgspec.json.decode(signed_bytes())
    assert signing.canonical_bytes(doc) == signing.canonical_bytes({**doc, "signature": "other"})
    assert b"signature" not in signing.canonical_bytes(doc)


def test_fields_unknown_to_this_version_are_signed_too() -> None:
    doc = msgspec.to_builtins(helpers.intent())
    doc["future_field"] = "covered"
    doc["key_id"] = keys.key_id(bytes(HUB.verify_key))
    doc["signature"] = base64.b64encode(HUB.sign(signing.canonical_bytes(doc)).signature).decode()
    assert signing.verify(msgspec.json.encode(doc), TRUSTED).name == "cp1"
    doc["future_field"] = "tampered"
    with pytest.raises(errors.SignatureError, match="does not verify"):
        signing.verify(msgspec.json.encode(doc), TRUSTED)


@pytest.mark.parametrize(
    ("field", "value"),
    [("site", "site-b"), ("generation", 99), ("op", "delete"), ("spec", {"evil": True}), ("name", "cp2")],
)
def test_tampered_intent_is_rejected(field: str, value: object) -> None:
    doc = msgspec.json.decode(signed_bytes())
    doc[field] = value
    with pytest.raises(errors.SignatureError, match="does not verify"):
        signing.verify(msgspec.json.encode(doc), TRUSTED)


def test_unknown_key_is_rejected() -> None:
    data = messages.encode(signing.sign(helpers.intent(), OTHER))
    with pytest.raises(errors.SignatureError, match="untrusted key id"):
        signing.verify(data, TRUSTED)


def test_signature_by_another_key_under_a_trusted_id_is_rejected() -> None:
    doc = msgspec.json.decode(messages.encode(signing.sign(helpers.intent(), OTHER)))
    doc["key_id"] = keys.key_id(bytes(HUB.verify_key))
    with pytest.raises(errors.SignatureError, match="does not verify"):
        signing.verify(msgspec.json.encode(doc), TRUSTED)


@pytest.mark.parametrize(("key_id", "signature"), [("", ""), ("abc", ""), ("", "c2ln")])
def test_unsigned_intent_is_rejected(key_id: str, signature: str) -> None:
    data = messages.encode(msgspec.structs.replace(helpers.intent(), key_id=key_id, signature=signature))
    with pytest.raises(errors.SignatureError, match="not signed"):
        signing.verify(data, TRUSTED)


def test_signature_that_is_not_base64() -> None:
    doc = msgspec.json.decode(signed_bytes())
    doc["signature"] = "%%%"
    with pytest.raises(errors.SignatureError, match="base64"):
        signing.verify(msgspec.json.encode(doc), TRUSTED)


def test_rotation_trusts_a_set_of_keys() -> None:
    both = {**TRUSTED, keys.key_id(bytes(OTHER.verify_key)): OTHER.verify_key}
    for key in (HUB, OTHER):
        assert signing.verify(messages.encode(signing.sign(helpers.intent(), key)), both).site == "site-a"


def test_garbage_is_a_decode_error_not_a_signature_error() -> None:
    with pytest.raises(errors.DecodeError):
        signing.verify(b"not json", TRUSTED)


def test_a_retired_key_is_refused_by_name_even_if_still_trusted() -> None:
    data = signed_bytes()
    kid = keys.key_id(bytes(HUB.verify_key))
    with pytest.raises(errors.RetiredKeyError, match=f"retired key id '{kid}'"):
        signing.verify(data, TRUSTED, retired={kid})
    assert signing.verify(data, TRUSTED, retired={"0" * 16}).name == "cp1"
