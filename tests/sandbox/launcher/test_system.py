"""sandbox.launcher: names, manifests and the directory rules (the processes are tested in tests/e2e)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from sandbox import processes
from sandbox.launcher import LaunchError, Options, System, layout, prepare_directory, workload
from tests import helpers


def test_site_names_are_dns_labels_in_order() -> None:
    names = workload.site_names(28)
    assert names[:3] == ("site-a", "site-b", "site-c")
    assert names[25:] == ("site-z", "site-aa", "site-ab")
    with pytest.raises(ValueError, match="at least one site"):
        workload.site_names(0)


def test_control_plane_names_carry_their_site() -> None:
    assert workload.control_plane_names(("site-a", "site-b"), per_site=2) == [
        ("site-a-1", "site-a"),
        ("site-a-2", "site-a"),
        ("site-b-1", "site-b"),
        ("site-b-2", "site-b"),
    ]


def test_rkcp_is_owned_by_its_cluster_and_placed_at_its_site() -> None:
    obj = workload.remote_kamaji_control_plane(
        "cp", namespace="default", cluster_uid="u1", site="site-b", target_namespace="tenants", replicas=3
    )
    [owner] = obj["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Cluster", "cp", "u1")
    assert obj["spec"] == {
        "site": "site-b",
        "targetNamespace": "tenants",
        "version": "v1.31.0",
        "replicas": 3,
        "network": {"serviceType": "LoadBalancer"},  # cluster-template.yaml's default
    }
    ref = workload.cluster("cp", namespace="default")["spec"]["controlPlaneRef"]
    assert (ref["kind"], ref["name"]) == ("RemoteKamajiControlPlane", "cp")


def test_prepare_directory_creates_and_wipes_only_a_sandbox_directory(tmp_path: Path) -> None:
    d = tmp_path / "sb"
    prepare_directory(d)
    assert (d / layout.MARKER).read_text().strip() == str(os.getpid())
    (d / "jetstream").mkdir()
    prepare_directory(d)  # an earlier sandbox of this process: wiped
    assert not (d / "jetstream").exists()


def test_prepare_directory_refuses_a_foreign_directory(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("keep")
    with pytest.raises(LaunchError, match="not a sandbox directory"):
        prepare_directory(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "keep"


def test_prepare_directory_refuses_a_running_sandbox(tmp_path: Path) -> None:
    # PID 1 is always alive and never this process: a sandbox is running there.
    (tmp_path / layout.MARKER).write_text("1\n")
    with pytest.raises(LaunchError, match=r"a sandbox \(pid 1\) is running"):
        prepare_directory(tmp_path)
    assert (tmp_path / layout.MARKER).exists()


def test_topology_rejects_a_site_named_like_the_management_cluster(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="names the management cluster"):
        System(tmp_path, Options(sites=("mgmt",)))


NAME_ERROR = "NameError: name 'x' is not defined"
JSON_ERROR = '{"level": "error", "message": "boom"}'
NATS_ERROR = "[1] [ERR] listen failed"
TEXT_ERROR = (
    "2026-12-02T07:30:00.123Z error hub.controllers.rkcp.reconciling  boom  namespace=default name=cp-1"
)
TEXT_INFO = "2026-12-02T07:30:00.124Z info  hub.controllers.rkcp.published  an error, quoted  name=error"


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        pytest.param(["INFO all good", "INFO still good"], "", id="none"),
        pytest.param([JSON_ERROR, '{"level": "info"}'], JSON_ERROR, id="json"),
        pytest.param(["x ERROR sim: unexpected error", "Traceback (most recent call last):", "  File ...",
                      NAME_ERROR], NAME_ERROR, id="traceback"),
        pytest.param([NATS_ERROR, "[1] [INF] Server Exiting.."], NATS_ERROR, id="nats"),
        pytest.param([TEXT_ERROR, TEXT_INFO], TEXT_ERROR, id="text"),
    ],
)  # fmt: skip
def test_last_error_of_a_log(tmp_path: Path, lines: list[str], expected: str) -> None:
    log = tmp_path / "x.log"
    log.write_text("\n".join(lines) + "\n")
    assert processes.last_error(log) == expected
    assert processes.last_error(tmp_path / "absent.log") == ""


def test_errors_reads_the_error_lines_after_a_mark(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text('{"level": "error", "msg": "before"}\n')
    mark = log.stat().st_size
    with log.open("a") as out:
        out.write('{"level": "info", "msg": "fine"}\n[ERR] after\n')
    assert processes.errors(log) == ['{"level": "error", "msg": "before"}', "[ERR] after"]
    assert processes.errors(log, mark) == ["[ERR] after"]
    assert processes.errors(tmp_path / "missing.log") == []


def _state(pid: int) -> str:
    """The process state letter from /proc (T: stopped by a signal)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.mark.asyncio
