"""sandbox.progress: the live view, drawn in place on a terminal, one line per event otherwise."""

from __future__ import annotations

import datetime as dt
import io
import logging
import sys
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pyte
import pytest

from fleet import verdicts
from fleet.controlplanes import ControlPlane
from sandbox import progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def cp(phase: str, *, version: str = "v1.31.0") -> ControlPlane:
    ready = phase == "Ready"
    return ControlPlane(
        namespace="default", name="site-a-1", cluster="site-a-1", site="site-a", phase=phase, ready=ready,
        kubeconfig=ready, version=version,
    )  # fmt: skip


def site(phase: str) -> verdicts.SiteRow:
    return verdicts.SiteRow(
        name="site-a", connected=True, heartbeat_age=1, backlog=0, phases={phase: 1}, agent_version="0.9.0",
        trusted_key_ids=("k1",), problems=(),
    )  # fmt: skip


def look(phase: str, *, version: str = "v1.31.0") -> verdicts.Fleet:
    return verdicts.Fleet(sites=(site(phase),), control_planes=(cp(phase, version=version),))


def shown(written: str, *, columns: int = 100, lines: int = 40) -> list[str]:
    """What a terminal of that size shows after ``written`` (its tty turns each \\n into \\r\\n)."""
    screen = pyte.Screen(columns, lines)
    pyte.Stream(screen).feed(written.replace("\n", "\r\n"))
    return [line.rstrip() for line in screen.display]


@pytest.fixture
def size(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The terminal ``shown`` draws: 100 columns, 40 lines."""
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("LINES", "40")
    yield


def test_without_a_terminal_each_event_is_one_line_as_it_happens() -> None:
    out = io.StringIO()
    screen = progress.Screen(out)
    screen.show(look("Provisioning"), elapsed=0.5)
    screen.show(look("Provisioning"), elapsed=1.0)
    screen.show(look("Ready"), elapsed=2.5)
    screen.show(look("Ready", version="v1.32.0"), elapsed=9)
    assert out.getvalue().splitlines() == [
        "[   0.5s] default/site-a-1 (site-a): Provisioning",
        "[   0.5s] site site-a: 1 Provisioning",
        "[   2.5s] default/site-a-1 (site-a): Provisioning -> Ready",
        "[   2.5s] site site-a: 1 Ready",
        "[   9.0s] default/site-a-1 (site-a): version v1.31.0 -> v1.32.0",
    ]


def test_on_a_terminal_the_table_is_redrawn_in_place_with_the_latest_events_under_it() -> None:
    out = Terminal()
    screen = progress.Screen(out)
    screen.show(look("Provisioning"), elapsed=0.5)
    first = out.getvalue()
    assert first.startswith("kamaji-broker sandbox     0.5s  0/1 control planes Ready\n")
    assert "\x1b[" not in first
    screen.show(look("Ready"), elapsed=2.0)
    redrawn = out.getvalue()[len(first) :]
    # Up as many lines as were drawn, clear, draw again.
    assert redrawn.startswith(f"\x1b[{first.count(chr(10))}F\x1b[J")
    lines = redrawn.splitlines()
    assert "  default/site-a-1  site-a  Ready  v1.31.0" in lines
    recent = lines[lines.index("Recent:") + 1 :]
    assert recent == [
        "  [   0.5s] default/site-a-1 (site-a): Provisioning",
        "  [   0.5s] site site-a: 1 Provisioning",
        "  [   2.0s] default/site-a-1 (site-a): Provisioning -> Ready",
        "  [   2.0s] site site-a: 1 Ready",
    ]
    screen.freeze()
    screen.say("Ready.")
    screen.show(look("Ready"), elapsed=3.0)
    assert not out.getvalue().split("Ready.\n", 1)[1].startswith("\x1b[")


def test_only_the_latest_events_stay_under_the_table() -> None:
    lines = progress.table(look("Ready"), elapsed=1, recent=[f"e{i}" for i in range(3)])
    assert lines[-4:] == ["Recent:", "  e0", "  e1", "  e2"]
    out = Terminal()
    screen = progress.Screen(out)
    for i in range(progress.RECENT + 3):
        screen.show(look("Ready", version=f"v1.{i}.0"), elapsed=i)
    last = out.getvalue().rsplit("Recent:\n", 1)[1].splitlines()
    assert len(last) == progress.RECENT and last[-1].endswith("version v1.9.0 -> v1.10.0")


def test_a_view_taller_than_the_terminal_is_cut_to_its_height(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LINES", "8")
    monkeypatch.setenv("COLUMNS", "100")
    out = Terminal()
    progress.Screen(out).show(look("Ready"), elapsed=1)
    lines = out.getvalue().splitlines()
    assert (
        len(lines) == 7
        and lines[-1].startswith("... ")
        and lines[-1].endswith(" more lines (a taller terminal shows them)")
    )


def rkcp(name: str, *, ready: str) -> dict[str, Any]:
    """An RKCP serving with its kubeconfig synced; ``ready``: its Ready condition's status."""
    synced = {"type": "SecretsSynced", "status": "True", "reason": "Synced"}
    why = {"True": ("AsExpected", ""), "False": ("HeartbeatMissing", "* SiteConnected: last heartbeat")}[
        ready
    ]
    condition = {"type": "Ready", "status": ready, "reason": why[0], "message": why[1]}
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"site": "site-a", "version": "v1.31.0"},
        "status": {"ready": True, "conditions": [synced, condition]},
    }


