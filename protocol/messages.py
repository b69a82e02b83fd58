"""The four wire types of kamaji-broker and their JSON codec.

Every message is a msgspec Struct encoded as JSON with ``schema: "kamaji-broker.io/v1"``.
Schema evolution rules, which the compatibility test holds us to:

- a field added later always carries a default, so older messages still decode; unknown fields
  are ignored, so older peers decode newer messages;
- a message with another ``schema`` value is refused (a breaking change gets a new schema).

Decoding is the one edge where foreign bytes enter: ``decode_*`` raise only ``errors.DecodeError``
whatever the input, naming the offending field. What a site sends is also made harmless there
(``protocol.text``: free text escaped and bounded, a bad reason or host replaced), so no reader
ever holds the raw bytes; ``Decoder.checked`` also says which fields were replaced.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Annotated, Any, Final, Generic, Literal, TypeVar

import msgspec

from protocol import errors, labels, names, streams, text

SCHEMA: Final = "kamaji-broker.io/v1"

# msgspec searches with Python's re, where "$" also matches before a final newline: "\Z" ends
# the text for real, so "cp1\n" is not a label on the wire either.
Label = Annotated[
    str, msgspec.Meta(pattern=labels.PATTERN.removesuffix("$") + r"\Z", max_length=labels.MAX_LENGTH)
]
"""A DNS-1123 label: site, namespace and control plane names travel as subject tokens."""

Op = Literal["provision", "delete"]
Phase = Literal[
    "Pending", "Provisioning", "Ready", "NotReady", "Upgrading", "Sleeping", "Deleting", "Deleted",
    "Rejected", "Failed",
]  # fmt: skip
NonNegative = Annotated[int, msgspec.Meta(ge=0)]
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
    propagates them; added after 0.3, absent from older intents, which decode as empty)."""
    annotations: Annotations = msgspec.field(default_factory=dict)
    """Annotations the TCP carries beside the agent's own (the RKCP's but kubectl's
    last-applied configuration; added after 0.3, absent from older intents)."""
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
    interval: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    """Seconds between its heartbeats: a reader needs no setting to tell a late one (0: not said)."""


Message = Intent | Status | SealedSecrets | Heartbeat | SecretsPayload

_encoder = msgspec.json.Encoder()


def encode(message: Message) -> bytes:
    return _encoder.encode(message)


T = TypeVar("T", bound=_Message)


Findings = tuple[text.Finding, ...]
Data = bytes | bytearray | memoryview | str


class Decoder(Generic[T]):
    """A typed decoder for one stream that raises only DecodeError; ``clean`` makes what a peer
    sent harmless (``protocol.text``)."""

    def __init__(self, kind: type[T], *, clean: Callable[[T], tuple[T, Findings]] | None = None) -> None:
        self._kind: type[T] = kind
        self._decoder: msgspec.json.Decoder[T] = msgspec.json.Decoder(kind)
        self._clean = clean

    def __call__(self, data: Data) -> T:
        return self.checked(data)[0]

    def checked(self, data: Data) -> tuple[T, Findings]:
        """The message, made harmless, and the fields that were replaced to make it so."""
        name = self._kind.__name__
        try:
            message = self._decoder.decode(data)
        except _FAILURES as exc:
            # A message of another schema version fails for reasons of that version; say so.
            why = text.harmless(str(_other_schema(data) or exc), limit=SHORT_MAX * 4)  # it may quote a value
            raise errors.DecodeError(f"invalid {name}: {why}") from None
        if message.schema != SCHEMA:
            raise errors.DecodeError(f"invalid {name}: {_other_schema(data)}")
        return (message, ()) if self._clean is None else self._clean(message)


_FAILURES = (msgspec.MsgspecError, ValueError, TypeError, RecursionError, UnicodeError)
_schema_decoder = msgspec.json.Decoder(_Message)


def _other_schema(data: Data) -> str | None:
    try:
        schema = _schema_decoder.decode(data).schema
    except _FAILURES:
        return None
    return (
        None if schema == SCHEMA else f"unsupported schema {schema!r} (expected {SCHEMA!r}) - at `$.schema`"
    )


decode_intent = Decoder(Intent)
"""Decode a message of the KB_INTENTS stream."""
# Characters kept of what a site sends: a status message (Kubernetes' own run to a few hundred);
# a version, uid, checksum or key id (each far shorter when honest); hub key ids in a heartbeat.
MESSAGE_MAX: Final = 4096
SHORT_MAX: Final = 128
KEY_IDS_MAX: Final = 32


def _bounded(m: T, limits: dict[str, int], **checked: Any) -> T:
    """``m`` with each field of ``limits`` made harmless within its limit, and ``checked`` set."""
    fields = {f: text.harmless(getattr(m, f), limit=n) for f, n in limits.items()}
    return msgspec.structs.replace(m, **fields, **checked)


_NOT_REASON = "is not a condition reason (a letter, then letters, digits, '_', ',' or ':'): dropped"
_SEALED_TEXT = dict.fromkeys(("owner_uid", "recipient_key_id", "checksum"), SHORT_MAX)
_SHORT_STATUS = ("version", "owner_uid", "secrets_checksum")
_STATUS_TEXT = {"message": MESSAGE_MAX, **dict.fromkeys(_SHORT_STATUS, SHORT_MAX)}


def _clean_status(s: Status) -> tuple[Status, Findings]:
    found: list[text.Finding] = []
    reason, endpoint = s.reason, s.endpoint
    if reason and not text.is_reason(reason):
        found.append(text.finding("reason", reason, code="InvalidReason", why=_NOT_REASON))
        reason = ""
    if endpoint is not None and not text.is_host(endpoint.host):
        why = "is not a DNS name or IP address: the endpoint dropped"
        found.append(text.finding("endpoint.host", endpoint.host, code="InvalidHost", why=why))
        endpoint = None
    return _bounded(s, _STATUS_TEXT, reason=reason, endpoint=endpoint), tuple(found)


def _clean_heartbeat(h: Heartbeat) -> tuple[Heartbeat, Findings]:
    found: list[text.Finding] = []
    ids = h.trusted_key_ids
    if len(ids) > KEY_IDS_MAX:
        why = f"names {len(ids)} keys, more than {KEY_IDS_MAX}: the first {KEY_IDS_MAX} kept"
        found.append(
            text.finding("trusted_key_ids", ",".join(ids[KEY_IDS_MAX:]), code="TooManyKeyIds", why=why)
        )
    kept = tuple(text.harmless(i, limit=SHORT_MAX) for i in ids[:KEY_IDS_MAX])
    return _bounded(h, {"agent_version": SHORT_MAX}, trusted_key_ids=kept), tuple(found)


decode_status = Decoder(Status, clean=_clean_status)
"""Decode a status (``kb.status.<site>.…`` in the site's stream ``KB_SITE_<site>``)."""
decode_sealed_secrets = Decoder(SealedSecrets, clean=lambda s: (_bounded(s, _SEALED_TEXT), ()))
"""Decode sealed secrets (``kb.secret.<site>.…`` in the site's stream ``KB_SITE_<site>``)."""
decode_heartbeat = Decoder(Heartbeat, clean=_clean_heartbeat)
"""Decode a heartbeat (``kb.site.<site>`` in the site's stream ``KB_SITE_<site>``)."""
decode_secrets_payload = Decoder(SecretsPayload)
"""Decode the plaintext of an opened sealed box."""
