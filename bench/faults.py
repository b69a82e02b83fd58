"""Benchmark of self-healing: per fault scenario, the seconds from lifting the fault to
convergence.

Runs the fault suite (``tests/faults``: real nats-server, emulated clusters, Kamaji simulators,
hub and agents as processes) with ``KB_FAULTS_REPORT`` set, so that every scenario records its
fault, its workload, the invariants' counts when the fault was lifted (what there was to heal)
and after convergence (all 0 when healed), and the seconds from lifting to convergence. Prints one
JSON line per scenario, then a summary line. The suite asserts convergence; the time is only
measured here.

Run: ``.venv/bin/python bench/faults.py [-k EXPRESSION]`` (``-k`` selects scenarios as pytest does).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT_ENV = "KB_FAULTS_REPORT"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", default="", help="pytest -k expression: which scenarios to run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kb-faults-") as work:
        report = Path(work) / "faults.jsonl"
        command = [sys.executable, "-m", "pytest", "tests/faults", "-m", "faults", "-q"]
        command += ["-p", "no:cacheprovider", "--basetemp", str(Path(work) / "tmp")]
        if args.k:
            command += ["-k", args.k]
        done = subprocess.run(
            command,
            cwd=ROOT,
            env={**os.environ, REPORT_ENV: str(report)},
            stdout=sys.stderr,
            stderr=subprocess.STDOUT,
            check=False,
        )
        lines = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
    for line in lines:
        print(json.dumps({"bench": "faults", **line}))
    seconds = [line["convergence_seconds"] for line in lines if line["converged"]]
    print(
        json.dumps(
            {
                "bench": "faults",
                "summary": True,
                "scenarios": len(lines),
                "converged": len(seconds),
                "max_convergence_seconds": max(seconds, default=None),
                "pytest_exit_code": done.returncode,
            }
        )
    )
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
