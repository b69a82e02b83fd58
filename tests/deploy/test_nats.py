"""deploy/nats: the 3-node JetStream cluster configuration is valid for the real nats-server,
beside the auth.conf and the TLS files the operator commands render, and the Kubernetes
manifests fit it: TLS for clients, routes and leaf nodes from the Secret `nats-tls`, and no
Service publishes the monitoring port."""

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
TLS_MOUNT = "/etc/nats-tls"
HEADLESS_SANS = ["nats.nats.svc", "*.nats-headless.nats.svc.cluster.local"]
"""What deploy/README.md tells `nats-config --tls-host` to name (the Service, the routes)."""


def _config_dir(tmp_path: Path) -> Path:
    """The operator's files, and the cluster config pointing at the `nats-tls` Secret's keys as
    made from `nats-config --tls-generate` (``kubectl create secret generic nats-tls ...``)."""
    kb = [sys.executable, "-m", "kamaji_broker.cli"]
    nats = tmp_path / "nats"
    hosts = [a for h in HEADLESS_SANS for a in ("--tls-host", h)]
    subprocess.run(
        [*kb, "nats-config", "--dir", str(nats), "--tls-generate", str(nats / "tls"), *hosts],
        capture_output=True,
        check=True,
    )
    subprocess.run(
        [*kb, "site", "add", "site-a", "--nats-config-dir", str(nats)], capture_output=True, check=True
    )
    secret = tmp_path / "nats-tls"  # the Secret's keys, as the volume projects them
    secret.mkdir()
    for key, made in (("tls.crt", "server.crt"), ("tls.key", "server.key"), ("ca.crt", "ca.crt")):
        shutil.copy(nats / "tls" / made, secret / key)
    (nats / "cluster.conf").write_text(CONF.read_text().replace(f"{TLS_MOUNT}/", f"{secret}/"))
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


def test_cluster_config_needs_the_tls_files(tmp_path: Path) -> None:
    nats = _config_dir(tmp_path)
    (tmp_path / "nats-tls" / "tls.key").unlink()
    done = _check(nats / "cluster.conf", POD_NAME="nats-0")
    assert done.returncode != 0 and "tls.key" in done.stderr + done.stdout


def _block(text: str, name: str) -> str:
    """The body of the top-level block ``name { ... }`` (nested braces included)."""
    start = text.index(f"\n{name} {{") + len(name) + 3
    depth, i = 1, start
    while depth:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    return text[start : i - 1]


def test_tls_for_clients_routes_and_leaf_nodes() -> None:
    text = CONF.read_text()
    pair = f'cert_file: "{TLS_MOUNT}/tls.crt"\n'
    key = f'key_file: "{TLS_MOUNT}/tls.key"\n'
    client = _block(text, "tls")
    assert pair in client and key in client and 'handshake_first: "auto"' in client
    routes = _block(text, "cluster")
    assert pair in routes and key in routes
    assert f'ca_file: "{TLS_MOUNT}/ca.crt"' in routes and "verify: true" in routes, "mutual TLS"
    leaf = _block(text, "leafnodes")
    assert pair in leaf and key in leaf
    assert "allow_non_tls" not in text and "no_tls" not in text


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
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for service in services.values():
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= set(ports)
    # Monitoring is plain HTTP without auth: the kubelet probes it on the pod, no Service has it.
    published = {(p["targetPort"], p["port"]) for s in services.values() for p in s["spec"]["ports"]}
    assert not {t for t, port in published if t == "monitor" or port == ports["monitor"]}
    assert {p["name"] for p in services["nats"]["spec"]["ports"]} == {"client", "leafnodes"}
    # TLS: the Secret nats-tls, mounted where the config reads it, with exactly the keys it names.
    (tls,) = [v for v in pod["volumes"] if v["name"] == "tls"]
    assert tls["secret"]["secretName"] == "nats-tls"
    assert {i["key"] for i in tls["secret"]["items"]} == {"tls.crt", "tls.key", "ca.crt"}
    assert mounts["tls"] == TLS_MOUNT
    named = set(re.findall(rf'"{TLS_MOUNT}/([^"]+)"', text))
    assert named == {i["path"] for i in tls["secret"]["items"]}


def test_hub_stream_replicas_match_the_cluster_size() -> None:
    hub = m.one(m.kustomize(m.DEPLOY / "hub"), "Deployment")
    args = hub["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--stream-replicas=3" in args
