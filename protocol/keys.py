"""Hub key material: Ed25519 signing keys, X25519 sealing keys, key ids, the public-keys file.

Key id = hex of the first 8 bytes of SHA-256 of the raw public key, so hub and agent derive the
same id from the key alone. Private keys travel as one line of base64 (the raw 32 bytes);
the public keys an agent trusts travel as one JSON document (``HubPublicKeys``), which holds
several keys of each kind during a rotation, and the ids of keys retired for good
(``kamaji-broker keys retire``): a retired id is never trusted nor sealed to, even if a stale copy
still lists its key. Pure: files are read and written by the callers.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import re
from typing import Final, Literal

import msgspec
import nacl.public
import nacl.signing

from protocol import errors

PUBLIC_KEYS_SCHEMA: Final = "kamaji-broker.io/hub-public-keys/v1"
Use = Literal["signing", "sealing"]
_KEY_ID = re.compile(r"[0-9a-f]{16}")


def key_id(public_key: bytes) -> str:
    return hashlib.sha256(public_key).digest()[:8].hex()


def is_key_id(text: str) -> bool:
    """16 lowercase hex digits, what ``key_id`` makes (also safe as a file name)."""
    return _KEY_ID.fullmatch(text) is not None


def to_text(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def from_text(text: str, *, what: str) -> bytes:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise errors.SealError(f"{what}: not base64") from None
    if len(raw) != 32:
        raise errors.SealError(f"{what}: expected 32 bytes of key, got {len(raw)}")
    return raw


def new_signing_key() -> nacl.signing.SigningKey:
    return nacl.signing.SigningKey.generate()


def new_sealing_key() -> nacl.public.PrivateKey:
    return nacl.public.PrivateKey.generate()


def load_signing_key(text: str) -> nacl.signing.SigningKey:
    return nacl.signing.SigningKey(from_text(text, what="signing key"))


def load_sealing_key(text: str) -> nacl.public.PrivateKey:
    return nacl.public.PrivateKey(from_text(text, what="sealing key"))


class PublicKey(msgspec.Struct, frozen=True, kw_only=True):
    key_id: str
    public_key: str
    """base64 of the raw 32-byte public key."""
    created_at: dt.datetime

    def raw(self) -> bytes:
        raw = from_text(self.public_key, what=f"public key {self.key_id}")
        if key_id(raw) != self.key_id:
            raise errors.SealError(f"public key {self.key_id}: key id does not match the key")
        return raw


class HubPublicKeys(msgspec.Struct, frozen=True, kw_only=True):
    """What an agent needs from the hub: keys that sign intents, keys to seal secrets to."""

    schema: str = PUBLIC_KEYS_SCHEMA
    signing: tuple[PublicKey, ...] = ()
    sealing: tuple[PublicKey, ...] = ()
    retired: tuple[str, ...] = ()
    """Key ids retired by ``keys retire`` (signing or sealing): never trusted, never sealed to.
    Retired wins over a listing, so a file merged from a stale copy cannot bring a key back."""

    def newest_sealing(self) -> PublicKey:
        usable = [k for k in self.sealing if k.key_id not in self.retired]
        if not usable:
            raise errors.SealError("hub public keys hold no sealing key that is not retired")
        return max(usable, key=lambda k: k.created_at)

    def verify_keys(self) -> dict[str, nacl.signing.VerifyKey]:
        return {
            k.key_id: nacl.signing.VerifyKey(k.raw()) for k in self.signing if k.key_id not in self.retired
        }

    def trusted_key_ids(self) -> tuple[str, ...]:
        """Signing key ids trusted (not retired), in file order: what an agent reports it trusts."""
        return tuple(k.key_id for k in self.signing if k.key_id not in self.retired)


def public_entry(public_key: bytes, *, created_at: dt.datetime) -> PublicKey:
    return PublicKey(key_id=key_id(public_key), public_key=to_text(public_key), created_at=created_at)


def encode_public_keys(keys: HubPublicKeys) -> bytes:
    return msgspec.json.format(msgspec.json.encode(keys), indent=2) + b"\n"


def decode_public_keys(data: bytes | str) -> HubPublicKeys:
    try:
        keys = msgspec.json.decode(data, type=HubPublicKeys)
    except (msgspec.MsgspecError, ValueError, UnicodeError) as exc:
        raise errors.DecodeError(f"invalid hub public keys: {exc}") from None
    if keys.schema != PUBLIC_KEYS_SCHEMA:
        raise errors.DecodeError(f"invalid hub public keys: unsupported schema {keys.schema!r}")
    for k in (*keys.signing, *keys.sealing):
        try:
            k.raw()
        except errors.SealError as exc:
            raise errors.DecodeError(f"invalid hub public keys: {exc}") from None
    for kid in keys.retired:
        if not is_key_id(kid):
            raise errors.DecodeError(
                f"invalid hub public keys: retired {kid!r} is not a key id (16 hex digits)"
            )
    return keys
