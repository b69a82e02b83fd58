"""protocol.sealing: sealed boxes open only with the hub's key; key ids pick the key."""

from __future__ import annotations

import pytest

from protocol import errors, keys, sealing
from tests import helpers

HUB = keys.new_sealing_key()
NEWER = keys.new_sealing_key()
STRANGER = keys.new_sealing_key()


def public(k: object) -> keys.PublicKey:
    return keys.public_entry(bytes(k.public_key), created_at=helpers.T0)  # type: ignore[attr-defined]


def test_seal_and_open() -> None:
    box = sealing.seal(b"admin.conf contents", public(HUB))
    assert b"admin.conf" not in box
    assert sealing.Keyring([HUB]).open(box, key_id=public(HUB).key_id) == b"admin.conf contents"


def test_opens_only_with_the_recipients_key() -> None:
    box = sealing.seal(b"secret", public(HUB))
    wrong = sealing.Keyring([STRANGER])
    with pytest.raises(errors.SealError, match="unknown key id"):
        wrong.open(box, key_id=public(HUB).key_id)
    # Even when the id is made to match, a different private key cannot open the box.
    with pytest.raises(errors.SealError, match="does not open"):
        wrong.open(box, key_id=public(STRANGER).key_id)


def test_keyring_keeps_older_keys_for_rotation() -> None:
    ring = sealing.Keyring([HUB, NEWER])
    assert ring.key_ids == {public(HUB).key_id, public(NEWER).key_id}
    for k in (HUB, NEWER):
        assert ring.open(sealing.seal(b"x", public(k)), key_id=public(k).key_id) == b"x"


def test_corrupt_box_is_a_seal_error() -> None:
    box = bytearray(sealing.seal(b"secret", public(HUB)))
    box[-1] ^= 1
    with pytest.raises(errors.SealError, match="does not open"):
        sealing.Keyring([HUB]).open(bytes(box), key_id=public(HUB).key_id)
    with pytest.raises(errors.SealError):
        sealing.Keyring([HUB]).open(b"short", key_id=public(HUB).key_id)


def test_checksum_is_sha256_hex() -> None:
    assert sealing.checksum(b"test") == "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"


def test_a_retired_key_is_never_opened_even_if_its_private_key_is_at_hand() -> None:
    ring = sealing.Keyring([HUB, NEWER], retired=[public(HUB).key_id])
    assert ring.key_ids == {public(NEWER).key_id}
    with pytest.raises(errors.SealError, match=f"sealed to retired key id '{public(HUB).key_id}'"):
        ring.open(sealing.seal(b"x", public(HUB)), key_id=public(HUB).key_id)
