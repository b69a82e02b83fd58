"""What a hostile site can make the hub take in.

Every case publishes with site-a's own credentials on site-a's own subjects (the server lets it:
they are its grants), against a real ``kamaji-broker hub`` process, a nats-server configured by
``nats-config`` and an emulated management cluster with one RKCP per site. Each case asserts
the exact refusal (the server's error naming the limit) or the hub's counter with its specific
reason, that nothing changed (Secrets, the RKCP's status, the site's stream beyond the one
message it may store), that the hub is alive, and that it still processes site-b normally.

Before the per-site quotas the oversized cases were stored (no max_msg_size, max_payload
1 MiB) and the hub decoded, opened and kept messages for coordinates no RKCP maps to.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import nacl.public
import pytest
import pytest_asyncio

from common.bus import errors
from protocol import keys, messages, streams, subjects
from tests import helpers
from tests.security import intake_support
from tests.security.intake_support import NS, Stand

pytestmark = pytest.mark.asyncio(loop_scope="module")

SITE_A_STREAM = streams.site_stream_name("site-a")
STRANGER = keys.public_entry(bytes(nacl.public.PrivateKey.generate().public_key), created_at=helpers.T0)


@dataclass(frozen=True)
class Refused:
    """The server refuses the publish: ``QuotaExceeded`` naming ``limit``, with ``text``."""

    limit: str
    text: str


@dataclass(frozen=True)
class RefusedRaw:
    """An attacker's own client (no client-side check) is cut off by the server with ``error``."""

    error: bytes


@dataclass(frozen=True)
class Counted:
    """The server stores it (the site's own subject); the hub counts it with ``reason``."""

    reason: str


Build = Callable[[Stand], tuple[str, bytes]]


def status_subject(name: str = "a-1") -> str:
    return subjects.status("site-a", NS, name)


def secret_subject(name: str = "a-1") -> str:
    return subjects.secret("site-a", NS, name)


def heartbeat_subject() -> str:
    return subjects.heartbeat("site-a")


def status_body(s: Stand, **override: Any) -> bytes:
    return messages.encode(s.status(**override))


def status_dict(s: Stand, **override: Any) -> bytes:
    body = msgspec.json.decode(messages.encode(s.status()))
    body.update(override)
    return msgspec.json.encode(body)


def sealed_dict(s: Stand, **override: Any) -> bytes:
    body = msgspec.json.decode(messages.encode(s.sealed()))
    body.update(override)
    return msgspec.json.encode(body)


def tampered(s: Stand) -> bytes:
    box = s.sealed()
    flipped = bytes([box.ciphertext[0] ^ 0x01]) + box.ciphertext[1:]
    return messages.encode(msgspec.structs.replace(box, ciphertext=flipped))


def foreign(s: Stand) -> bytes:
    """Sealed to a stranger's key but naming the hub's key id: opening fails."""
    box = s.sealed(recipient=STRANGER)
    return messages.encode(msgspec.structs.replace(box, recipient_key_id=s.hub_public().key_id))


def nested(depth: int) -> bytes:
    return b'{"schema":"kamaji-broker.io/v1","x":' + b"[" * depth + b"]" * depth + b"}"


