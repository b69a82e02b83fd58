"""A Cluster asked for by hand, the way the sandbox's Ready screen shows: ``kamaji-broker sandbox
--print-cluster NAME --at SITE`` prints what ``clusterctl generate cluster`` prints from the
release's templates with the sandbox's values (for a user without clusterctl), and what it prints,
applied with kubectl to a running sandbox, becomes Ready there: the sandbox's Cluster API
stand-in owns the RKCP as Cluster API's Cluster controller does."""

from __future__ import annotations

import os
import re
import select
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests import helpers
from tests.e2e.test_sandbox_command import SANDBOX, processes_mentioning, run

pytestmark = pytest.mark.e2e


def kinds(text: str) -> list[str]:
    return [d["kind"] for d in yaml.safe_load_all(text) if d]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param([], ["Cluster", "RemoteKamajiControlPlane"], id="pair"),
        pytest.param(
            ["--kubernetes", "real"],
            ["Cluster", "RemoteKamajiControlPlane", "StandInCluster"],
            id="real-capi",
        ),
        pytest.param(
            ["--kubernetes", "real", "--capi", "stand-in"],
            ["Cluster", "RemoteKamajiControlPlane"],
            id="real-stand-in",
        ),
        pytest.param(
            ["--topology"],
            ["ClusterClass", "RemoteKamajiControlPlaneTemplate", "DockerClusterTemplate", "Cluster"],
            id="topology",
        ),
        pytest.param(
            ["--topology", "--kubernetes", "real"],
            ["ClusterClass", "RemoteKamajiControlPlaneTemplate", "StandInClusterTemplate", "Cluster"],
            id="topology-real-capi",
        ),
    ],
)
def test_print_cluster_prints_the_generated_objects(
    tmp_path: Path, args: list[str], expected: list[str]
) -> None:
    d = tmp_path / "sb"
    done = run("--print-cluster", "c9", "--at", "site-b", "--dir", str(d), *args, timeout=30)
    assert done.returncode == 0, done.stderr
    assert kinds(done.stdout) == expected
    assert not d.exists()  # it started nothing
    docs = {d["kind"]: d for d in yaml.safe_load_all(done.stdout) if d}
    cluster = docs["Cluster"]
    assert cluster["metadata"] == {"name": "c9", "namespace": "default"}
    placed = docs.get("RemoteKamajiControlPlane", {}).get("spec") or {
        v["name"]: v["value"] for v in cluster["spec"]["topology"]["variables"]
    }
    assert (placed["site"], placed["targetNamespace"]) == ("site-b", "tenants")
    if "StandInCluster" in docs:
        assert (
            cluster["spec"]["infrastructureRef"]["name"] == docs["StandInCluster"]["metadata"]["name"] == "c9"
        )
    if "ClusterClass" in docs:
        infrastructure = docs["ClusterClass"]["spec"]["infrastructure"]["ref"]
        assert infrastructure["kind"] == expected[2]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        pytest.param(
            ["--print-cluster", "c9", "--at", "site-c"],
            "--at site-c: the sandbox's sites are site-a, site-b (--sites 2)",
            id="site",
        ),
        pytest.param(
            ["--print-cluster", "c9", "--capi", "real"],
            "--capi real runs Cluster API's own controllers on real clusters",
            id="capi",
        ),
        pytest.param(
            ["--print-cluster", ""], "--print-cluster '': a Cluster's name here is a DNS label", id="empty"
        ),
        pytest.param(
            ["--print-cluster", "a: b"],
            "--print-cluster 'a: b': a Cluster's name here is a DNS label",
            id="yaml",
        ),
        pytest.param(
            ["--print-cluster", "yes"], "--print-cluster yes: YAML reads that name as True", id="bool"
        ),
        pytest.param(["--at", "site-b"], "--at site-b places what --print-cluster prints", id="at-alone"),
    ],
)
def test_print_cluster_refuses_what_it_cannot_print(tmp_path: Path, args: list[str], said: str) -> None:
    d = tmp_path / "sb"
    done = run("--dir", str(d), *args, timeout=30)
    assert done.returncode != 0 and done.stdout == ""
    assert f"kamaji-broker sandbox: error: {said}" in done.stderr
    assert not d.exists()  # nothing started: not even with --at alone


class Output:
    """A running sandbox's standard output (no terminal: one line per change), read as it comes:
    straight from the pipe, so nothing waits in a buffer that ``select`` cannot see."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.proc = proc
        self.fd = proc.stdout.fileno()
        self.text = ""

    def until(self, wanted: str, *, within: float = 120) -> str:
        """Everything printed so far, once a line holds ``wanted`` (a regular expression)."""
        deadline = time.monotonic() + within
        while not re.search(wanted, self.text, re.MULTILINE):
            assert self.proc.poll() is None, self.text[-3000:]
            assert time.monotonic() < deadline, (
                f"{wanted!r} not printed within {within}s:\n{self.text[-3000:]}"
            )
            if select.select([self.fd], [], [], 0.2)[0]:
                self.text += os.read(self.fd, 65536).decode(errors="replace")
        return self.text


@pytest.mark.timeout(240)  # a sandbox started, and one more control plane Ready in it
def test_the_ready_screens_command_makes_one_more_control_plane(tmp_path: Path) -> None:
    d = tmp_path / "sb"
    args = [*SANDBOX, "--sites", "1", "--control-planes", "1", "--kamaji-delay", "0", "--dir", str(d)]
    with open(tmp_path / "stderr", "w") as stderr:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=stderr)
    out = Output(proc)
    try:
        lines = out.until(r"^Running until Ctrl-C\.").splitlines()
        hint = lines[
            lines.index(next(x for x in lines if x.startswith("One more control plane"))) + 1
        ].strip()
        assert "sandbox --sites 1 --print-cluster extra-1 --at site-a | kubectl --kubeconfig" in hint, hint
        # The user's kubectl: here the pinned release's.
        command = "set -o pipefail; " + hint.replace("| kubectl ", f"| {shlex.quote(helpers.kubectl())} ")
        pasted = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60)
        assert pasted.returncode == 0, pasted.stderr
        # Owned by the stand-in as CAPI's Cluster controller owns it, placed, Ready.
        out.until(r"\] default/extra-1 \(site-a\): .*-> Ready")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0, (tmp_path / "stderr").read_text()
    finally:
        if proc.poll() is None:  # failed on the way: Ctrl-C first, a kill would leave its children
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
    assert processes_mentioning(d) == []
