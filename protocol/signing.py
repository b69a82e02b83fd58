"""Ed25519 signatures over intents (the hub signs, agents verify).

The signed bytes are canonical: the intent's JSON object without its ``signature`` member,
re-encoded with sorted keys. They depend neither on the order of fields on the wire nor on the
signature, and they are computed from the raw message, so a field added in a later schema
version is still covered by the signature even where an older agent does not know the field.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Collection, Mapping
from typing import Any

import msgspec
import nacl.exceptions
import nacl.signing

from protocol import errors, keys, messages

_SIGNATURE_FIELD = "signature"


def canonical_bytes(document: Mapping[str, Any]) -> bytes:
    body = {k: v for k, v in document.items() if k != _SIGNATURE_FIELD}
    return msgspec.json.encode(body, order="sorted")


def sign(intent: messages.Intent, signing_key: nacl.signing.SigningKey) -> messages.Intent:
    """Return ``intent`` with ``key_id`` and ``signature`` set by ``signing_key``."""
    kid = keys.key_id(bytes(signing_key.verify_key))
    unsigned = msgspec.structs.replace(intent, key_id=kid, signature="")
    document = msgspec.to_builtins(unsigned)
    signature = signing_key.sign(canonical_bytes(document)).signature
    return msgspec.structs.replace(unsigned, signature=base64.b64encode(signature).decode("ascii"))


def verify(
    data: bytes, trusted: Mapping[str, nacl.signing.VerifyKey], *, retired: Collection[str] = ()
) -> messages.Intent:
    """Decode and verify a raw intent against the trusted keys (by key id, for rotation).

    Raises DecodeError for bytes that are not an intent, SignatureError for an unsigned,
    tampered or untrusted one, RetiredKeyError for one naming a ``retired`` key id (checked
    first: a retired key is refused even where a stale ``trusted`` still holds it).
    """
    intent = messages.decode_intent(data)
    if not intent.signature or not intent.key_id:
        raise errors.SignatureError("intent is not signed")
    if intent.key_id in retired:
        raise errors.RetiredKeyError(f"intent signed by retired key id {intent.key_id!r}")
    verify_key = trusted.get(intent.key_id)
    if verify_key is None:
        raise errors.SignatureError(f"intent signed by untrusted key id {intent.key_id!r}")
    try:
        signature = base64.b64decode(intent.signature, validate=True)
    except (binascii.Error, ValueError):
        raise errors.SignatureError("intent signature is not base64") from None
    # Decoding already succeeded, so the raw document is a JSON object.
    document = msgspec.json.decode(data)
    try:
        verify_key.verify(canonical_bytes(document), signature)
    except (nacl.exceptions.BadSignatureError, ValueError):
        raise errors.SignatureError(
            f"intent signature does not verify with key id {intent.key_id!r}"
        ) from None
    return intent
