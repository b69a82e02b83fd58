"""common.doctor.streamchecks: an agent's consumer and the hub's streams, decided."""

from __future__ import annotations

import pytest

from common import bus
from common.doctor import streamchecks
from protocol import streams

EXPECTED = streams.agent_consumer("site-a")


def state(filter_subject: str) -> bus.ConsumerState:
    return bus.ConsumerState(
        stream="KB_INTENTS", name="agent-site-a", filter_subject=filter_subject, num_pending=3,
        num_ack_pending=0, delivered_stream_seq=0, ack_floor_stream_seq=0,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("found", "outcome", "detail", "fix"),
    [
        (
            state("kb.intent.site-a.*.*"),
            "PASS",
            "KB_INTENTS/agent-site-a filter kb.intent.site-a.*.*, 3 pending",
            "",
        ),
        (
            None,
            "FAIL",
            "KB_INTENTS/agent-site-a does not exist",
            "the hub creates it as soon as Site site-a exists (or its --sites names site-a): create the "
            "Site (`kamaji-broker site add site-a`) if it does not exist; if it does, is the hub running?",
        ),
        (
            state("kb.intent.>"),
            "FAIL",
            "KB_INTENTS/agent-site-a filters 'kb.intent.>', not 'kb.intent.site-a.*.*'",
            "delete the consumer (`nats consumer rm KB_INTENTS agent-site-a`)",
        ),
    ],
)
def test_consumer(found: bus.ConsumerState | None, outcome: str, detail: str, fix: str) -> None:
    got = streamchecks.consumer(EXPECTED, found, site="site-a")
    assert (got.outcome, got.detail) == (outcome, detail)
    assert got.fix.startswith(fix)


def test_streams() -> None:
    assert streamchecks.streams_result(["KB_INTENTS"], []).outcome == "PASS"
    got = streamchecks.streams_result(["KB_INTENTS", "KB_SITE_a"], ["KB_SITE_a"])
    assert (got.outcome, got.detail) == ("FAIL", "missing: KB_SITE_a")
    assert "is the hub running, with the same --prefix? see its log" in got.fix