KIB = 1024
CASES: list[tuple[str, Build, Refused | RefusedRaw | Counted]] = [
    # -- refused by the server: the stream's max_msg_size (64 KiB) and the server's max_payload
    ("status-over-max-msg-size", lambda s: (status_subject(), status_body(s, message="x" * 100 * KIB)),
     Refused("max_msg_size", "message size exceeds maximum allowed")),
    ("sealed-over-max-msg-size", lambda s: (secret_subject(), messages.encode(s.sealed(padding=80 * KIB))),
     Refused("max_msg_size", "message size exceeds maximum allowed")),
    ("heartbeat-over-max-msg-size", lambda s: (heartbeat_subject(), b"{" + b" " * 90 * KIB + b"}"),
     Refused("max_msg_size", "message size exceeds maximum allowed")),
    ("status-over-max-payload", lambda s: (status_subject(), status_body(s, message="x" * 200 * KIB)),
     Refused("max_payload", f"the server takes at most {streams.MAX_PAYLOAD}")),
    ("sealed-half-a-mebibyte",
     lambda s: (secret_subject("a-9"), messages.encode(s.sealed(padding=512 * KIB))),
     Refused("max_payload", f"the server takes at most {streams.MAX_PAYLOAD}")),
    ("raw-client-box-over-max-payload",
     lambda s: (secret_subject(), messages.encode(s.sealed(padding=512 * KIB))),
     RefusedRaw(b"-ERR 'Maximum Payload Violation'\r\n (connection closed)")),
    ("raw-client-status-over-max-payload",
     lambda s: (status_subject(), status_body(s, message="x" * 200 * KIB)),
     RefusedRaw(b"-ERR 'Maximum Payload Violation'\r\n (connection closed)")),
    # -- statuses on a mapped control plane's subject: decoded, refused, counted
    ("status-not-json", lambda s: (status_subject(), b"this is not json"), Counted("DecodeError")),
    ("status-non-utf8", lambda s: (status_subject(), b'{"schema":"\xff\xfe\xfd"}'), Counted("DecodeError")),
    ("status-deeply-nested", lambda s: (status_subject(), nested(30_000)), Counted("DecodeError")),
    ("status-wrong-schema", lambda s: (status_subject(), status_dict(s, schema="evil.example/v9")),
     Counted("DecodeError")),
    ("status-wrong-types", lambda s: (status_subject(), status_dict(s, replicas="two")),
     Counted("DecodeError")),
    ("status-negative-count", lambda s: (status_subject(), status_dict(s, ready_replicas=-5)),
     Counted("DecodeError")),
    ("status-missing-fields", lambda s: (status_subject(), b'{"schema":"kamaji-broker.io/v1"}'),
     Counted("DecodeError")),
    ("status-body-other-name", lambda s: (status_subject(), status_body(s, name="a-2")),
     Counted("CoordinatesMismatch")),
    ("status-body-names-site-b", lambda s: (status_subject(), status_body(s, site="site-b")),
     Counted("CoordinatesMismatch")),
    # -- sealed secrets on a mapped control plane's subject
    ("sealed-not-json", lambda s: (secret_subject(), b"\x00\x01binary"), Counted("DecodeError")),
    ("sealed-wrong-schema", lambda s: (secret_subject(), sealed_dict(s, schema="other/v1")),
     Counted("DecodeError")),
    ("sealed-ciphertext-not-base64",
     lambda s: (secret_subject(), sealed_dict(s, ciphertext="!!not base64!!")),
     Counted("DecodeError")),
    ("sealed-body-names-site-b",
     lambda s: (secret_subject(), messages.encode(s.sealed(site="site-b", name="a-1"))),
     Counted("CoordinatesMismatch")),
    ("sealed-unknown-key-id",
     lambda s: (secret_subject(), messages.encode(s.sealed(recipient_key_id="00" * 8))),
     Counted("DecryptFailed")),
    ("sealed-tampered-ciphertext", lambda s: (secret_subject(), tampered(s)), Counted("DecryptFailed")),
    ("sealed-to-a-foreign-key", lambda s: (secret_subject(), foreign(s)), Counted("DecryptFailed")),
    ("sealed-checksum-mismatch", lambda s: (secret_subject(), messages.encode(s.sealed(checksum="ab" * 32))),
     Counted("DecryptFailed")),
    # -- coordinates no RKCP maps to: never decoded, opened or kept
    ("valid-box-for-unmapped-coordinates",
     lambda s: (secret_subject("ghost"), messages.encode(s.sealed(name="ghost"))),
     Counted("Unmapped")),
    ("status-for-unmapped-coordinates", lambda s: (status_subject("ghost"), status_body(s, name="ghost")),
     Counted("Unmapped")),
    ("garbage-for-unmapped-coordinates", lambda s: (status_subject("ghost-2"), nested(30_000)),
     Counted("Unmapped")),
    # -- heartbeats (read by the hub's site poller from the site's stream)
    ("heartbeat-not-json", lambda s: (heartbeat_subject(), b"[1, 2"), Counted("DecodeError")),
    ("heartbeat-names-site-b",
     lambda s: (heartbeat_subject(), messages.encode(helpers.heartbeat(site="site-b"))),
     Counted("CoordinatesMismatch")),
]  # fmt: skip

IGNORED_CONDITIONS = {"SecretsSynced", "Ready"}
"""What a box of site-a's own control plane may change on its RKCP: whether its secrets are
synced (DecryptFailed shows there, as it should for an operator) and the summary of it."""


def comparable(rkcp: dict[str, Any]) -> dict[str, Any]:
    status = dict(rkcp.get("status") or {})
    status["conditions"] = [
        c for c in status.get("conditions") or [] if c.get("type") not in IGNORED_CONDITIONS
    ]
    return status


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stand(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stand]:
    async with intake_support.stand(tmp_path_factory.mktemp("intake")) as s:
        yield s


_markers = itertools.count(1)


@pytest.mark.parametrize(("build", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_a_hostile_site_cannot_make_the_hub_take_it_in(
    stand: Stand, build: Build, expected: Refused | RefusedRaw | Counted
) -> None:
    subject, data = build(stand)
    before_counts = await stand.metrics()
    before_seq = await stand.last_seq("site-a")
    before_b_seq = await stand.last_seq("site-b")
    before_secrets = await stand.secrets()
    before_rkcp = comparable(await stand.rkcp("site-a"))

    if isinstance(expected, Refused):
        with pytest.raises(errors.QuotaExceeded) as refused:
            await stand.publish("site-a", subject, data)
        assert refused.value.limit == expected.limit
        assert refused.value.subject == subject
        assert expected.text in str(refused.value)
        assert await stand.last_seq("site-a") == before_seq  # nothing stored
    elif isinstance(expected, RefusedRaw):
        assert await stand.raw_publish("site-a", subject, data) == expected.error
        assert await stand.last_seq("site-a") == before_seq
    else:
        ack = await stand.publish("site-a", subject, data)
        assert ack.seq == before_seq + 1  # its own subject, within its quota: stored, once
        key = intake_support.rejected_key(expected.reason)

        async def counted() -> bool:
            return (await stand.metrics()).get(key, 0.0) == before_counts.get(key, 0.0) + 1

        await helpers.eventually(counted, within=30, every=0.2)

    # The hub still processes site-b, and is alive.
    await stand.site_b_processed(f"case-{next(_markers)}")
    assert await stand.alive()
    after_counts = await stand.metrics()
    changed = {k: v for k, v in after_counts.items() if v != before_counts.get(k, 0.0)}
    if not isinstance(expected, Counted):
        assert changed == {}
    else:
        assert changed == {intake_support.rejected_key(expected.reason): before_counts.get(
            intake_support.rejected_key(expected.reason), 0.0) + 1}  # fmt: skip
    # Nothing written or changed in the management cluster; site-b's stream took only its status.
    assert await stand.secrets() == before_secrets
    assert comparable(await stand.rkcp("site-a")) == before_rkcp
    assert await stand.last_seq("site-b") == before_b_seq + 1
