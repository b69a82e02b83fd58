"""``kamaji-broker sandbox`` as a user runs it: ready and exit, too slow and say what is missing,
Ctrl-C, a directory that is not a sandbox's — and never a process left behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

SANDBOX = [sys.executable, "-m", "kamaji_broker.cli", "sandbox"]


def processes_mentioning(directory: Path) -> list[str]:
    """Command lines of running processes that name ``directory`` (every child of the sandbox
    does: its kubeconfig, seed or configuration is there)."""
    ps = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True, check=True).stdout
    return [line for line in ps.splitlines() if str(directory) in line]


def run(*args: str, timeout: float = 100) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SANDBOX, *args], capture_output=True, text=True, timeout=timeout, check=False)


def test_exit_when_ready_exits_zero_and_leaves_nothing_running(tmp_path: Path) -> None:
    d = tmp_path / "sb"
    done = run(
        "--exit-when-ready", "--sites", "1", "--control-planes", "1", "--kamaji-delay", "0", "--dir", str(d)
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    # Not a TTY here: one plain line per change, then the commands to try.
    assert "default/site-a-1 (site-a): " in out and "-> Ready" in out
    assert f"kubectl --kubeconfig {d}/mgmt.kubeconfig get rkcp -A" in out
    assert f"kubectl --kubeconfig {d}/site-a.kubeconfig get tcp -n tenants" in out
    assert "get secret site-a-1-kubeconfig -o jsonpath='{.data.value}' | base64 -d" in out
    assert "\x1b[" not in out
    for name in ("nats-server", "kubeapi-mgmt", "kubeapi-site-a", "kamaji-site-a", "hub", "agent-site-a"):
        assert (d / "logs" / f"{name}.log").is_file(), name
    assert processes_mentioning(d) == []


def test_too_short_a_timeout_exits_non_zero_naming_what_is_missing(tmp_path: Path) -> None:
    d = tmp_path / "sb"
    # The simulator keeps the control plane Provisioning far longer than the timeout allows.
    done = run("--exit-when-ready", "--sites", "1", "--control-planes", "1", "--kamaji-delay", "120",
               "--timeout", "2", "--dir", str(d))  # fmt: skip
    assert done.returncode == 1, done.stdout
    assert "error: not ready after 2s: 1 of 1 control planes missing" in done.stderr
    assert "default/site-a-1 at site-a: not Ready (phase " in done.stderr
    assert f"logs of every process: {d}/logs/" in done.stderr
    assert processes_mentioning(d) == []


def test_ctrl_c_stops_every_process_and_exits_zero(tmp_path: Path) -> None:
    d = tmp_path / "sb"
    log = tmp_path / "out.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [*SANDBOX, "--sites", "1", "--control-planes", "1", "--kamaji-delay", "0", "--dir", str(d)],
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        deadline = time.monotonic() + 60
        while "Running until Ctrl-C." not in log.read_text():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        assert processes_mentioning(d) != []
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert log.read_text().rstrip().endswith("stopped.")
    assert processes_mentioning(d) == []


def test_a_directory_that_is_not_a_sandbox_is_refused_and_kept(tmp_path: Path) -> None:
    d = tmp_path / "precious"
    d.mkdir()
    (d / "notes.txt").write_text("keep me\n")
    done = run("--exit-when-ready", "--dir", str(d), timeout=30)
    assert done.returncode == 1
    assert f"{d} is not empty and is not a sandbox directory" in done.stderr
    assert (d / "notes.txt").read_text() == "keep me\n"
    assert processes_mentioning(d) == []
