"""``kamaji-broker sandbox --topology``: Clusters of the ClusterClass kamaji-broker, their RKCPs made
by the topology simulator from the class's RemoteKamajiControlPlaneTemplate, reach Ready through
the whole system (hub, NATS, agent, Kamaji simulator) — and nothing is left running."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_sandbox_command import SANDBOX, processes_mentioning

pytestmark = pytest.mark.e2e


def test_topology_clusters_reach_ready(tmp_path: Path) -> None:
    d = tmp_path / "sb"
    args = ["--topology", "--exit-when-ready", "--sites", "2", "--control-planes", "1", "--kamaji-delay", "0"]
    done = subprocess.run(
        [*SANDBOX, *args, "--dir", str(d)], capture_output=True, text=True, timeout=150, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "creating 2 Clusters of the ClusterClass kamaji-broker from deploy/templates/" in out
    # The RKCPs are the simulator's: <cluster>-<5 characters of its uid>, each one Ready.
    for site in ("site-a", "site-b"):
        assert re.search(rf"default/{site}-1-[a-z0-9]{{5}} \({site}\): .*-> Ready", out), out
    assert "Ready: 2 control planes at 2 sites" in out
    assert "get secret site-a-1-kubeconfig -o jsonpath='{.data.value}' | base64 -d" in out
    assert "topology simulator" not in done.stderr, done.stderr
    assert processes_mentioning(d) == []
