"""bench/nats_layout.py at a tiny size (3 sites, 1 s at rest): one JSON line per layout, each with
every figure, and figures that fit the layout (streams and consumers counted by the server, every
heartbeat stored, a live server measured). No timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.timeout(180)

SITES = 3
STATUSES = 2
FIELDS = (
    "create_seconds",
    "load_seconds",
    "cpu_pct",
    "rss_mb",
    "rss_peak_mb",
    "heartbeats_read_per_s",
    "bench_cpu_pct",
    "jsz_memory",
    "jsz_storage",
    "jsz_reserved_storage",
    "stop_seconds",
    "start_seconds",
    "rss_restarted_mb",
)
EXPECTED = {"a": (SITES + 1, 2 * SITES), "b": (2, SITES + 1), "c": (2, 2 * SITES)}
"""(streams, consumers) per layout."""


def run() -> list[dict[str, Any]]:
    args = ["--sites", str(SITES), "--statuses", str(STATUSES), "--seconds", "1", "--settle", "1"]
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "nats_layout.py"), *args, "--interval", "1"],
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_one_plausible_line_per_layout() -> None:
    lines = run()
    assert [line["layout"] for line in lines] == ["a", "b", "c"]
    for line in lines:
        layout = line["layout"]
        assert line["bench"] == "nats_layout"
        assert line["sites"] == SITES
        assert str(line["nats_server"]).startswith("v2.")
        assert all(isinstance(line[f], int | float) and line[f] >= 0 for f in FIELDS), line
        assert (line["jsz_streams"], line["jsz_consumers"]) == EXPECTED[layout]
        # An intent and a status per control plane, and each site's latest heartbeat.
        assert line["jsz_messages"] == SITES * (2 * STATUSES + 1)
        assert 0 < line["jsz_storage"] <= line["jsz_reserved_storage"]
        assert 5 < line["rss_mb"] <= line["rss_peak_mb"] < 1024
        assert 0 < line["create_seconds"] < 60
        assert line["heartbeats_read_per_s"] > 0
