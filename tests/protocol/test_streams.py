"""protocol.streams: the topology as data."""

from __future__ import annotations

import pytest

from protocol import errors, streams, subjects

K = subjects.Kind


def test_intents_stream_is_compacted_and_unlimited_in_count() -> None:
    d = streams.intents_stream(replicas=3)
    assert (d.name, d.subjects, d.site) == ("KB_INTENTS", ("kb.intent.*.*.*",), "")
    assert (d.max_msgs_per_subject, d.storage, d.retention, d.replicas) == (1, "file", "limits", 3)
    assert (d.max_msgs, d.max_bytes, d.discard) == (-1, -1, "old")
    assert d.max_msg_size == streams.MAX_MSG_SIZE
    assert d.max_consumers == streams.MAX_CONSUMERS > 1000
    assert d.duplicate_window > 0


def test_a_site_stream_holds_its_subjects_under_a_quota_that_refuses_new_messages() -> None:
    limits = streams.SiteLimits(max_msg_size=4096, max_msgs=10, max_bytes=40_000)
    d = streams.site_stream("site-a", replicas=3, limits=limits)
    assert d.name == "KB_SITE_site-a"
    assert d.subjects == ("kb.status.site-a.*.*", "kb.secret.site-a.*.*", "kb.site.site-a")
    assert (d.max_msg_size, d.max_msgs, d.max_bytes, d.discard) == (4096, 10, 40_000, "new")
    assert (d.max_msgs_per_subject, d.storage, d.retention, d.replicas, d.site) == (
        1,
        "file",
        "limits",
        3,
        "site-a",
    )


def test_default_limits_fit_the_payload_bound() -> None:
    limits = streams.SiteLimits()
    assert limits.max_msg_size == 64 * 1024 < streams.MAX_PAYLOAD == 128 * 1024
    assert limits.max_bytes >= limits.max_msgs * 12 * 1024  # every control plane's sealed box fits


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"max_msg_size": 100}, "max_msg_size must be at least 1024"),
        ({"max_msgs": 1}, "max_msgs must be at least 2"),
        ({"max_bytes": 2048, "max_msg_size": 4096}, r"max_bytes \(2048\) must be at least max_msg_size"),
    ],
)
def test_limits_are_checked(kw: dict[str, int], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        streams.SiteLimits(**kw)


def test_replicas_must_be_positive() -> None:
    with pytest.raises(ValueError, match="replicas"):
        streams.intents_stream(replicas=0)
    with pytest.raises(ValueError, match="replicas"):
        streams.site_stream("site-a", replicas=0)


def test_agent_consumer() -> None:
    c = streams.agent_consumer("site-a")
    assert (c.stream, c.durable_name, c.filter_subjects) == (
        "KB_INTENTS",
        "agent-site-a",
        ("kb.intent.site-a.*.*",),
    )
    assert c.filter_subject == "kb.intent.site-a.*.*"
    assert c.ack_policy == "explicit" and c.max_deliver == -1


def test_prefix_names_the_streams() -> None:
    assert streams.stream_name(K.INTENT, prefix="acme.kb") == "ACME_KB_INTENTS"
    assert streams.stream_name(K.SECRET, site="s", prefix="acme.kb") == "ACME_KB_SITE_s"
    assert streams.agent_consumer("s", prefix="acme.kb").filter_subject == "acme.kb.intent.s.*.*"


@pytest.mark.parametrize("kind", [K.STATUS, K.SECRET, K.SITE])
def test_inbound_kinds_live_in_the_site_stream(kind: subjects.Kind) -> None:
    assert streams.stream_name(kind, site="site-b") == "KB_SITE_site-b"
    with pytest.raises(ValueError, match="name the site"):
        streams.stream_name(kind)


@pytest.mark.parametrize("site", ["site.a", "*", ">", "Site", "a b", ""])
def test_a_site_stream_name_is_a_label(site: str) -> None:
    with pytest.raises(errors.SubjectError, match="site"):
        streams.site_stream_name(site)


def test_hub_consumer_reads_statuses_secrets_and_heartbeats() -> None:
    c = streams.hub_consumer("site-a")
    assert (c.stream, c.durable_name, c.filter_subjects) == (
        "KB_SITE_site-a",
        "hub",
        ("kb.status.site-a.*.*", "kb.secret.site-a.*.*", "kb.site.site-a"),
    )
    assert c.filter_subject == ""
