"""protocol.streams: the topology as data."""

from __future__ import annotations

import pytest

from protocol import streams, subjects

K = subjects.Kind


def test_four_compacted_file_streams() -> None:
    defs = {d.name: d for d in streams.all_streams(replicas=3)}
    assert set(defs) == {"KB_INTENTS", "KB_STATUS", "KB_SECRETS", "KB_SITES"}
    assert defs["KB_INTENTS"].subjects == ("kb.intent.*.*.*",)
    assert defs["KB_SITES"].subjects == ("kb.site.*",)
    for d in defs.values():
        assert (d.max_msgs_per_subject, d.storage, d.retention, d.replicas) == (1, "file", "limits", 3)
        assert d.max_consumers == streams.MAX_CONSUMERS > 1000
        assert d.duplicate_window > 0


def test_replicas_must_be_positive() -> None:
    with pytest.raises(ValueError, match="replicas"):
        streams.all_streams(replicas=0)


def test_agent_consumer() -> None:
    c = streams.agent_consumer("site-a")
    assert (c.stream, c.durable_name, c.filter_subject) == (
        "KB_INTENTS",
        "agent-site-a",
        "kb.intent.site-a.>",
    )
    assert c.ack_policy == "explicit" and c.max_deliver == -1


def test_prefix_names_the_streams() -> None:
    assert streams.stream_name(K.SECRET, prefix="acme.kb") == "ACME_KB_SECRETS"
    assert streams.agent_consumer("s", prefix="acme.kb").filter_subject == "acme.kb.intent.s.>"


def test_hub_consumers() -> None:
    assert [(c.stream, c.durable_name, c.filter_subject) for c in streams.hub_consumers()] == [
        ("KB_STATUS", "hub-status", "kb.status.*.*.*"),
        ("KB_SECRETS", "hub-secrets", "kb.secret.*.*.*"),
    ]
