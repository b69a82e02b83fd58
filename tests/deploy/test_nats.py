"""deploy/nats: the 3-node JetStream cluster configuration is valid for the real nats-server,
beside the operator.conf and the TLS files the operator commands render, and the Kubernetes
manifests fit it: TLS for clients, routes and leaf nodes from the Secret `nats-tls`, and no
Service publishes the monitoring port."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from sandbox import natsd, ports
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
        [
            *kb,
            "nats-config",
            "--dir",
            str(nats),
            "--auth",
            "operator",
            "--tls-generate",
            str(nats / "tls"),
            *hosts,
        ],
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


def test_cluster_config_needs_the_operator_include(tmp_path: Path) -> None:
    nats = _config_dir(tmp_path)
    (nats / "operator.conf").unlink()
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
    assert pair in client and key in client and 'handshake_first: "2s"' in client
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
    assert 'include "operator.conf"' in text and 'store_dir: "/data/jetstream"' in text
    assert "type: full" in text and 'dir: "/data/resolver"' in text and "allow_delete: false" in text
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
    assert generated["metadata"]["name"] in names and "nats-operator" in names
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


def _node_config(nats: Path, tmp_path: Path, index: int, ports: list[dict[str, int]]) -> Path:
    """The cluster config of node ``index``, moved onto 127.0.0.1 and free ports (routes too)."""
    own = ports[index]
    text = (nats / "cluster.conf").read_text()
    routes = "\n".join(f'    "nats://127.0.0.1:{p["cluster"]}"' for p in ports)
    text = re.sub(r"routes: \[\n(.*?)\n  \]", f"routes: [\n{routes}\n  ]", text, flags=re.S)
    for old, new in (
        ('"0.0.0.0:4222"', f'"127.0.0.1:{own["client"]}"'),
        ('"0.0.0.0:8222"', f'"127.0.0.1:{own["monitor"]}"'),
        ('"0.0.0.0:6222"', f'"127.0.0.1:{own["cluster"]}"'),
        ('"0.0.0.0:7422"', f'"127.0.0.1:{own["leaf"]}"'),
        ('"/var/run/nats/nats.pid"', f'"{tmp_path}/nats-{index}.pid"'),
        ('"/data/jetstream"', f'"{tmp_path}/data-{index}"'),
        ('"/data/resolver"', f'"{tmp_path}/resolver-{index}"'),
        ("max_file_store: 10GB", "max_file_store: 64MB"),
    ):
        assert old in text, old
        text = text.replace(old, new)
    path = nats / f"node-{index}.conf"
    path.write_text(text)
    return path


def _tls_dial(port: int, secret: Path, *, client_cert: bool) -> bytes:
    ctx = ssl.create_default_context(cafile=str(secret / "ca.crt"))
    if client_cert:
        ctx.load_cert_chain(secret / "tls.crt", secret / "tls.key")
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s,
    ):
        return s.recv(5)


def test_nodes_route_to_each_other_over_mutual_tls(tmp_path: Path) -> None:
    """Two nodes of the cluster config, with the certificate nats-config made: the routes come up
    (mutual TLS: each presents the server certificate as a client) and clients need TLS."""
    nats = _config_dir(tmp_path)
    node_ports = [{k: ports.free_port() for k in ("client", "monitor", "cluster", "leaf")} for _ in range(2)]
    procs = []
    try:
        for i in range(2):
            config = _node_config(nats, tmp_path, i, node_ports)
            log = open(tmp_path / f"nats-{i}.log", "wb")  # noqa: SIM115 - closed with the process
            env = {**os.environ, "POD_NAME": f"nats-{i}"}
            argv = [natsd.find_binary(), "-c", str(config)]
            procs.append((subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env), log))
        deadline = time.monotonic() + 30
        routes: list[dict[str, Any]] = []
        while time.monotonic() < deadline and len(routes) < 1:
            assert all(p.poll() is None for p, _ in procs), (tmp_path / "nats-0.log").read_text()[-2000:]
            try:
                routez = f"http://127.0.0.1:{node_ports[0]['monitor']}/routez"
                with urllib.request.urlopen(routez, timeout=2) as r:
                    routes = json.load(r).get("routes") or []
            except OSError:
                pass
            time.sleep(0.2)
        assert routes, (tmp_path / "nats-0.log").read_text()[-2000:]
        assert {r["remote_name"] for r in routes} == {"nats-1"}
        logs = "".join((tmp_path / f"nats-{i}.log").read_text() for i in range(2))
        assert "TLS required for client connections" in logs
        # (A node may dial the other before it listens: "connection refused", retried.)
        assert [
            ln for ln in logs.splitlines() if "[ERR]" in ln and re.search("tls|certificate", ln, re.I)
        ] == []
        # Dialling the route port: TLS with the CA's client certificate, or nothing at all.
        secret = tmp_path / "nats-tls"
        assert b"INFO " in _tls_dial(node_ports[0]["cluster"], secret, client_cert=True)
        with pytest.raises(ssl.SSLError):
            _tls_dial(node_ports[0]["cluster"], secret, client_cert=False)
    finally:
        for proc, log in procs:
            proc.terminate()
            proc.wait(timeout=30)
            log.close()
