"""sandbox.progress: the live view, drawn in place on a terminal, one line per event otherwise."""

from __future__ import annotations

import datetime as dt
import io
from typing import Any

import pytest

from hub import fleet
from hub.fleet_rkcp import ControlPlane
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


def site(phase: str) -> fleet.SiteRow:
    return fleet.SiteRow(
        name="site-a", connected=True, heartbeat_age=1, backlog=0, phases={phase: 1}, agent_version="0.9.0",
        trusted_key_ids=("k1",), problems=(),
    )  # fmt: skip


def look(phase: str, *, version: str = "v1.31.0") -> fleet.Fleet:
    return fleet.Fleet(sites=(site(phase),), control_planes=(cp(phase, version=version),))


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
    half = fleet.new_fleet([], [rkcp("a", ready="True"), rkcp("b", ready="False")], now=now)
    lines = progress.table(half, elapsed=1, recent=[])
    assert lines[0].endswith("  1/2 control planes Ready")
    head = next(i for i, line in enumerate(lines) if line.startswith("  CONTROL PLANE "))
    phases = [line.split()[2] for line in lines[head + 1 : head + 3]]
    assert sorted(phases) == ["Ready", "Serving"]
    # Serving, its kubeconfig there, but its Ready condition not True: the sandbox is not Ready yet.
    assert not progress.ready(half, expected=2)
    whole = fleet.new_fleet([], [rkcp("a", ready="True"), rkcp("b", ready="True")], now=now)
    assert progress.ready(whole, expected=2) and not progress.ready(whole, expected=3)
