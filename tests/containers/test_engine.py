"""deploy/compose/engine.sh on a machine whose engine already answers: idempotent, builds nothing,
leaves no process of its own behind (dockerd must not inherit its lock), and prints a ``.env``
that compose reads in a checkout without being told, for a project named after that checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.containers import engine
from tests.deploy import manifests as m

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
        chosen = engine.printed(done)
        assert {k: chosen[k] for k in engine.IMAGE_VARIABLES} == images
    assert _holding(engine.ENGINE_LOCK, ("dockerd", "containerd")) == [], "the engine holds engine.sh's lock"


def test_what_it_prints_is_the_env_of_every_command_in_a_project_per_checkout(
    images: dict[str, str], tmp_path: Path
) -> None:
    printed = _run()
    bridge = subprocess.run(["docker", "network", "inspect", "bridge"], capture_output=True, check=False)
    # Two checkouts of the same repository: the second in a directory of another name.
    checkouts = [tmp_path / "a" / "kamaji-broker", tmp_path / "b" / "kamaji-broker-2"]
    # What the shell may hold would win over .env: the docs' reader starts without it.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "KB_"))}
    for checkout in checkouts:
        checkout.mkdir(parents=True)
        for name in engine.COMPOSE_FILES:
            shutil.copy(m.ROOT / name, checkout)
        (checkout / ".env").write_text(printed.stdout)
        done = subprocess.run(
            ["docker", "compose", "--profile", "e2e", "config", "--format", "json"],
            cwd=checkout, env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        config = json.loads(done.stdout)
        assert config["name"] == checkout.name
        assert config["volumes"]["state"]["name"] == f"{checkout.name}_state"
        assert config["services"]["nats"]["image"] == images["KB_NATS_IMAGE"]
        assert config["services"]["e2e"]["build"]["args"]["PYTHON_IMAGE"] == images["KB_PYTHON_IMAGE"]
        # An engine without a bridge network can run the stack on the host's only.
        host = config["services"]["e2e"].get("network_mode") == "host"
        assert host == (bridge.returncode != 0), config["services"]["e2e"].get("network_mode")


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
