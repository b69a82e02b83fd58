"""common.doctor.livechecks: a site's latest heartbeat judged by its age against the interval."""

from __future__ import annotations

import datetime as dt

import pytest

from common.doctor import livechecks
from common.doctor.results import Outcome

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC).timestamp()
STARTED = dt.datetime(2026, 12, 1, 11, 0, tzinfo=dt.UTC)
SUBJECT = "kb.site.site-a"


def beat(ago: float | None, *, denied: bool = False, unreadable: str = "") -> livechecks.LastBeat:
    arrived = None if ago is None else NOW - ago
    return livechecks.LastBeat(SUBJECT, arrived, STARTED, denied=denied, unreadable=unreadable)


@pytest.mark.parametrize(
    ("id_", "seen", "outcome", "detail"),
    [
        (
            "fresh",
            beat(1.25),
            "PASS",
            "last heartbeat 1.2s ago, interval 10s; agent started 2026-12-01T11:00:00+00:00",
        ),
        ("one beat late", beat(25), "PASS", "last heartbeat 25.0s ago, interval 10s;"),
        ("at the hub's limit", beat(30), "PASS", "last heartbeat 30.0s ago"),
        (
            "stopped",
            beat(47),
            "FAIL",
            "agent not running or stalled: last heartbeat 47s ago, interval 10s "
            "(the agent started 2026-12-01T11:00:00+00:00)",
        ),
        ("never beat", beat(None), "FAIL", "agent not running: no heartbeat on kb.site.site-a yet"),
        ("clocks apart", beat(-3), "PASS", "last heartbeat 0.0s ago"),
        (
            "credential without the grant",
            beat(None, denied=True),
            "WARN",
            "the credential may not read kb.site.site-a (minted before that grant): "
            "whether the agent runs is up to the readyz check",
        ),
        (
            "no stream",
            beat(None, unreadable="no responders"),
            "FAIL",
            "cannot read kb.site.site-a: no responders",
        ),
    ],
)
def test_heartbeat(id_: str, seen: livechecks.LastBeat, outcome: Outcome, detail: str) -> None:
    got = livechecks.heartbeat(seen, now=NOW, interval=10.0, site="site-a", regrant="re-issue it")
    assert got.outcome == outcome, id_
    assert got.detail.startswith(detail), got.detail
    if outcome == "WARN":
        assert got.fix == "re-issue it"
    if id_ == "stopped":
        assert "is its process running, and not stopped (state T in `ps`, after a SIGSTOP)" in got.fix
    if id_ == "never beat":
        assert got.fix.startswith("start the agent with these flags;") and "--site site-a" in got.fix
