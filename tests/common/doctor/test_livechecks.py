"""common.doctor.livechecks: a site's latest heartbeat judged by its age against the interval, and
what a process's /readyz answered (or did not, in time)."""

from __future__ import annotations

import datetime as dt

import pytest

from common.doctor import livechecks
from common.doctor.results import Outcome

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC).timestamp()
STARTED = dt.datetime(2026, 12, 1, 11, 0, tzinfo=dt.UTC)
SUBJECT = "kb.site.site-a"


def beat(
    ago: float | None, *, denied: bool = False, unreadable: str = "", interval: float = 0.0
) -> livechecks.LastBeat:
    arrived = None if ago is None else NOW - ago
    return livechecks.LastBeat(
        SUBJECT, arrived, STARTED, denied=denied, unreadable=unreadable, interval=interval
    )


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
        (
            "stopped, by the 2 s the beat says (not the flag's 10 s)",
            beat(7, interval=2.0),
            "FAIL",
            "agent not running or stalled: last heartbeat 7s ago, interval 2s",
        ),
        (
            "beating every 60 s, as it says",
            beat(47, interval=60.0),
            "PASS",
            "last heartbeat 47.0s ago, interval 60s",
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


URL = "http://127.0.0.1:8080/readyz"
READY = (
    "[+] consumer: bound to KB_INTENTS/agent-site-a\n[+] kubernetes: reachable\n[+] nats: connected\nready\n"
)
NOT_READY = (
    "[+] consumer: bound to KB_INTENTS/agent-site-a\n[-] kubernetes: API server: no answer within 10s\n"
    "[-] nats: disconnected; reconnecting\nnot ready\n"
)


@pytest.mark.parametrize(
    ("id_", "answer", "outcome", "detail"),
    [
        ("ready", livechecks.Answer(200, READY), "PASS", f"{URL}: ready (consumer, kubernetes, nats)"),
        (
            "not ready",
            livechecks.Answer(503, NOT_READY),
            "FAIL",
            f"{URL}: not ready: kubernetes: API server: no answer within 10s; "
            "nats: disconnected; reconnecting",
        ),
        (
            "stopped",
            livechecks.Answer(failure="timeout"),
            "FAIL",
            f"{URL} did not answer within 5s: the process is stopped or hung (its socket still takes "
            "connections, nothing answers)",
        ),
        (
            "not running",
            livechecks.Answer(failure="refused", error="Connect call failed"),
            "FAIL",
            f"nothing listens at {URL}: the process is not running here",
        ),
        ("something else", livechecks.Answer(404, "404: Not Found"), "FAIL", f"{URL}: answered 404, not as"),
        (
            "reset",
            livechecks.Answer(failure="other", error="ServerDisconnectedError"),
            "FAIL",
            f"{URL}: Server",
        ),
    ],
)
def test_readyz(id_: str, answer: livechecks.Answer, outcome: Outcome, detail: str) -> None:
    got = livechecks.readyz(answer, url=URL, timeout=5.0)
    assert got.outcome == outcome, id_
    assert got.detail.startswith(detail), got.detail
    if id_ == "stopped":
        assert "is it stopped (state T in `ps`, after a SIGSTOP) or blocked?" in got.fix
    if id_ == "not running":
        assert got.fix.startswith("start it;") and "--health-url" in got.fix


@pytest.mark.parametrize(
    ("listen", "url"),
    [
        (":8080", "http://127.0.0.1:8080"),
        ("0.0.0.0:9000", "http://127.0.0.1:9000"),
        ("127.0.0.1:8081", "http://127.0.0.1:8081"),
        ("10.0.0.5:8080", "http://10.0.0.5:8080"),
        (":::8080", "http://127.0.0.1:8080"),
        ("::1:8080", "http://[::1]:8080"),
    ],
)
def test_health_url(listen: str, url: str) -> None:
    assert livechecks.health_url(listen) == url
