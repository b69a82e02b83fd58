"""The wire protocol shared by hub and agent: messages, subjects, streams, keys, signing, sealing,
the coordinates of a control plane, the Secret names both sides agree on, and how text a peer
sent is made harmless.

Pure: no I/O, no NATS, no Kubernetes. Import modules (``from protocol import messages``).
"""

from protocol import (
    coordinates,
    credentials,
    errors,
    keys,
    labels,
    messages,
    names,
    natsjwt,
    permissions,
    sealing,
    signing,
    streams,
    subjects,
    text,
)
from protocol.errors import DecodeError, ProtocolError, SealError, SignatureError, SubjectError

__all__ = [
    "DecodeError",
    "ProtocolError",
    "SealError",
    "SignatureError",
    "SubjectError",
    "coordinates",
    "credentials",
    "errors",
    "keys",
    "labels",
    "messages",
    "names",
    "natsjwt",
    "permissions",
    "sealing",
    "signing",
    "streams",
    "subjects",
    "text",
]
