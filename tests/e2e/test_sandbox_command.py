"""``kamaji-broker sandbox`` as a user runs it: ready and exit, too slow and say what is missing,
Ctrl-C, a directory that is not a sandbox's, the live view on a terminal after Ready (an upgrade,
a deletion, a site disconnecting and coming back) — and never a process left behind."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import shlex
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pyte
import pytest

from tests import helpers
from tests.systems import alive

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
    assert (
        f" -m kamaji_broker.cli status --kubeconfig {d}/mgmt.kubeconfig --nats-url tls://127.0.0.1:" in out
        and f" --nats-creds {d}/nats/observer.creds --nats-ca-file {d}/nats/tls/ca.crt" in out
    )
    assert "\x1b[" not in out
    for name in ("nats-server", "kubeapi-mgmt", "kubeapi-site-a", "kamaji-site-a", "hub", "agent-site-a"):
        assert (d / "logs" / f"{name}.log").is_file(), name
    assert processes_mentioning(d) == []


def test_with_the_real_kamaji_it_exits_zero_and_leaves_no_process_or_network_namespace(
    tmp_path: Path, real_capi: object
) -> None:
    """With real clusters, Cluster API's own controllers too (clusterctl init, its manager)."""
    d = tmp_path / "sb"
    done = run(
        "--exit-when-ready", "--kubernetes", "real", "--kamaji", "real",
        "--sites", "1", "--control-planes", "1", "--dir", str(d), timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "1 real Kamaji operator" in out and "default/site-a-1 (site-a): " in out and "-> Ready" in out
    assert "Cluster API's own controllers (clusterctl init)" in out
    assert "--kubernetes real --capi real --print-cluster extra-1 --at site-a | kubectl" in out
    assert (d / "clusterctl" / "clusterctl.log").is_file()
    assert (d / "capi" / "mgmt" / "logs" / "capi-manager.log").is_file()
    assert f"| base64 -d > {d}/tenant.kubeconfig" in out
    assert f"kubectl --kubeconfig {d}/tenant.kubeconfig get namespaces" in out
    for name in ("kamaji", "kwok", "datastore"):
        assert (d / "sites" / "site-a" / "logs" / f"{name}.log").is_file(), name
    assert processes_mentioning(d) == []
    # Each namespace is named after the process that made it: none may outlive its maker.
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    ours = [line.split()[0] for line in listed.splitlines() if line.startswith("kb-")]
    assert [name for name in ours if not alive(int(name[3:].split("x")[0], 16))] == []


def test_the_real_kamaji_needs_real_clusters_and_says_so(tmp_path: Path) -> None:
    done = run("--kamaji", "real", "--dir", str(tmp_path / "sb"))
    assert done.returncode == 2
    assert "--kamaji real runs on real clusters: add --kubernetes real" in done.stderr


def test_a_normal_start_logs_no_warning(tmp_path: Path) -> None:
    """What every start does (consumers bound before the hub made them, the Sites' first
    writes) is no warning: one in a quiet start's log means something is wrong."""
    d = tmp_path / "sb"
    done = run("--exit-when-ready", "--control-planes", "1", "--kamaji-delay", "0", "--dir", str(d))
    assert done.returncode == 0, done.stderr
    noisy = []
    for name in ("hub", "agent-site-a", "agent-site-b"):
        for line in (d / "logs" / f"{name}.log").read_text().splitlines():
            if json.loads(line)["level"] in ("warning", "error", "critical"):
                noisy.append(f"{name}: {line}")
    assert noisy == []


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
        # The status command it printed works as pasted, and agrees: everything is Ready.
        (command,) = [line for line in log.read_text().splitlines() if " status --kubeconfig " in line]
        while (done := subprocess.run(shlex.split(command), capture_output=True, text=True)).returncode:
            assert time.monotonic() < deadline, done.stdout + done.stderr
            time.sleep(0.5)
        assert done.stdout.splitlines()[0].endswith(" 1/1 control planes Ready; healthy"), done.stdout
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


class Terminal:
    """``kamaji-broker sandbox`` on a pseudo-terminal, as a person runs it: what it drew so far."""

    LINES, COLUMNS = 60, 200

    def __init__(self, args: list[str]) -> None:
        self.master, slave = pty.openpty()
        # Wide enough that no line of the view is cut.
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", self.LINES, self.COLUMNS, 0, 0))
        # The size is the pty's, as for a person's shell: a COLUMNS in the environment would win
        # over it, and one is there when a C library of this process (readline) set it.
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        self.proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, close_fds=True, env=env)
        os.close(slave)
        self.drawn = b""

    def read(self) -> str:
        while select.select([self.master], [], [], 0)[0]:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the other side closed (EIO on Linux)
                break
            if not chunk:
                break
            self.drawn += chunk
        return self.drawn.decode(errors="replace")

    def mark(self) -> int:
        """Where the transcript ends now: ``until(..., since=mark)`` looks only after it."""
        self.read()
        return len(self.drawn)

    def after(self, mark: int) -> str:
        self.read()
        return self.drawn[mark:].decode(errors="replace")

    def until(self, text: str, *, since: int = 0, within: float = 60) -> str:
        deadline = time.monotonic() + within
        while text not in (seen := self.after(since)):
            assert self.proc.poll() is None, seen[-3000:]
            assert time.monotonic() < deadline, f"{text!r} not drawn within {within}s:\n{seen[-3000:]}"
            select.select([self.master], [], [], 0.2)
        return seen

    def until_match(self, pattern: re.Pattern[str], *, since: int = 0, within: float = 60) -> str:
        deadline = time.monotonic() + within
        while not pattern.search(seen := self.after(since)):
            assert self.proc.poll() is None, seen[-3000:]
            assert time.monotonic() < deadline, (
                f"{pattern.pattern!r} not drawn within {within}s:\n{seen[-3000:]}"
            )
            select.select([self.master], [], [], 0.2)
        return seen

    def shown(self) -> list[str]:
        """What the terminal shows now: the transcript played on a terminal emulator."""
        screen = pyte.Screen(self.COLUMNS, self.LINES)
        pyte.ByteStream(screen).feed(self.drawn)
        return [line.rstrip() for line in screen.display]

    def close(self) -> None:
        if self.proc.poll() is None:
            # Ctrl-C first, as a person stops it: a kill would leave every process it started.
            self.proc.send_signal(signal.SIGINT)
            deadline = time.monotonic() + 30
            while self.proc.poll() is None and time.monotonic() < deadline:
                self.read()  # what it says meanwhile must not fill the terminal and block it
                select.select([self.master], [], [], 0.2)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        os.close(self.master)


