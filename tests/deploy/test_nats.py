"""deploy/nats: the 3-node JetStream cluster configuration is valid for the real nats-server,
beside the auth.conf the operator commands render, and the Kubernetes manifests fit it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sandbox import natsd
from tests.deploy import manifests as m

CONF = m.DEPLOY / "nats" / "nats-server.conf"


def _config_dir(tmp_path: Path) -> Path:
    kb = [sys.executable, "-m", "kamaji_broker.cli"]
    nats = tmp_path / "nats"
    subprocess.run([*kb, "nats-config", "--dir", str(nats)], capture_output=True, check=True)
    subprocess.run(
        [*kb, "site", "add", "site-a", "--nats-config-dir", str(nats)], capture_output=True, check=True
    )
    shutil.copy(CONF, nats / "cluster.conf")
    return nats


def _check(config: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [natsd.find_binary(), "-t", "-c", str(config)],
        capture_output=True, text=True, timeout=30, env={**os.environ, **env}, check=False,
    )  # fmt: skip


def test_cluster_config_is_valid_beside_the_generated_users(tmp_path: Path) -> None:
    nats = _config_dir(tmp_path)
    done = _check(nats / "cluster.conf", POD_NAME="nats-0")
    assert done.returncode == 0, done.stderr + done.stdout
    # Without the pod's name it is refused: every node needs its own server_name.
    env = {k: v for k, v in os.environ.items() if k != "POD_NAME"}
    unnamed = subprocess.run(
        [natsd.find_binary(), "-t", "-c", str(nats / "cluster.conf")], capture_output=True, text=True, env=env
    )
    assert unnamed.returncode != 0


def test_cluster_config_needs_the_auth_include(tmp_path: Path) -> None:
    nats = _config_dir(tmp_path)
    (nats / "auth.conf").unlink()
    assert _check(nats / "cluster.conf", POD_NAME="nats-0").returncode != 0


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return m.kustomize(m.DEPLOY / "nats")


def test_manifests_validate_and_fit_the_config(docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        m.validate(doc)
    text = CONF.read_text()
    statefulset = m.one(docs, "StatefulSet")
    replicas = statefulset["spec"]["replicas"]
    assert replicas == 3
    namespace = statefulset["metadata"]["namespace"]
    headless = statefulset["spec"]["serviceName"]
    routes = re.findall(r'"nats://([^":]+):6222"', text)
    assert routes == [f"nats-{i}.{headless}.{namespace}.svc.cluster.local" for i in range(replicas)]
    assert 'include "auth.conf"' in text and 'store_dir: "/data/jetstream"' in text
    assert 'name: "kamaji-broker"' in text  # the cluster's name
    pod = statefulset["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mounts = {v["name"]: v["mountPath"] for v in container["volumeMounts"]}
    assert mounts["data"] == "/data" and mounts["config"] == "/etc/nats"
    assert container["args"][-1] == "/etc/nats/nats-server.conf"
    assert 'pid_file: "/var/run/nats/nats.pid"' in text and mounts["pid"] == "/var/run/nats"
    (config,) = [v for v in pod["volumes"] if v["name"] == "config"]
    names = {s["configMap"]["name"] for s in config["projected"]["sources"]}
    generated = m.one(docs, "ConfigMap")
    assert generated["metadata"]["name"] in names and "nats-auth" in names
    assert generated["data"]["nats-server.conf"] == text
    services = {s["metadata"]["name"]: s for s in m.of_kind(docs, "Service")}
    assert services[headless]["spec"]["clusterIP"] == "None"
    ports = {p["name"] for p in container["ports"]}
    for service in services.values():
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= ports


def test_hub_stream_replicas_match_the_cluster_size() -> None:
    hub = m.one(m.kustomize(m.DEPLOY / "hub"), "Deployment")
    args = hub["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--stream-replicas=3" in args
