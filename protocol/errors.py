"""Errors of the wire protocol: everything a peer can get wrong about a message or a subject.

    ProtocolError
    ├── DecodeError        bytes that are not a valid message of the expected type
    ├── SubjectError       a subject or subject token that is not what the protocol allows
    ├── SignatureError     an intent that is unsigned, mis-signed or signed by an untrusted key
    │   └── RetiredKeyError    signed by a key the hub retired (``keys retire``)
    ├── SealError          a sealed payload that cannot be opened (unknown key, corrupt box)
    ├── JWTError           a NATS JWT or NKey that is malformed, mis-signed or expired
    └── CredentialError    a credential request the hub refuses (wrong site, stale, no proof)

Every error carries a message naming the offending field, subject or key id, never secret
material.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """Base of every protocol error."""


class DecodeError(ProtocolError):
    """A message failed to decode. The only exception the decoders raise."""


class SubjectError(ProtocolError, ValueError):
    """A subject or one of its tokens is not allowed (not a DNS-1123 label, wrong shape)."""


class SignatureError(ProtocolError):
    """An intent's signature is missing, invalid, or made by a key that is not trusted."""


class RetiredKeyError(SignatureError):
    """An intent names a signing key id that was retired: refused whatever its signature says
    (a key is retired because it may be in other hands)."""


class SealError(ProtocolError):
    """A sealed payload could not be opened, or a key could not be loaded."""


class JWTError(ProtocolError, ValueError):
    """A NATS JWT (or NKey) is malformed, its signature does not verify, or it has expired."""


class CredentialError(ProtocolError):
    """A request for a NATS credential is refused: the reason names the field, never a seed."""
