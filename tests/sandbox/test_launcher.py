"""sandbox.launcher: names, manifests and the directory rules (the processes are tested in tests/e2e)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox.launcher import LaunchError, Topology, prepare_directory, processes, workload
from sandbox.launcher import topology as topology_module


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
    }
    ref = workload.cluster("cp", namespace="default")["spec"]["controlPlaneRef"]
    assert (ref["kind"], ref["name"]) == ("RemoteKamajiControlPlane", "cp")


def test_prepare_directory_creates_and_wipes_only_a_sandbox_directory(tmp_path: Path) -> None:
    d = tmp_path / "sb"
    prepare_directory(d)
    assert (d / topology_module.MARKER).read_text().strip() == str(os.getpid())
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
    (tmp_path / topology_module.MARKER).write_text("1\n")
    with pytest.raises(LaunchError, match=r"a sandbox \(pid 1\) is running"):
        prepare_directory(tmp_path)
    assert (tmp_path / topology_module.MARKER).exists()


def test_topology_rejects_a_site_named_like_the_management_cluster(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="names the management cluster"):
        Topology(tmp_path, sites=("mgmt",))


NAME_ERROR = "NameError: name 'x' is not defined"
JSON_ERROR = '{"level": "error", "message": "boom"}'
NATS_ERROR = "[1] [ERR] listen failed"


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        pytest.param(["INFO all good", "INFO still good"], "", id="none"),
        pytest.param([JSON_ERROR, '{"level": "info"}'], JSON_ERROR, id="json"),
        pytest.param(["x ERROR sim: unexpected error", "Traceback (most recent call last):", "  File ...",
                      NAME_ERROR], NAME_ERROR, id="traceback"),
        pytest.param([NATS_ERROR, "[1] [INF] Server Exiting.."], NATS_ERROR, id="nats"),
    ],
)  # fmt: skip
def test_last_error_of_a_log(tmp_path: Path, lines: list[str], expected: str) -> None:
    log = tmp_path / "x.log"
    log.write_text("\n".join(lines) + "\n")
    assert processes.last_error(log) == expected
    assert processes.last_error(tmp_path / "absent.log") == ""
