"""Unmodified kubectl against each backend: discovery, apply of the real Kamaji CRD, get/patch/delete, -w.

kubectl's namespace is the test's own (its kubeconfig's context); what a test lists across
namespaces it selects by a label of its own (``run=<namespace>``): the real cluster is shared."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import helpers
from tests.sandbox.conftest import tcp
from tests.sandbox.kubeapi import backends

KUBECTL = Path("/usr/bin/kubectl")
pytestmark = pytest.mark.skipif(not KUBECTL.exists(), reason=f"kubectl is absent: {KUBECTL}")


class Kubectl:
    def __init__(self, kubeconfig: Path, cache: Path) -> None:
        self.base = [str(KUBECTL), "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache)]

    async def run(self, *args: str, stdin: str | None = None, ok: bool = True) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            *self.base,
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), timeout=60)
        code = proc.returncode if proc.returncode is not None else -1
        if ok:
            assert code == 0, f"kubectl {' '.join(args)} failed ({code}): {err.decode()}"
        return code, out.decode(), err.decode()

    async def __call__(self, *args: str, stdin: str | None = None) -> str:
        return (await self.run(*args, stdin=stdin))[1]


@pytest.fixture
def kubectl(kubeconfig: Path, tmp_path: Path) -> Kubectl:
    return Kubectl(kubeconfig, tmp_path / "kube-cache")


@pytest.fixture
def crd_file() -> Path:
    return helpers.kamaji_crd_path()


def _yaml(obj: dict[str, Any]) -> str:
    return yaml.safe_dump(obj)


async def _apply_kamaji_crd(kubectl: Kubectl, crd_file: Path) -> str:
    """Server-side apply (no --validate=false needed), then wait until it serves: a real server
    establishes a CRD a moment later."""
    out = await kubectl("apply", "--server-side", "-f", str(crd_file))
    await kubectl("wait", "--for=condition=Established", "crd/tenantcontrolplanes.kamaji.clastix.io")
    return out


async def test_api_resources(kubectl: Kubectl) -> None:
    out = await kubectl("api-resources")
    rows = {tuple(line.split()[:1]) for line in out.splitlines()[1:]}
    for name in ("namespaces", "secrets", "configmaps", "events", "leases", "customresourcedefinitions"):
        assert (name,) in rows
    assert "coordination.k8s.io/v1" in out and "events.k8s.io/v1" in out


async def test_apply_the_real_kamaji_crd_then_manage_a_tcp(
    backend: backends.Backend, namespace: str, kubectl: Kubectl, crd_file: Path
) -> None:
    # As on a real cluster, client-side apply cannot store this CRD: its last-applied-configuration
    # annotation would exceed 256 KiB. Kamaji's docs (and this test) use server-side apply.
    code, _, err = await kubectl.run("apply", "-f", str(crd_file), ok=False)
    assert code != 0
    assert "metadata.annotations: Too long: may not be more than 262144 bytes" in err
    out = await _apply_kamaji_crd(kubectl, crd_file)
    assert "tenantcontrolplanes.kamaji.clastix.io serverside-applied" in out
    assert "tenantcontrolplanes" in await kubectl("api-resources", "--api-group=kamaji.clastix.io")
    # Named after the test's namespace, and before it in a list: "-" sorts before "/".
    tenants = f"{namespace}-tenants"
    await kubectl(
        "apply",
        "-f",
        "-",
        stdin=_yaml({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": tenants}}),
    )
    backend.namespaces.append(tenants)  # deleted with the test's own
    run = {"run": namespace}
    manifest = tcp("tenant-a", namespace=tenants, labels={"team": "a", **run})
    assert "created" in await kubectl("apply", "-f", "-", stdin=_yaml(manifest))
    await kubectl("apply", "-f", "-", stdin=_yaml(tcp("tenant-b", labels={"team": "b", **run})))

    table = await kubectl("get", "tcp", "-n", tenants)
    header, row = table.splitlines()[:2]
    assert header.split()[:2] == ["NAME", "VERSION"]
    assert row.split()[:2] == ["tenant-a", "v1.30.0"]
    by_name = json.loads(await kubectl("get", "tenantcontrolplane", "tenant-a", "-n", tenants, "-o", "json"))
    assert by_name["spec"]["kubernetes"]["kubelet"]["cgroupfs"] == "systemd"
    everywhere = await kubectl("get", "tcp", "-A", "-l", f"run={namespace}", "-o", "name")
    assert everywhere.split() == [
        "tenantcontrolplane.kamaji.clastix.io/tenant-a",
        "tenantcontrolplane.kamaji.clastix.io/tenant-b",
    ]  # in etcd's key order: <tenants>/tenant-a, then <namespace>/tenant-b
    labelled = await kubectl(
        "get", "tcp", "-A", "-l", f"team=a,run={namespace}", "-o", "jsonpath={.items[*].metadata.name}"
    )
    assert labelled == "tenant-a"

    await kubectl(
        "patch",
        "tcp",
        "tenant-a",
        "-n",
        tenants,
        "--type=merge",
        "-p",
        '{"spec":{"kubernetes":{"version":"v1.31.0"}}}',
    )
    patched = json.loads(await kubectl("get", "tcp", "tenant-a", "-n", tenants, "-o", "json"))
    assert patched["spec"]["kubernetes"]["version"] == "v1.31.0"
    assert patched["metadata"]["generation"] == 2
    await kubectl(
        "patch",
        "tcp",
        "tenant-a",
        "-n",
        tenants,
        "--type=json",
        "-p",
        '[{"op":"replace","path":"/spec/kubernetes/version","value":"v1.31.1"}]',
    )
    reapplied = await kubectl("apply", "-f", "-", stdin=_yaml(manifest))
    assert "configured" in reapplied

    assert "deleted" in await kubectl("delete", "tcp", "tenant-a", "-n", tenants)
    code, _, err = await kubectl.run("get", "tcp", "tenant-a", "-n", tenants, ok=False)
    assert code != 0 and "NotFound" in err


async def test_apply_of_an_invalid_tcp_reports_the_fields(kubectl: Kubectl, crd_file: Path) -> None:
    await _apply_kamaji_crd(kubectl, crd_file)
    bad = tcp("bad")
    bad["spec"]["controlPlane"]["service"]["serviceType"] = "Foo"
    code, _, err = await kubectl.run("apply", "-f", "-", stdin=_yaml(bad), ok=False)
    assert code != 0
    assert 'spec.controlPlane.service.serviceType: Unsupported value: "Foo"' in err


async def test_get_watch_prints_events(kubectl: Kubectl, crd_file: Path) -> None:
    await _apply_kamaji_crd(kubectl, crd_file)
    await kubectl("apply", "-f", "-", stdin=_yaml(tcp("first")))
    proc = await asyncio.create_subprocess_exec(
        *kubectl.base,
        "get",
        "tcp",
        "-w",
        "--output-watch-events",
        "--request-timeout=0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        lines = [await asyncio.wait_for(proc.stdout.readline(), timeout=30) for _ in range(2)]
        assert lines[0].split()[:2] == [b"EVENT", b"NAME"]
        assert lines[1].split()[:2] == [b"ADDED", b"first"]
        await kubectl("apply", "-f", "-", stdin=_yaml(tcp("second")))
        await kubectl(
            "patch", "tcp", "first", "--type=merge", "-p", '{"spec":{"kubernetes":{"version":"v1.31.0"}}}'
        )
        await kubectl("delete", "tcp", "second")
        seen = [(await asyncio.wait_for(proc.stdout.readline(), timeout=30)).split()[:3] for _ in range(3)]
        assert seen == [
            [b"ADDED", b"second", b"v1.30.0"],
            [b"MODIFIED", b"first", b"v1.31.0"],
            [b"DELETED", b"second", b"v1.30.0"],
        ]
    finally:
        proc.terminate()
        await proc.wait()


async def test_builtins_with_kubectl(kubectl: Kubectl) -> None:
    mine = {"mine": "yes"}  # not the real controllers' kube-root-ca.crt
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "creds", "labels": mine},
        "stringData": {"token": "abc"},
    }
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "labels": mine},
        "data": {"a": "1"},
    }
    await kubectl("apply", "-f", "-", stdin=_yaml(secret))
    await kubectl("apply", "-f", "-", stdin=_yaml(configmap))
    assert (await kubectl("get", "secret", "creds", "-o", "jsonpath={.data.token}")) == "YWJj"
    out = await kubectl("get", "secrets,configmaps", "-l", "mine=yes", "-o", "name")
    assert out.split() == ["secret/creds", "configmap/settings"]
    await kubectl("label", "configmap", "settings", "tier=front")
    assert (await kubectl("get", "cm", "-l", "tier=front", "-o", "name")).split() == ["configmap/settings"]
    code, _, err = await kubectl.run("delete", "namespace", "default", "--wait=false", ok=False)
    assert code != 0
    assert 'namespaces "default" is forbidden: this namespace may not be deleted' in err


async def test_imperative_create_sends_protobuf(
    backend: backends.Backend, namespace: str, kubectl: Kubectl
) -> None:
    team = f"{namespace}-team"
    await kubectl("create", "namespace", team)
    backend.namespaces.append(team)  # deleted with the test's own
    await kubectl("create", "secret", "generic", "creds", "-n", team, "--from-literal=token=abc")
    await kubectl("create", "configmap", "cfg", "-n", team, "--from-literal=a=1")
    secret = json.loads(await kubectl("get", "secret", "creds", "-n", team, "-o", "json"))
    assert secret["data"] == {"token": "YWJj"} and secret["type"] == "Opaque"
    assert "generateName" not in secret["metadata"]
    assert (await kubectl("get", "cm", "cfg", "-n", team, "-o", "jsonpath={.data.a}")) == "1"
