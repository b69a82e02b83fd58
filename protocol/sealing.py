"""Sealed boxes (X25519 + XSalsa20-Poly1305, libsodium): agents seal secrets to the hub.

Only the holder of the hub's sealing private key opens a box. The hub keeps older private
keys in its keyring so boxes sealed before a rotation still open; the box names its
recipient by key id so the hub picks the right one without trial decryption.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import nacl.exceptions
import nacl.public

from protocol import errors, keys


def checksum(plaintext: bytes) -> str:
    return hashlib.sha256(plaintext).hexdigest()


def seal(plaintext: bytes, recipient: keys.PublicKey) -> bytes:
    return nacl.public.SealedBox(nacl.public.PublicKey(recipient.raw())).encrypt(plaintext)


class Keyring:
    """The hub's sealing private keys by key id; ``retired`` ids are never opened, even where
    their private key is still at hand (a Secret updated without pruning its old entries)."""

    def __init__(
        self, private_keys: Iterable[nacl.public.PrivateKey], *, retired: Iterable[str] = ()
    ) -> None:
        self.retired = frozenset(retired)
        self._keys = {
            kid: k for k in private_keys if (kid := keys.key_id(bytes(k.public_key))) not in self.retired
        }

    @property
    def key_ids(self) -> frozenset[str]:
        return frozenset(self._keys)

    def open(self, ciphertext: bytes, *, key_id: str) -> bytes:
        if key_id in self.retired:
            raise errors.SealError(
                f"sealed to retired key id {key_id!r}: the site has not re-sealed to a current hub key"
            )
        private = self._keys.get(key_id)
        if private is None:
            raise errors.SealError(f"sealed to unknown key id {key_id!r}")
        try:
            return nacl.public.SealedBox(private).decrypt(ciphertext)
        except (nacl.exceptions.CryptoError, ValueError, TypeError):
            raise errors.SealError(
                f"sealed box for key id {key_id!r} does not open (corrupt or wrong key)"
            ) from None
