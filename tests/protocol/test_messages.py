"""protocol.messages: encoding, decoding, schema evolution and the DecodeError-only contract."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import msgspec
import nacl.signing
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import errors, messages, signing, streams
from tests import helpers

DECODERS: list[Callable[[bytes], Any]] = [
    messages.decode_intent,
    messages.decode_status,
    messages.decode_sealed_secrets,
    messages.decode_heartbeat,
]
SAMPLES = [helpers.intent(), helpers.status(), helpers.sealed(), helpers.heartbeat()]


@pytest.mark.parametrize(
    ("decode", "sample"), list(zip(DECODERS, SAMPLES, strict=True)), ids=lambda x: type(x).__name__
)
def test_round_trip(decode: Callable[[bytes], Any], sample: messages.Message) -> None:
    data = messages.encode(sample)
    assert msgspec.json.decode(data)["schema"] == messages.SCHEMA
    assert decode(data) == sample


def test_sealed_ciphertext_travels_as_base64() -> None:
    doc = msgspec.json.decode(messages.encode(helpers.sealed()))
    assert doc["ciphertext"] == "AAFzZWFsZWQ="


def test_unknown_fields_are_ignored() -> None:
    doc = msgspec.to_builtins(helpers.status())
    doc["added_in_v1_9"] = {"anything": [1, 2]}
    doc["endpoint"]["scheme"] = "https"
    assert messages.decode_status(msgspec.json.encode(doc)) == helpers.status()


def test_missing_optional_fields_take_defaults() -> None:
    data = (
        b'{"schema":"kamaji-broker.io/v1","site":"site-a","namespace":"ns","name":"cp",'
        b'"phase":"Pending","observed_at":"2026-11-30T12:00:00Z"}'
    )
    s = messages.decode_status(data)
    assert (s.owner_uid, s.intent_seq, s.endpoint, s.replicas) == ("", 0, None, 0)


BAD = [
    ("empty", b"", "truncated"),
    ("not json", b"\xff\xfe", "malformed"),
    ("array", b"[]", "Expected `object`"),
    ("other schema", b'{"schema":"kamaji-broker.io/v2"}', "$.schema"),
    ("bad phase", None, "$.phase"),
    ("dotted site", None, "$.site"),
    ("negative replicas", None, "$.replicas"),
]


def _status_doc(**changes: Any) -> bytes:
    doc = msgspec.to_builtins(helpers.status())
    doc.update(changes)
    return msgspec.json.encode(doc)


@pytest.mark.parametrize(("case", "data", "mentions"), BAD, ids=[b[0] for b in BAD])
def test_malformed_input_names_the_problem(case: str, data: bytes | None, mentions: str) -> None:
    if data is None:
        data = {
            "bad phase": _status_doc(phase="Exploded"),
            "dotted site": _status_doc(site="site.a"),
            "negative replicas": _status_doc(replicas=-1),
        }[case]
    with pytest.raises(errors.DecodeError) as exc:
        messages.decode_status(data)
    assert mentions in str(exc.value)
    assert str(exc.value).startswith("invalid Status")


@pytest.mark.parametrize("token", ["site.a", "*", ">", "a b", "", "A", "x" * 64, "-a", "a-"])
def test_coordinates_must_be_dns_labels(token: str) -> None:
    doc = msgspec.to_builtins(helpers.intent())
    doc["namespace"] = token
    with pytest.raises(errors.DecodeError, match=r"\$\.namespace"):
        messages.decode_intent(msgspec.json.encode(doc))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=512))
def test_random_bytes_raise_only_decode_error(data: bytes) -> None:
    for decode in DECODERS:
        with contextlib.suppress(errors.DecodeError):
            decode(data)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=20,
)
FIELDS = st.sampled_from(
    [
        "schema",
        "op",
        "site",
        "namespace",
        "name",
        "owner",
        "phase",
        "issued_at",
        "observed_at",
        "spec",
        "endpoint",
        "ciphertext",
        "sent_at",
        "started_at",
        "replicas",
        "generation",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(FIELDS, JSON, max_size=10) | JSON)
def test_random_json_raises_only_decode_error(document: Any) -> None:
    data = msgspec.json.encode(document)
    for decode in DECODERS:
        with contextlib.suppress(errors.DecodeError):
            decode(data)


@settings(max_examples=200, deadline=None)
@given(
    st.builds(
        lambda d: {**msgspec.to_builtins(helpers.intent()), **d}, st.dictionaries(FIELDS, JSON, max_size=3)
    )
)
def test_mutated_valid_intents_decode_or_raise_decode_error(document: dict[str, Any]) -> None:
    with contextlib.suppress(errors.DecodeError):
        messages.decode_intent(msgspec.json.encode(document))


def test_deeply_nested_input_is_a_decode_error() -> None:
    with pytest.raises(errors.DecodeError):
        messages.decode_intent(b"[" * 100_000)


@pytest.mark.parametrize(
    ("replaces", "mentions"),
    [
        (["u"] * (messages.MAX_REPLACED + 1), "$.replaces"),
        (["x" * 129], "$.replaces[0]"),
        ("u-old", "$.replaces"),
    ],
    ids=["too many owners", "an overlong uid", "not a list"],
)
def test_replaced_owners_are_bounded(replaces: Any, mentions: str) -> None:
    """An intent names at most MAX_REPLACED earlier owners, each a short uid."""
    doc = msgspec.to_builtins(helpers.intent())
    doc["replaces"] = replaces
    with pytest.raises(errors.DecodeError) as exc:
        messages.decode_intent(msgspec.json.encode(doc))
    assert mentions in str(exc.value)


@pytest.mark.parametrize(
    ("field", "value", "mentions"),
    [
        ("labels", {f"k{i}": "v" for i in range(messages.MAX_METADATA + 1)}, "$.labels"),
        ("labels", {"team": "v" * 64}, "$.labels[...]"),
        ("labels", {"k" * 318: "v"}, "at `key` in `$.labels`"),
        ("annotations", {"note": "v" * (256 * 1024 + 1)}, "$.annotations[...]"),
        ("annotations", {"note": 1}, "$.annotations[...]"),
        ("labels", ["team"], "$.labels"),
    ],
    ids=[
        "too many labels",
        "a label value over 63",
        "an overlong key",
        "an overlong annotation",
        "not a string",
        "not a map",
    ],
)
def test_intent_metadata_is_bounded(field: str, value: Any, mentions: str) -> None:
    """The labels and annotations an intent carries to the TCP are bounded at the
    edge; what Kubernetes would refuse beyond the sizes, the agent refuses (agent.tcp.propagation)."""
    doc = msgspec.to_builtins(helpers.intent())
    doc[field] = value
    with pytest.raises(errors.DecodeError) as exc:
        messages.decode_intent(msgspec.json.encode(doc))
    assert mentions in str(exc.value)


def test_an_intent_whose_body_fills_its_budget_fits_the_stream_with_the_largest_envelope() -> None:
    """``MAX_INTENT_BODY`` is what the hub lets spec, labels and annotations take (hub.mapping.tcp):
    with every other field at its largest, signed, and the publish headers, the intent still fits
    the intents stream's ``max_msg_size``."""
    body = messages.MAX_INTENT_BODY - len(b'{"a":""}') * 3
    intent = signing.sign(
        messages.Intent(
            op="provision",
            site="s" * 63,
            namespace="n" * 63,
            name="c" * 63,
            owner=messages.Owner(uid="u" * 36, namespace="o" * 63, name="r" * 253, cluster="k" * 253),
            generation=2**63 - 1,
            issued_at=messages.utcnow(),
            spec={"a": "x" * (body // 3)},
            kubeconfig_key="k" * 253,
            replaces=("u" * 128,) * messages.MAX_REPLACED,
            labels={"a": ""},
            annotations={"a": "x" * (body - body // 3)},
        ),
        nacl.signing.SigningKey.generate(),
    )
    # Nats-Msg-Id (owner uid, generation, op, digest, fence, key id) and the fencing header, framed.
    headers = 300
    size = len(messages.encode(intent)) + headers
    assert size <= streams.MAX_MSG_SIZE, (size, streams.MAX_MSG_SIZE)


CLEANED = [
    # id, decoder, the message's fields changed, what the decoded message holds, findings' codes
    ("a status's free text escaped and bounded", messages.decode_status,
     {"message": "\x1b[2J" + "m" * 5000, "version": "v1.31.0\x1b[5m", "owner_uid": "u\u202e"},
     {"version": "v1.31.0\\x1b[5m", "owner_uid": "u\\u202e"}, []),
    ("an invalid reason dropped, the phase kept", messages.decode_status,
     {"phase": "Failed", "reason": "Evil\x1b[2J\x1b]0;PWNED\x07"}, {"phase": "Failed", "reason": ""},
     ["InvalidReason"]),
    ("a valid reason kept", messages.decode_status, {"phase": "NotReady", "reason": "Drifted"},
     {"reason": "Drifted"}, []),
    ("a host that is no host drops the endpoint", messages.decode_status,
     {"endpoint": {"host": "evil\x1b[2J.example", "port": 6443}}, {"endpoint": None}, ["InvalidHost"]),
    ("a heartbeat's version and key ids escaped", messages.decode_heartbeat,
     {"agent_version": "0.1.0\x1b[2J", "trusted_key_ids": ["k\x1b"]},
     {"agent_version": "0.1.0\\x1b[2J", "trusted_key_ids": ("k\\x1b",)}, []),
    ("too many key ids cut", messages.decode_heartbeat, {"trusted_key_ids": [str(i) for i in range(40)]},
     {"trusted_key_ids": tuple(str(i) for i in range(messages.KEY_IDS_MAX))}, ["TooManyKeyIds"]),
    ("a box's key id escaped", messages.decode_sealed_secrets, {"recipient_key_id": "\x1b[31mk"},
     {"recipient_key_id": "\\x1b[31mk"}, []),
]  # fmt: skip

_SAMPLES: dict[Any, messages.Message] = {
    messages.decode_status: helpers.status(),
    messages.decode_heartbeat: helpers.heartbeat(),
    messages.decode_sealed_secrets: helpers.sealed(),
}


@pytest.mark.parametrize(
    ("decoder", "changes", "expected", "codes"), [c[1:] for c in CLEANED], ids=[c[0] for c in CLEANED]
)
def test_what_a_site_sends_is_made_harmless_at_decoding(
    decoder: messages.Decoder[Any], changes: dict[str, Any], expected: dict[str, Any], codes: list[str]
) -> None:
    body = {**msgspec.json.decode(messages.encode(_SAMPLES[decoder])), **changes}
    decoded, findings = decoder.checked(msgspec.json.encode(body))
    for field, value in expected.items():
        assert getattr(decoded, field) == value, field
    assert [f.code for f in findings] == codes
    assert decoder(msgspec.json.encode(body)) == decoded  # the plain call cleans alike
    for info in msgspec.structs.fields(decoded):
        value = getattr(decoded, info.name)
        if isinstance(value, str):
            assert value.isprintable() and len(value) <= messages.MESSAGE_MAX, info.name
