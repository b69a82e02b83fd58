"""The four wire types of kamaji-broker (DESIGN §3) and their JSON codec.

Every message is a msgspec Struct encoded as JSON with ``schema: "kamaji-broker.io/v1"``.
Schema evolution rules, which the compatibility test holds us to:

- a field added later always carries a default, so older messages still decode;
- unknown fields are ignored, so older peers decode newer messages;
- a message with another ``schema`` value is refused (a breaking change gets a new schema).

Decoding is the one edge where foreign bytes enter: ``decode_*`` raise only
``errors.DecodeError`` whatever the input, with a message naming the offending field.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Final, Generic, Literal, TypeVar

import msgspec

from protocol import errors, labels, names, streams

SCHEMA: Final = "kamaji-broker.io/v1"

# msgspec searches with Python's re, where "$" also matches before a final newline: "\Z" ends
# the text for real, so "cp1\n" is not a label on the wire either (issue 10, finding 5).
Label = Annotated[
    str, msgspec.Meta(pattern=labels.PATTERN.removesuffix("$") + r"\Z", max_length=labels.MAX_LENGTH)
]
"""A DNS-1123 label: site, namespace and control plane names travel as subject tokens."""

Op = Literal["provision", "delete"]
Phase = Literal[
    "Pending",
    "Provisioning",
    "Ready",
    "NotReady",
    "Upgrading",
    "Sleeping",
    "Deleting",
    "Deleted",
    "Rejected",
    "Failed",
]
NonNegative = Annotated[int, msgspec.Meta(ge=0)]
MAX_INTERVAL: Final = 86400.0
"""Seconds a heartbeat may announce until the next one: more than a day is no liveness signal."""
Interval = Annotated[float, msgspec.Meta(ge=0, le=MAX_INTERVAL)]
MAX_REPLACED: Final = 16
"""Earlier owners an intent may name: each is a released deletion at the same coordinates that
the site has not applied yet, so more than a handful means something else is wrong."""
Replaced = Annotated[
    tuple[Annotated[str, msgspec.Meta(max_length=128)], ...], msgspec.Meta(max_length=MAX_REPLACED)
]
MAX_METADATA: Final = 256
"""Labels (or annotations) an intent may carry: Kubernetes sets no count, a bound keeps a
hostile message small; the agent checks the keys and values as Kubernetes does."""
_Key = Annotated[str, msgspec.Meta(max_length=317)]  # a qualified name: 253 (prefix) + "/" + 63
Labels = Annotated[
    dict[_Key, Annotated[str, msgspec.Meta(max_length=63)]], msgspec.Meta(max_length=MAX_METADATA)
]
INTENT_ENVELOPE_RESERVE: Final = 8 * 1024
"""Bytes of a signed intent that are not its spec, labels or annotations, with the publish
headers (the stream counts them too): schema, op, names, owner (uid, namespace, names of at most
253), generation, time, kubeconfig key, ``replaces`` (16 of 128), key id and signature take about
3.5 KiB at their largest, the ``Nats-Msg-Id`` and fencing headers about 200 bytes."""
MAX_INTENT_BODY: Final = streams.MAX_MSG_SIZE - INTENT_ENVELOPE_RESERVE
"""Bytes of JSON an intent's spec, labels and annotations may take together: within it every
intent fits the intents stream's ``max_msg_size``, which refuses a larger one on publish."""
Annotations = Annotated[
    dict[_Key, Annotated[str, msgspec.Meta(max_length=256 * 1024)]], msgspec.Meta(max_length=MAX_METADATA)
]


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class _Message(msgspec.Struct, kw_only=True, frozen=True):
    schema: str = SCHEMA


class Owner(msgspec.Struct, kw_only=True, frozen=True):
    """The RemoteKamajiControlPlane that wants the TCP, in the management cluster."""

    uid: str
    namespace: Label
    name: str
    cluster: str = ""


class Endpoint(msgspec.Struct, kw_only=True, frozen=True):
    host: str
    port: Annotated[int, msgspec.Meta(ge=0, le=65535)]


class Intent(_Message, kw_only=True, frozen=True):
    """Desired state of one TCP at one site, signed by the hub."""

    op: Op
    site: Label
    namespace: Label
    name: Label
    owner: Owner
    generation: NonNegative = 0
    issued_at: dt.datetime
    spec: dict[str, Any] = msgspec.field(default_factory=dict)
    kubeconfig_key: str = names.ADMIN_KUBECONFIG_KEY
    """Key of the TCP's ``<tcp>-admin-kubeconfig`` Secret to seal back (RKCP kubeconfigSecretKey)."""
    replaces: Replaced = ()
    """Uids of earlier owners of these coordinates whose deletion the hub released before the site
    applied it (added in 0.3; absent from older intents, which decode as empty). The agent may
    delete a TCP owned by one of them to apply this intent, and only by one of them: the hub
    signs the list, so nobody else can authorize deleting another owner's TCP."""
    labels: Labels = msgspec.field(default_factory=dict)
    """Labels the TCP carries beside the agent's own (the RKCP's, as the Kamaji provider
    propagates them; added with issue 13, absent from older intents, which decode as empty)."""
    annotations: Annotations = msgspec.field(default_factory=dict)
    """Annotations the TCP carries beside the agent's own (the RKCP's but kubectl's
    last-applied configuration; added with issue 13, absent from older intents)."""
    key_id: str = ""
    signature: str = ""


