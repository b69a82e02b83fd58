"""The interim `kamaji-broker sandbox`: the protocol walk-through runs and leaves no server behind."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kamaji_broker import cli


def test_sandbox_walks_the_protocol(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["sandbox", "--dir", str(tmp_path / "sb")]) == 0
    out = capsys.readouterr().out
    assert "verified key" in out and "only the hub opened them" in out
    assert "refused site-b's intents: publish to $JS.API.CONSUMER.INFO.KB_INTENTS.agent-site-b" in out
    assert (tmp_path / "sb" / "nats" / "sites" / "site-a.nk").exists()
    # nats-server was stopped: nothing of ours still runs with this store.
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert str(tmp_path / "sb" / "nats") not in ps
