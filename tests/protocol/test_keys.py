"""protocol.keys: key ids, key text, the hub-public-keys document."""

from __future__ import annotations

import datetime as dt
import hashlib

import pytest

from protocol import errors, keys
from tests import helpers


def test_key_id_is_first_8_bytes_of_sha256_in_hex() -> None:
    raw = bytes(range(32))
    assert keys.key_id(raw) == hashlib.sha256(raw).hexdigest()[:16]


def test_private_key_text_round_trip() -> None:
    k = keys.new_signing_key()
    assert bytes(keys.load_signing_key(keys.to_text(bytes(k)))) == bytes(k)
    s = keys.new_sealing_key()
    assert bytes(keys.load_sealing_key(keys.to_text(bytes(s)) + "\n")) == bytes(s)


@pytest.mark.parametrize(("text", "mentions"), [("***", "not base64"), ("c2hvcnQ=", "32 bytes")])
def test_bad_key_text(text: str, mentions: str) -> None:
    with pytest.raises(errors.SealError, match=mentions):
        keys.load_sealing_key(text)


def test_public_keys_document_round_trip_and_newest_sealing_key() -> None:
    old = keys.public_entry(bytes(keys.new_sealing_key().public_key), created_at=helpers.T0)
    new = keys.public_entry(
        bytes(keys.new_sealing_key().public_key), created_at=helpers.T0 + dt.timedelta(days=1)
    )
    sign = keys.public_entry(bytes(keys.new_signing_key().verify_key), created_at=helpers.T0)
    doc = keys.HubPublicKeys(signing=(sign,), sealing=(new, old))
    back = keys.decode_public_keys(keys.encode_public_keys(doc))
    assert back == doc
    assert back.newest_sealing() == new
    assert set(back.verify_keys()) == {sign.key_id}


def test_public_keys_document_with_a_wrong_key_id_is_refused() -> None:
    entry = keys.public_entry(bytes(keys.new_signing_key().verify_key), created_at=helpers.T0)
    forged = keys.PublicKey(key_id="0" * 16, public_key=entry.public_key, created_at=helpers.T0)
    with pytest.raises(errors.DecodeError, match="does not match"):
        keys.decode_public_keys(keys.encode_public_keys(keys.HubPublicKeys(signing=(forged,))))


def test_no_sealing_key() -> None:
    with pytest.raises(errors.SealError, match="no sealing key"):
        keys.HubPublicKeys().newest_sealing()


def test_a_retired_id_is_neither_trusted_nor_sealed_to_even_if_still_listed() -> None:
    old, new = (keys.new_sealing_key() for _ in range(2))
    entries = [
        keys.public_entry(bytes(k.public_key), created_at=helpers.T0 + dt.timedelta(days=i))
        for i, k in enumerate((old, new))
    ]
    sign = keys.public_entry(bytes(keys.new_signing_key().verify_key), created_at=helpers.T0)
    # A stale copy merged back: the newest sealing key and the signing key listed and retired.
    doc = keys.HubPublicKeys(
        signing=(sign,), sealing=tuple(entries), retired=(sign.key_id, entries[1].key_id)
    )
    back = keys.decode_public_keys(keys.encode_public_keys(doc))
    assert back.verify_keys() == {} and back.trusted_key_ids() == ()
    assert back.newest_sealing() == entries[0]
    with pytest.raises(errors.SealError, match="no sealing key that is not retired"):
        keys.HubPublicKeys(sealing=(entries[0],), retired=(entries[0].key_id,)).newest_sealing()


def test_a_document_without_retired_ids_still_decodes() -> None:
    """hub-public-keys.json written before `keys retire` existed."""
    sign = keys.public_entry(bytes(keys.new_signing_key().verify_key), created_at=helpers.T0)
    old = keys.encode_public_keys(keys.HubPublicKeys(signing=(sign,))).replace(
        b'  "retired": []', b'  "x": 0'
    )
    assert b"retired" not in old
    assert keys.decode_public_keys(old).retired == ()


@pytest.mark.parametrize("kid", ["", "ABCDEF0123456789", "0123456789abcde", "0123456789abcdef0", "../../x"])
def test_retired_ids_must_be_key_ids(kid: str) -> None:
    doc = keys.encode_public_keys(keys.HubPublicKeys(retired=(kid,)))
    with pytest.raises(errors.DecodeError, match="is not a key id"):
        keys.decode_public_keys(doc)
