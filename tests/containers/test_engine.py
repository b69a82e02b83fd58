"""deploy/compose/engine.sh on a machine whose engine already answers: idempotent, builds nothing,
leaves no process of its own behind (dockerd must not inherit its lock)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.containers import engine

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


def _run() -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(engine.ENGINE_SCRIPT)], capture_output=True, text=True, timeout=120, check=False
    )


def test_a_second_run_changes_nothing(images: dict[str, str]) -> None:
    again = [_run(), _run()]
    for done in again:
        assert done.returncode == 0, done.stderr
        assert done.stderr == "", "nothing installed, started or built"
        chosen = dict(line.split("=", 1) for line in done.stdout.splitlines())
        assert chosen == images
    assert _holding(engine.ENGINE_LOCK, ("dockerd", "containerd")) == [], "the engine holds engine.sh's lock"


def _holding(path: Path, names: tuple[str, ...]) -> list[str]:
    """The processes called one of ``names`` with ``path`` open."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "comm").read_text().strip() not in names:
                continue
            if any(os.readlink(fd) == str(path) for fd in (proc / "fd").iterdir()):
                found.append(f"{proc.name} {(proc / 'comm').read_text().strip()}")
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found
