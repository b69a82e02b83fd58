"""The wire protocol shared by hub and agent: messages, subjects, streams, keys, signing, sealing,
the coordinates of a control plane, the Secret names both sides agree on, and how text a peer
sent is made harmless.

Pure: no I/O, no NATS, no Kubernetes. Import modules (``from protocol import messages``).

coordinates  (site, namespace, name) of a control plane
credentials  the claims the hub mints for each identity and the agent's bootstrap/renew request
errors       what a peer can get wrong
keys         hub key material and key ids
labels       DNS-1123 tokens
messages     the four wire types and their codec
names        Kamaji's and CAPI's Secret names
natsjwt      NATS operator, account and user JWTs, encoded and verified
permissions  each identity's NATS permissions as data
sealing      sealed boxes to the hub
signing      Ed25519 intents
streams      stream and consumer definitions as data
subjects     subject names, built and parsed token by token
text         a peer's text made harmless (escaped, bounded) and the reason and host checks
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
