"""NATS decentralized-auth JWTs (operator → account → user), encoded and verified.

The format is nats-io/jwt v2's: ``base64url(header).base64url(claims).base64url(signature)``,
header ``{"typ":"JWT","alg":"ed25519-nkey"}``, the signature an Ed25519 signature by the
issuer's NKey over the first two parts, ``jti`` the base32 SHA-512/256 of the standard claims.
nats-server checks the chain: the operator JWT in its configuration, every account JWT signed by
the operator (or one of its signing keys), every user JWT by its account (or one of the
account's signing keys, then ``issuer_account`` names the account).

Written here rather than taken from PyPI: the one package (``nats-jwt`` 0.2) says of itself that
it is not well tested, and pins ``pytz<2025`` and ``pycryptodome``. What we need is small: the
claims as msgspec structs, the signing by ``nkeys`` (nats-io's own package) and the checking by
PyNaCl. Pure: the callers hold the seeds and talk to the server.
"""

from __future__ import annotations

import base64
import hashlib
import time
from typing import Literal

import msgspec
import nacl.exceptions
import nacl.signing
import nkeys

from protocol import errors

NO_LIMIT = -1
HEADER = b'{"typ":"JWT","alg":"ed25519-nkey"}'
_PREFIXES = {
    "operator": nkeys.PREFIX_BYTE_OPERATOR,
    "account": nkeys.PREFIX_BYTE_ACCOUNT,
    "user": nkeys.PREFIX_BYTE_USER,
}
Role = Literal["operator", "account", "user"]


class Allow(msgspec.Struct, frozen=True, omit_defaults=True):
    allow: tuple[str, ...] = ()


class Responses(msgspec.Struct, frozen=True):
    """``resp``: a user may publish one reply (within ``ttl`` nanoseconds) to a request it got."""

    max: int = 1
    ttl: int = 0


class User(msgspec.Struct, frozen=True, tag_field="type", tag="user"):
    """A user's ``nats`` claims: what it may publish and subscribe to, and its limits."""

    pub: Allow = Allow()
    sub: Allow = Allow()
    resp: Responses | None = None
    subs: int = NO_LIMIT
    data: int = NO_LIMIT
    payload: int = NO_LIMIT
    bearer_token: bool = False
    issuer_account: str = ""
    version: int = 2

    def __post_init__(self) -> None:
        # nats-server reads an absent limit as 0 (nothing allowed): always write them
        for name in ("subs", "data", "payload"):
            if getattr(self, name) == 0:
                raise ValueError(f"user limit {name}=0 would allow nothing; use NO_LIMIT or a size")


class Account(msgspec.Struct, frozen=True, tag_field="type", tag="account"):
    """An account's ``nats`` claims: its limits (JetStream among them), the keys that may sign
    its users, and the users it has revoked (public key → unix time: every JWT of that key
    issued at or before it is refused)."""

    limits: dict[str, int | bool]
    signing_keys: tuple[str, ...] = ()
    revocations: dict[str, int] = {}
    version: int = 2


class Operator(msgspec.Struct, frozen=True, tag_field="type", tag="operator"):
    signing_keys: tuple[str, ...] = ()
    system_account: str = ""
    version: int = 2


class _Standard(msgspec.Struct, frozen=True, omit_defaults=True):
    """The standard claims, in nats-io/jwt's order (the ``jti`` is a hash of their JSON)."""

    aud: str = ""
    exp: int = 0
    jti: str = ""
    iat: int = 0
    iss: str = ""
    name: str = ""
    nbf: int = 0
    sub: str = ""


class Claims(msgspec.Struct, frozen=True, omit_defaults=True):
    sub: str
    iss: str
    iat: int
    nats: User | Account | Operator
    name: str = ""
    exp: int = 0
    jti: str = ""

    @property
    def role(self) -> Role:
        if isinstance(self.nats, User):
            return "user"
        return "account" if isinstance(self.nats, Account) else "operator"


_JSON = msgspec.json.Encoder()