async def test_a_child_is_killed_paused_resumed_and_started_again(tmp_path: Path) -> None:
    """The fault seam of tests/faults, on a real child: an emulated API server."""
    kubeconfig = tmp_path / "k.kubeconfig"
    child = processes.Child(
        name="kubeapi-x",
        args=[sys.executable, "-m", "sandbox.kubeapi", "--port", "0", "--kubeconfig", str(kubeconfig)],
        log=tmp_path / "kubeapi-x.log",
        env=processes.child_env(),
        ready_text="(kubeconfig:",
    )
    child.start()
    try:
        await child.wait_ready(timeout=30)
        first = child.pid
        assert first is not None
        child.pause()
        assert child.injected
        # The signal is delivered asynchronously: wait for the state to show it.
        await helpers.eventually(lambda: _state(first) == "T")
        child.resume()
        assert not child.injected
        await helpers.eventually(lambda: _state(first) != "T")
        with pytest.raises(LaunchError, match="still runs; kill it first"):
            await child.start_again(timeout=30)
        assert await child.kill() == -signal.SIGKILL
        assert child.injected and child.returncode == -signal.SIGKILL
        await child.start_again(timeout=30)
        assert child.pid not in (None, first) and child.returncode is None and not child.injected
    finally:
        child.terminate()
        await child.wait_stopped(timeout=10)


@pytest.mark.asyncio
async def test_started_again_is_ready_only_on_its_own_ready_line(tmp_path: Path) -> None:
    """The log is appended to: the first run's ready line must not make the second look ready."""
    flag = tmp_path / "say-ready"
    flag.touch()
    script = f"import os, time\nif os.path.exists({str(flag)!r}): print('up', flush=True)\ntime.sleep(60)"
    child = processes.Child(
        name="x", args=[sys.executable, "-c", script], log=tmp_path / "x.log", ready_text="up"
    )
    child.start()
    try:
        await child.wait_ready(timeout=30)
        await child.kill()
        flag.unlink()
        with pytest.raises(LaunchError, match="not ready within"):
            await child.start_again(timeout=1)
    finally:
        child.terminate()
        await child.wait_stopped(timeout=10)


def test_failures_do_not_count_an_injected_exit(tmp_path: Path) -> None:
    topology = System(tmp_path, Options(sites=("site-a",)))
    crashed = processes.Child(
        name="agent-site-a", args=[sys.executable, "-c", "pass"], log=tmp_path / "a.log"
    )
    killed = processes.Child(name="hub", args=[sys.executable, "-c", "pass"], log=tmp_path / "h.log")
    for child in (crashed, killed):
        child.start()
        assert child.process is not None
        child.process.wait()
    killed.injected = True
    topology.children = [crashed, killed]
    [failure] = topology.failures()
    assert failure.startswith("agent-site-a (pid")
    assert topology.child("hub") is killed
    with pytest.raises(KeyError, match="no child 'nope'; the system has agent-site-a, hub"):
        topology.child("nope")


@pytest.mark.asyncio
async def test_a_retired_child_stops_cleanly_and_is_no_failure(tmp_path: Path) -> None:
    """``retire``: the first management cluster's hub after clusterctl move, stopped for good."""
    topology = System(tmp_path, Options(sites=("site-a",)))
    old = processes.Child(
        name="hub", args=[sys.executable, "-c", "import signal; signal.pause()"], log=tmp_path / "h.log"
    )
    old.start()
    topology.children = [old]
    await topology.retire("hub")
    assert old.returncode == -signal.SIGTERM and topology.failures() == []