def test_ready_means_one_thing_the_header_the_phase_and_when_the_sandbox_says_so() -> None:
    now = dt.datetime(2026, 12, 2, 8, 0, tzinfo=dt.UTC)
    half = verdicts.new_fleet([], [rkcp("a", ready="True"), rkcp("b", ready="False")], now=now)
    lines = progress.table(half, elapsed=1, recent=[])
    assert lines[0].endswith("  1/2 control planes Ready")
    head = next(i for i, line in enumerate(lines) if line.startswith("  CONTROL PLANE "))
    phases = [line.split()[2] for line in lines[head + 1 : head + 3]]
    assert sorted(phases) == ["Ready", "Serving"]
    # Serving, its kubeconfig there, but its Ready condition not True: the sandbox is not Ready yet.
    assert not progress.ready(half, expected=2)
    whole = verdicts.new_fleet([], [rkcp("a", ready="True"), rkcp("b", ready="True")], now=now)
    assert progress.ready(whole, expected=2) and not progress.ready(whole, expected=3)


STRAY = "kamaji-broker sandbox: topology simulator: Cluster default/x: ClusterClass default/nope not found"


def test_a_line_said_while_the_view_is_drawn_stays_above_it_and_no_old_block_is_left(size: None) -> None:
    out = Terminal()
    screen = progress.Screen(out)
    screen.show(look("Provisioning"), elapsed=0.5)
    screen.say(STRAY)
    screen.show(look("Ready"), elapsed=2.0)
    screen.show(look("Ready"), elapsed=2.5)
    display = shown(out.getvalue())
    assert display[0] == STRAY
    assert [line for line in display if line.startswith("kamaji-broker sandbox ")] == [
        "kamaji-broker sandbox     2.5s  1/1 control planes Ready"
    ]
    assert display.count("Recent:") == 1


def test_what_the_process_writes_while_the_view_owns_the_terminal_goes_above_it(size: None) -> None:
    out = Terminal()
    screen = progress.Screen(out)
    # As logs.configure sets it up: a handler holding the stream it was given.
    handler = logging.StreamHandler(sys.stderr)
    logging.getLogger().addHandler(handler)
    try:
        with screen.owning():
            screen.show(look("Provisioning"), elapsed=0.5)
            print("a component's error", file=sys.stderr)
            logging.getLogger("somewhere").error("a log record")
            print("half a line", end="")
            screen.show(look("Ready"), elapsed=2.0)
    finally:
        logging.getLogger().removeHandler(handler)
    assert handler.stream is sys.stderr
    display = shown(out.getvalue())
    assert display[:2] == ["a component's error", "a log record"]
    assert [line for line in display if line.startswith("kamaji-broker sandbox ")] == [
        "kamaji-broker sandbox     2.0s  1/1 control planes Ready"
    ]
    assert display[2] == "half a line"  # handed on when it let go, above the block too