def _b64(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def _unb64(text: str, *, what: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError, UnicodeEncodeError):
        raise errors.JWTError(f"{what}: not base64url") from None


def public_key(text: str, role: Role) -> bytes:
    """The 32 raw bytes of an NKey public key of ``role``; JWTError if it is not one."""
    try:
        raw = base64.b32decode(text.encode("ascii"))
    except (ValueError, UnicodeEncodeError):
        raise errors.JWTError(f"{text[:12]!r}... is not an NKey public key (base32)") from None
    if len(raw) != 35 or raw[0] != _PREFIXES[role]:
        article = "a" if role == "user" else "an"
        raise errors.JWTError(f"{text[:12]!r}... is not the NKey public key of {article} {role}")
    if nkeys.crc16(bytearray(raw[:33])) != int.from_bytes(raw[33:], "little"):
        raise errors.JWTError(f"{text[:12]!r}... is not an NKey public key: bad checksum")
    return raw[1:33]


def new_seed(role: Role) -> bytes:
    """A fresh NKey seed (``S...``) for an identity of ``role``."""
    return bytes(nkeys.encode_seed(nacl.signing.SigningKey.generate().encode(), _PREFIXES[role]))


def key_pair(seed: bytes | str) -> nkeys.KeyPair:
    raw = seed.encode() if isinstance(seed, str) else seed
    try:
        return nkeys.from_seed(bytearray(raw.strip()))
    except (nkeys.ErrInvalidSeed, nkeys.ErrInvalidPrefixByte, ValueError, TypeError):
        raise errors.JWTError("not an NKey seed") from None


def public_of(seed: bytes | str) -> str:
    return bytes(key_pair(seed).public_key).decode("ascii")


def encode(claims: Claims, signer: nkeys.KeyPair) -> str:
    """``claims`` signed by ``signer`` (its public key becomes the issuer, now the issue time
    unless ``claims.iat`` is set)."""
    iss = bytes(signer.public_key).decode("ascii")
    iat = claims.iat or int(time.time())
    standard = _Standard(exp=claims.exp, iat=iat, iss=iss, name=claims.name, sub=claims.sub)
    jti = base64.b32encode(hashlib.new("sha512_256", _JSON.encode(standard)).digest()).rstrip(b"=")
    body = msgspec.structs.replace(claims, iss=iss, iat=iat, jti=jti.decode("ascii"))
    signed = _b64(HEADER) + b"." + _b64(_JSON.encode(body))
    return (signed + b"." + _b64(signer.sign(signed))).decode("ascii")


def decode(token: str, *, now: float | None = None) -> Claims:
    """The claims of ``token`` after checking its header, its shape and its signature by the
    issuer it names (not whether that issuer is trusted: the caller checks ``iss``), and that it
    has not expired; JWTError naming what is wrong otherwise."""
    parts = token.strip().split(".")
    if len(parts) != 3 or not token.isascii():
        raise errors.JWTError("not a JWT: expected three dot-separated parts of ASCII")
    try:
        header = msgspec.json.decode(_unb64(parts[0], what="JWT header"))
    except msgspec.DecodeError:
        raise errors.JWTError("JWT header: not JSON") from None
    if not isinstance(header, dict) or header.get("alg") != "ed25519-nkey":
        raise errors.JWTError("JWT header: alg is not ed25519-nkey")
    try:
        raw = msgspec.json.decode(_unb64(parts[1], what="JWT claims"), type=Claims)
    except (msgspec.ValidationError, msgspec.DecodeError, ValueError) as exc:
        raise errors.JWTError(f"JWT claims: {exc}") from None
    issuer_role: Role = "account" if raw.role == "user" else "operator"
    try:
        verify = nacl.signing.VerifyKey(public_key(raw.iss, issuer_role))
        verify.verify(f"{parts[0]}.{parts[1]}".encode("ascii"), _unb64(parts[2], what="JWT signature"))
    except nacl.exceptions.BadSignatureError:
        raise errors.JWTError(f"JWT signature does not verify with its issuer {raw.iss}") from None
    if raw.exp and raw.exp < (time.time() if now is None else now):
        raise errors.JWTError(f"JWT of {raw.sub} expired at {raw.exp}")
    return raw


def jwt_of_creds(text: str) -> str:
    """The user JWT of a ``.creds`` file's text (its seed is not read); JWTError if it has none."""
    lines = [line.strip() for line in text.splitlines()]
    try:
        return lines[lines.index("-----BEGIN NATS USER JWT-----") + 1]
    except (ValueError, IndexError):
        raise errors.JWTError("not a .creds file: no NATS USER JWT block") from None


def creds(token: str, seed: bytes | str) -> str:
    """A ``.creds`` file: the user JWT and its seed, in the form every NATS client reads."""
    text = seed.decode("ascii") if isinstance(seed, bytes) else seed
    return (
        "-----BEGIN NATS USER JWT-----\n"
        f"{token}\n"
        "------END NATS USER JWT------\n\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n"
        "NKEYs are sensitive and should be treated as secrets.\n\n"
        "-----BEGIN USER NKEY SEED-----\n"
        f"{text.strip()}\n"
        "------END USER NKEY SEED------\n\n"
        "*************************************************************\n"
    )
