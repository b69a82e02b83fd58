"""The wire protocol shared by hub and agent: messages, subjects, streams, keys, signing, sealing.

Pure: no I/O, no NATS, no Kubernetes. Import modules (``from protocol import messages``).
"""

from protocol import errors, keys, labels, messages, permissions, sealing, signing, streams, subjects
from protocol.errors import DecodeError, ProtocolError, SealError, SignatureError, SubjectError

__all__ = [
    "DecodeError",
    "ProtocolError",
    "SealError",
    "SignatureError",
    "SubjectError",
    "errors",
    "keys",
    "labels",
    "messages",
    "permissions",
    "sealing",
    "signing",
    "streams",
    "subjects",
]