def test_without_a_terminal_a_warning_goes_to_stderr() -> None:
    out, err = io.StringIO(), io.StringIO()
    screen = progress.Screen(out, err=err)
    with screen.owning():
        screen.warn(STRAY)
    assert (out.getvalue(), err.getvalue()) == ("", STRAY + "\n")


HEADERS = {"SITE", "CONNECTED", "HEARTBEAT", "BACKLOG", "AGENT", "KEYS", "CONTROL", "PLANES", "PLANE",
           "PHASE", "VERSION", "WHY", "NOT", "READY"}  # fmt: skip


def narrow() -> verdicts.Fleet:
    """A fleet whose rows are wider than 80 columns: long key ids, names and why."""
    gone = verdicts.Problem(
        "HeartbeatMissing", "agent not connected: its last heartbeat is 12s old (it beats every 2s)"
    )
    row = replace(site("Serving"), trusted_key_ids=("c9fde5bbf2011e3c",), phases={"Ready": 1, "Serving": 1},
                  problems=(gone,), connected=False)  # fmt: skip
    why = (
        "site site-a not connected (last heartbeat 12s ago); waiting for the sealed secrets of its kubeconfig"
    )
    serving = replace(cp("Ready"), name="site-a-1-x7k2p", phase="Serving", reason=why)
    return verdicts.Fleet(sites=(row,), control_planes=(serving, replace(cp("Ready"), name="site-a-2")))


def test_at_80_columns_nothing_is_cut_inside_a_word(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("LINES", "40")
    out = Terminal()
    screen = progress.Screen(out)
    screen.show(look("Provisioning"), elapsed=0.5)
    screen.show(narrow(), elapsed=12.0)
    display = [line for line in shown(out.getvalue(), columns=80) if line]
    assert all(len(line) <= 79 for line in display)
    headers = [line for line in display if line.startswith(("  SITE ", "  CONTROL PLANE "))]
    assert len(headers) == 2 and all(set(h.split()) <= HEADERS for h in headers)
    assert headers[1].endswith("WHY NOT READY") and headers[0].endswith("CONTROL PLANES")
    # Free text is cut after a whole word and says so; a problem wraps, whole.
    words = {w for line in progress.table(narrow(), elapsed=12.0, recent=[]) for w in line.split()}
    cut = [line for line in display if line.endswith("...")]
    assert cut and all(line[:-3].split()[-1] in words for line in cut)
    problems = " ".join(" ".join(display[display.index("Problems:") + 1 :]).split())
    assert problems.startswith(f"site site-a: {narrow().sites[0].problems[0]} default/site-a-1-x7k2p")


def test_not_ready_says_what_is_missing_harmlessly_and_where_the_logs_are(tmp_path: Any) -> None:
    hostile = replace(cp("Failed"), reason="\x1b[2J\x1b[32mall healthy\x1b[0m")
    f = verdicts.Fleet(
        sites=(site("Failed"),), control_planes=(hostile, replace(cp("Ready"), name="site-a-2"))
    )
    message = progress.not_ready(f, timeout=2, errors=["agent: boom \x1b]0;PWNED\x07"], logs_dir=tmp_path)
    assert message.splitlines() == [
        "not ready after 2s: 1 of 2 control planes missing:",
        "  default/site-a-1 at site-a: not Ready (phase Failed): \\x1b[2J\\x1b[32mall healthy\\x1b[0m",
        "last errors in the logs:",
        "  agent: boom \\x1b]0;PWNED\\x07",
        f"logs of every process: {tmp_path}/",
    ]