LOST_WHY = "ClusterClass default/nope not found"
LOST = {
    "apiVersion": "cluster.x-k8s.io/v1beta1",
    "kind": "Cluster",
    "metadata": {"name": "lost", "namespace": "default"},
    "spec": {
        "topology": {
            "class": "nope",
            "version": "v1.31.0",
            "variables": [{"name": "site", "value": "site-a"}],
        }
    },
}


def kubectl(d: Path, *args: str) -> None:
    binary = helpers.kubectl()
    subprocess.run(
        [binary, "--kubeconfig", str(d / "mgmt.kubeconfig"), *args], check=True, capture_output=True
    )


def agent_pid(d: Path, site: str) -> int:
    ps = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True, check=True).stdout
    (pid,) = [
        int(line.split()[0]) for line in ps.splitlines() if str(d) in line and f"agent --site {site}" in line
    ]
    return pid


def test_the_live_view_in_a_terminal_shows_what_happens_after_ready(tmp_path: Path) -> None:
    d = tmp_path / "sb"
    term = Terminal(
        [*SANDBOX, "--sites", "1", "--control-planes", "2", "--kamaji-delay", "0", "--dir", str(d)]
    )
    try:
        term.until("Running until Ctrl-C.")
        # An upgrade: the site reports the new version, and the view says so.
        mark = term.mark()
        kubectl(d, "patch", "rkcp", "site-a-1", "--type", "merge", "-p", '{"spec":{"version":"v1.32.0"}}')
        term.until("default/site-a-1 (site-a): version v1.31.0 -> v1.32.0", since=mark)
        # A deletion, as CAPI deletes a cluster.
        mark = term.mark()
        kubectl(d, "delete", "rkcp", "site-a-2", "--wait=false")
        kubectl(d, "delete", "cluster", "site-a-2", "--wait=false")
        term.until("default/site-a-2 (site-a): deleted", since=mark)
        # A Cluster of a ClusterClass that does not exist: the topology simulator says so (a line
        # reaching the terminal while the view is drawn), and the view shows the Cluster, why too.
        mark = term.mark()
        lost = tmp_path / "lost.json"
        lost.write_text(json.dumps(LOST))
        kubectl(d, "apply", "-f", str(lost))
        said = "kamaji-broker sandbox: topology simulator: Cluster default/lost: " + LOST_WHY
        term.until(said, since=mark)
        row = re.compile(
            r"default/lost +site-a +WaitingForTopology +v1\.31\.0 +ClusterClass default/nope not found"
        )
        term.until_match(row, since=mark)
        display = term.shown()
        assert display.count(said) == 1 and display[display.index(said) + 1].startswith(
            "kamaji-broker sandbox "
        )
        headers = [
            i for i, line in enumerate(display) if re.match(r"kamaji-broker sandbox +\d+\.\ds  ", line)
        ]
        assert all(display[i + 1] == "" for i in headers), "a header left over from an earlier frame"
        kubectl(d, "delete", "cluster", "lost", "--wait=false")
        # The site's agent stops answering: the site disconnects, then comes back.
        pid = agent_pid(d, "site-a")
        mark = term.mark()
        os.kill(pid, signal.SIGSTOP)
        try:
            term.until("site site-a: agent not connected: its last heartbeat is ", since=mark)
            assert re.search(r"site-a +NO ", term.after(mark)), "the table shows the site disconnected"
            mark = term.mark()
        finally:
            os.kill(pid, signal.SIGCONT)
        term.until("site site-a: healthy again", since=mark)
        seen = term.read()
        assert "Recent:" in seen and "\x1b[J" in seen  # drawn in place, the events under the table
        term.proc.send_signal(signal.SIGINT)
        assert term.proc.wait(timeout=30) == 0, term.read()[-3000:]
        assert term.until("stopped.", since=mark).rstrip().endswith("stopped.")
    finally:
        term.close()
    assert processes_mentioning(d) == []