class Status(_Message, kw_only=True, frozen=True):
    """What the agent observed of one TCP, answering the intent with stream sequence ``intent_seq``."""

    site: Label
    namespace: Label
    name: Label
    owner_uid: str = ""
    observed_generation: NonNegative = 0
    intent_seq: NonNegative = 0
    phase: Phase
    reason: str = ""
    message: str = ""
    version: str = ""
    endpoint: Endpoint | None = None
    replicas: NonNegative = 0
    ready_replicas: NonNegative = 0
    available_replicas: NonNegative = 0
    updated_replicas: NonNegative = 0
    unavailable_replicas: NonNegative = 0
    secrets_checksum: str = ""
    observed_at: dt.datetime


class SealedSecrets(_Message, kw_only=True, frozen=True):
    """A TCP's generated secrets, sealed to the hub key ``recipient_key_id``.

    ``ciphertext`` is a libsodium sealed box (base64 in JSON); ``checksum`` is the SHA-256 of the
    plaintext, so the agent republishes only on change and the hub can skip unchanged payloads.
    """

    site: Label
    namespace: Label
    name: Label
    owner_uid: str = ""
    recipient_key_id: str
    ciphertext: bytes
    checksum: str
    observed_at: dt.datetime


class SecretsPayload(_Message, kw_only=True, frozen=True):
    """The plaintext inside ``SealedSecrets.ciphertext``: only the hub ever sees it."""

    kubeconfig_key: str = names.ADMIN_KUBECONFIG_KEY
    kubeconfig: str
    """The admin kubeconfig (the TCP's ``<tcp>-admin-kubeconfig`` Secret, key ``kubeconfig_key``)."""
    ca_crt: str
    ca_key: str

    def __repr__(self) -> str:
        # Never print key material, whatever logs the object.
        return f"SecretsPayload(kubeconfig_key={self.kubeconfig_key!r}, <redacted>)"


class Heartbeat(_Message, kw_only=True, frozen=True):
    """A site agent's liveness and summary, published every interval on ``kb.site.<site>``."""

    site: Label
    agent_version: str = ""
    started_at: dt.datetime
    sent_at: dt.datetime
    managed: NonNegative = 0
    ready: NonNegative = 0
    last_intent_seq: NonNegative = 0
    kamaji_detected: bool = False
    trusted_key_ids: tuple[str, ...] = ()
    """Ids of the hub signing keys the agent trusts (added in 0.2; absent from older agents'
    heartbeats, which decode as empty). The hub shows them in the Site status."""
    interval: Interval = 0.0
    """Seconds until the agent's next heartbeat (its ``heartbeat_interval``): whoever reads the
    heartbeat knows from it when the next one is late, with no setting to keep in step with the
    agents. 0: not said (absent from older agents' heartbeats, which decode as 0)."""


Message = Intent | Status | SealedSecrets | Heartbeat | SecretsPayload

_encoder = msgspec.json.Encoder()


def encode(message: Message) -> bytes:
    return _encoder.encode(message)


T = TypeVar("T", bound=_Message)


class Decoder(Generic[T]):
    """A typed decoder for one stream that raises only DecodeError."""

    def __init__(self, kind: type[T]) -> None:
        self._kind: type[T] = kind
        self._decoder: msgspec.json.Decoder[T] = msgspec.json.Decoder(kind)

    def __call__(self, data: bytes | bytearray | memoryview | str) -> T:
        name = self._kind.__name__
        try:
            message = self._decoder.decode(data)
        except _FAILURES as exc:
            # A message of another schema version fails for reasons of that version; say so.
            raise errors.DecodeError(f"invalid {name}: {_other_schema(data) or exc}") from None
        if message.schema != SCHEMA:
            raise errors.DecodeError(f"invalid {name}: {_other_schema(data)}")
        return message


_FAILURES = (msgspec.MsgspecError, ValueError, TypeError, RecursionError, UnicodeError)
_schema_decoder = msgspec.json.Decoder(_Message)


def _other_schema(data: bytes | bytearray | memoryview | str) -> str | None:
    try:
        schema = _schema_decoder.decode(data).schema
    except _FAILURES:
        return None
    if schema == SCHEMA:
        return None
    return f"unsupported schema {schema!r} (expected {SCHEMA!r}) - at `$.schema`"


decode_intent = Decoder(Intent)
"""Decode a message of the KB_INTENTS stream."""
decode_status = Decoder(Status)
"""Decode a status (``kb.status.<site>.…`` in the site's stream ``KB_SITE_<site>``)."""
decode_sealed_secrets = Decoder(SealedSecrets)
"""Decode sealed secrets (``kb.secret.<site>.…`` in the site's stream ``KB_SITE_<site>``)."""
decode_heartbeat = Decoder(Heartbeat)
"""Decode a heartbeat (``kb.site.<site>`` in the site's stream ``KB_SITE_<site>``)."""
decode_secrets_payload = Decoder(SecretsPayload)
"""Decode the plaintext of an opened sealed box."""
