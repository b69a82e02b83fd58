"""A Kamaji control plane's kube-apiserver container as a process: its files laid out, its
flags' paths moved to them, bound to the address Kamaji advertises; what is missing is named."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from sandbox.realkamaji import pods


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def deployment(
    args: list[str], mounts: list[dict[str, Any]], volumes: list[dict[str, Any]]
) -> dict[str, Any]:
    container = {
        "name": "kube-apiserver",
        "command": ["kube-apiserver"],
        "args": args,
        "volumeMounts": mounts,
    }
    other = {"name": "kube-scheduler", "command": ["kube-scheduler"], "args": ["--kubeconfig=/x"]}
    return {
        "metadata": {"name": "demo", "namespace": "tenants"},
        "spec": {"template": {"spec": {"containers": [other, container], "volumes": volumes}}},
    }


PKI = {"mountPath": "/etc/kubernetes/pki", "name": "pki", "readOnly": True}
PROJECTED = {
    "name": "pki",
    "projected": {
        "sources": [
            {"secret": {"name": "demo-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"secret": {"name": "demo-ds", "items": [{"key": "server.crt", "path": "etcd/server.crt"}]}},
        ]
    },
}
SECRETS = {"demo-ca": {"ca.crt": b64("CA"), "ca.key": b64("KEY")}, "demo-ds": {"server.crt": b64("ETCD")}}
ARGS = [
    "--advertise-address=100.64.1.7",
    "--client-ca-file=/etc/kubernetes/pki/ca.crt",
    "--etcd-certfile=/etc/kubernetes/pki/etcd/server.crt",
    "--secure-port=6443",
    "--etcd-prefix=/tenants_demo",
]


def test_the_container_runs_with_its_files_under_root_and_bound_to_its_address() -> None:
    got = pods.launch(deployment(ARGS, [PKI], [PROJECTED]), secrets=SECRETS, config_maps={}, root="/r")
    assert got.args == (
        "kube-apiserver",
        "--advertise-address=100.64.1.7",
        "--client-ca-file=/r/volumes/pki/ca.crt",
        "--etcd-certfile=/r/volumes/pki/etcd/server.crt",
        "--secure-port=6443",
        "--etcd-prefix=/tenants_demo",
        "--bind-address=100.64.1.7",
    )
    assert dict(got.files) == {"volumes/pki/ca.crt": b"CA", "volumes/pki/etcd/server.crt": b"ETCD"}
    assert (got.address, got.port) == ("100.64.1.7", 6443)


@pytest.mark.parametrize(
    ("volume", "mount_path", "files"),
    [
        (
            {"name": "v", "secret": {"secretName": "demo-ca"}},
            "/ca",
            {"volumes/v/ca.crt": b"CA", "volumes/v/ca.key": b"KEY"},
        ),
        ({"name": "v", "configMap": {"name": "cfg"}}, "/cfg", {"volumes/v/a.yaml": b"a: 1"}),
        ({"name": "v", "secret": {"secretName": "absent", "optional": True}}, "/o", {}),
    ],
)
def test_secret_config_map_and_optional_volumes(
    volume: dict[str, Any], mount_path: str, files: dict[str, bytes]
) -> None:
    mounts = [{"name": "v", "mountPath": mount_path}]
    got = pods.launch(
        deployment(ARGS, mounts, [volume]),
        secrets=SECRETS,
        config_maps={"cfg": {"a.yaml": "a: 1"}},
        root="/r",
    )
    assert dict(got.files) == files


@pytest.mark.parametrize(
    ("secrets", "missing"),
    [
        ({"demo-ds": SECRETS["demo-ds"]}, "secret 'demo-ca'"),
        ({**SECRETS, "demo-ds": {}}, "key 'server.crt' of secret 'demo-ds'"),
    ],
)
def test_a_source_not_there_yet_is_named(secrets: dict[str, Any], missing: str) -> None:
    with pytest.raises(pods.MissingSource, match=missing):
        pods.launch(deployment(ARGS, [PKI], [PROJECTED]), secrets=secrets, config_maps={}, root="/r")


@pytest.mark.parametrize(
    ("made", "message"),
    [
        (deployment([a for a in ARGS if "advertise" not in a], [PKI], [PROJECTED]), "no --advertise-address"),
        (deployment(ARGS, [PKI], []), "volume 'pki' is mounted but not declared"),
        (
            {"metadata": {"name": "x"}, "spec": {"template": {"spec": {"containers": []}}}},
            "'x' has no kube-apiserver",
        ),
    ],
)
def test_what_cannot_run_is_refused_with_why(made: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        pods.launch(made, secrets=SECRETS, config_maps={}, root="/r")


def test_the_fingerprint_changes_with_a_file_or_a_flag_and_only_then() -> None:
    def fp(secrets: dict[str, Any], args: list[str]) -> str:
        return pods.launch(
            deployment(args, [PKI], [PROJECTED]), secrets=secrets, config_maps={}, root="/r"
        ).fingerprint

    base = fp(SECRETS, ARGS)
    assert fp(SECRETS, list(ARGS)) == base
    assert fp({**SECRETS, "demo-ca": {"ca.crt": b64("ROTATED")}}, ARGS) != base
    assert fp(SECRETS, [*ARGS, "--v=2"]) != base
