"""Schema evolution: messages stored from earlier versions (and from a future one with extra
fields) still decode with today's types. Never edit a stored fixture; add new ones."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from protocol import messages

FIXTURES = Path(__file__).parent / "fixtures" / "v1"


def load(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def test_intent() -> None:
    i = messages.decode_intent(load("intent.json"))
    assert (i.op, i.site, i.namespace, i.name, i.generation) == ("provision", "site-a", "tenants", "cp1", 3)
    assert i.owner.cluster == "cluster-1"
    assert i.spec["kubernetes"]["version"] == "v1.31.0"
    assert i.issued_at == dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


def test_intent_from_a_newer_version_with_unknown_fields() -> None:
    i = messages.decode_intent(load("intent-delete-from-future.json"))
    assert (i.op, i.site, i.name, i.owner.uid) == ("delete", "site-b", "cp9", "u-9")
    assert i.spec == {}


def test_intent_naming_replaced_owners_and_one_from_before_the_field() -> None:
    """0.3 added ``replaces``; intents from before decode with none."""
    i = messages.decode_intent(load("intent-replacing.json"))
    assert (i.owner.uid, i.replaces) == ("u-new", ("u-old",))
    assert messages.decode_intent(load("intent.json")).replaces == ()


def test_intent_with_metadata_and_one_from_before_the_fields() -> None:
    """``labels`` and ``annotations`` came after 0.3; intents from before decode with none."""
    i = messages.decode_intent(load("intent-metadata.json"))
    assert i.labels == {"cluster.x-k8s.io/cluster-name": "cluster-1", "team": "blue"}
    assert i.annotations == {"example.com/note": "hello"}
    old = messages.decode_intent(load("intent.json"))
    assert (old.labels, old.annotations) == ({}, {})


def test_status() -> None:
    s = messages.decode_status(load("status.json"))
    assert (s.phase, s.intent_seq, s.endpoint) == (
        "Ready",
        42,
        messages.Endpoint(host="10.240.0.1", port=6443),
    )


def test_status_with_only_required_fields() -> None:
    s = messages.decode_status(load("status-minimal.json"))
    assert (s.phase, s.reason, s.owner_uid, s.endpoint, s.observed_generation) == (
        "Rejected",
        "Conflict",
        "",
        None,
        0,
    )


def test_sealed_secrets() -> None:
    s = messages.decode_sealed_secrets(load("sealed-secrets.json"))
    assert s.ciphertext == b"sealed box" and s.recipient_key_id == "8899aabbccddeeff"


def test_heartbeat() -> None:
    h = messages.decode_heartbeat(load("heartbeat.json"))
    assert (h.managed, h.ready, h.last_intent_seq, h.kamaji_detected) == (4, 3, 42, True)


def test_every_fixture_is_covered() -> None:
    names = {p.name for p in FIXTURES.glob("*.json")}
    assert names == {
        "intent.json",
        "intent-delete-from-future.json",
        "intent-replacing.json",
        "intent-metadata.json",
        "status.json",
        "status-minimal.json",
        "sealed-secrets.json",
        "heartbeat.json",
        "heartbeat-trusted-keys.json",
        "heartbeat-interval.json",
    }


def test_heartbeat_of_an_older_agent_trusts_no_reported_keys() -> None:
    assert messages.decode_heartbeat(load("heartbeat.json")).trusted_key_ids == ()


def test_heartbeat_with_the_trusted_hub_key_ids() -> None:
    h = messages.decode_heartbeat(load("heartbeat-trusted-keys.json"))
    assert h.trusted_key_ids == ("0011223344556677", "8899aabbccddeeff")
    # What this version writes, an older reader (which ignores unknown fields) still reads.
    assert messages.decode_heartbeat(messages.encode(h)) == h


def test_heartbeat_announcing_its_interval_and_one_from_before_the_field() -> None:
    h = messages.decode_heartbeat(load("heartbeat-interval.json"))
    assert (h.interval, h.trusted_key_ids) == (2.0, ("0011223344556677",))
    assert messages.decode_heartbeat(messages.encode(h)) == h
    # Older agents say nothing: 0, and the reader falls back to what it is told.
    assert messages.decode_heartbeat(load("heartbeat-trusted-keys.json")).interval == 0.0
