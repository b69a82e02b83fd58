"""sandbox.kubeapi.Server and `python -m sandbox.kubeapi`: lifecycle, kubeconfig, discovery, Tables, verbs.

The Server's own API (kubeconfig, request counts, CRD files, the module's entry point) is the
emulator's only; what any API server answers (discovery, Tables, dry runs, deletecollection,
versions of a CRD, the health and OpenAPI endpoints) is checked on each backend."""

from __future__ import annotations

import asyncio
import copy
import signal
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from sandbox import kubeapi
from tests.sandbox.conftest import WIDGET_CRD, widget
from tests.sandbox.kubeapi import backends

ROOT = Path(__file__).resolve().parents[3]
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"


@pytest.mark.emulator_only(reason="the emulator's own kubeconfig")
async def test_kubeconfig_names_the_context_after_the_server(
    kube_server: kubeapi.Server, tmp_path: Path
) -> None:
    path = kube_server.write_kubeconfig(tmp_path / "deep" / "mgmt.kubeconfig")
    config = yaml.safe_load(path.read_text())
    assert config["current-context"] == "test"
    assert config["clusters"][0]["cluster"]["server"] == kube_server.url
    assert kube_server.url.startswith("http://127.0.0.1:")


@pytest.mark.emulator_only(reason="the emulator's own Servers")
async def test_two_servers_are_two_clusters() -> None:
    async with kubeapi.Server("a") as a, kubeapi.Server("b") as b, aiohttp.ClientSession() as http:
        assert a.url != b.url
        await http.post(f"{a.url}/api/v1/namespaces", json={"metadata": {"name": "only-in-a"}})
        async with http.get(f"{b.url}/api/v1/namespaces/only-in-a") as resp:
            assert resp.status == 404


@pytest.mark.emulator_only(reason="the emulator's own count of the requests it served")
async def test_requests_are_counted_by_method_and_address(kube_server: kubeapi.Server) -> None:
    """What a client asked, seen from the server: tests check a client's calls here."""
    base = f"{kube_server.url}/api/v1/namespaces/default/configmaps"
    async with aiohttp.ClientSession() as http:
        await http.post(base, json={"metadata": {"name": "c1"}})
        for _ in range(2):
            async with http.get(f"{base}/c1") as resp:
                assert resp.status == 200
        async with http.get(f"{base}/absent") as resp:
            assert resp.status == 404
        async with http.get(base) as resp:
            assert resp.status == 200
        async with http.get(f"{kube_server.url}/version") as resp:
            assert resp.status == 200
    assert kube_server.requests == {
        ("POST", "configmaps", "default", "", ""): 1,
        ("GET", "configmaps", "default", "c1", ""): 2,
        ("GET", "configmaps", "default", "absent", ""): 1,
        ("GET", "configmaps", "default", "", ""): 1,
    }
    # The same counts on /metrics, by method and resource, for benchmarks in other processes.
    async with aiohttp.ClientSession() as http, http.get(f"{kube_server.url}/metrics") as resp:
        text = await resp.text()
    samples = [line for line in text.splitlines() if line.startswith("kubeapi_requests_total{")]
    assert samples == [
        'kubeapi_requests_total{method="GET",resource="configmaps"} 4',
        'kubeapi_requests_total{method="POST",resource="configmaps"} 1',
    ]


async def test_discovery(backend: backends.Backend) -> None:
    async with backend.http() as http:
        async with http.get(f"{backend.url}/apis") as resp:
            assert resp.content_type == "application/json"
            groups = await resp.json()
        async with http.get(f"{backend.url}/api") as resp:
            assert (await resp.json())["versions"] == ["v1"]
        async with http.get(f"{backend.url}/version") as resp:
            assert (await resp.json())["major"] == "1"
        async with http.get(f"{backend.url}/apis/coordination.k8s.io") as resp:
            assert (await resp.json())["preferredVersion"]["version"] == "v1"
        async with http.get(f"{backend.url}/apis/nothing.io/v1") as resp:
            assert resp.status == 404
    assert groups["kind"] == "APIGroupList"
    assert {
        "apiextensions.k8s.io",
        "authorization.k8s.io",
        "coordination.k8s.io",
        "events.k8s.io",
        "rbac.authorization.k8s.io",
    } <= {g["name"] for g in groups["groups"]}


@pytest.mark.emulator_only(reason="DEVIATIONS: 'Discovery is the unaggregated kind only'")
async def test_discovery_answers_legacy_json_to_aggregated_requests(kube_server: kubeapi.Server) -> None:
    async with (
        aiohttp.ClientSession(headers={"Accept": AGGREGATED}) as http,
        http.get(f"{kube_server.url}/apis") as resp,
    ):
        assert resp.content_type == "application/json"
        groups = await resp.json()
    assert groups["kind"] == "APIGroupList"
    assert [g["name"] for g in groups["groups"]] == [
        "apiextensions.k8s.io",
        "authorization.k8s.io",
        "coordination.k8s.io",
        "events.k8s.io",
        "rbac.authorization.k8s.io",
    ]


async def test_table_output_uses_printer_columns(backend: backends.Backend, namespace: str) -> None:
    crd = backend.own_crd(WIDGET_CRD)
    group = crd["spec"]["group"]
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = [
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    await backend.apply_crd(crd)
    base = f"{backend.url}/apis/{group}/v1/namespaces/{namespace}/widgets"
    async with backend.http() as http:
        await http.post(base, json={**widget("w", replicas=3), "apiVersion": f"{group}/v1"})
        async with http.get(base, headers={"Accept": TABLE}) as resp:
            table = await resp.json()
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Replicas", "Age"]
    cells = table["rows"][0]["cells"]
    assert cells[:2] == ["w", 3] and cells[2].endswith("s")
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


async def test_dry_run_stores_nothing(backend: backends.Backend, namespace: str) -> None:
    base = f"{backend.url}/api/v1/namespaces/{namespace}/configmaps"
    async with backend.http() as http:
        async with http.post(f"{base}?dryRun=All", json={"metadata": {"name": "dry"}}) as resp:
            assert resp.status == 201
        async with http.get(f"{base}/dry") as resp:
            assert resp.status == 404


async def test_delete_collection_with_a_selector(backend: backends.Backend, namespace: str) -> None:
    base = f"{backend.url}/api/v1/namespaces/{namespace}/configmaps"
    async with backend.http() as http:
        for name, tier in (("a", "x"), ("b", "x"), ("c", "y")):
            await http.post(base, json={"metadata": {"name": name, "labels": {"tier": tier}}})
        async with http.delete(f"{base}?labelSelector=tier%3Dx") as resp:
            assert [i["metadata"]["name"] for i in (await resp.json())["items"]] == ["a", "b"]
        async with http.get(f"{base}?labelSelector=tier") as resp:
            assert [i["metadata"]["name"] for i in (await resp.json())["items"]] == ["c"]


async def test_every_served_version_of_a_crd(backend: backends.Backend, namespace: str) -> None:
    crd: dict[str, Any] = backend.own_crd(WIDGET_CRD)
    group = crd["spec"]["group"]
    v1 = crd["spec"]["versions"][0]
    crd["spec"]["versions"] = [{**copy.deepcopy(v1), "name": "v1beta1", "storage": False}, v1]
    await backend.apply_crd(crd)
    base = f"{backend.url}/apis/{group}"
    async with backend.http() as http:
        await http.post(
            f"{base}/v1beta1/namespaces/{namespace}/widgets",
            json={**widget("w"), "apiVersion": f"{group}/v1beta1"},
        )
        async with http.get(f"{base}/v1/namespaces/{namespace}/widgets/w") as resp:
            assert (await resp.json())["apiVersion"] == f"{group}/v1"
        async with http.get(f"{base}/v1beta1/namespaces/{namespace}/widgets/w") as resp:
            assert (await resp.json())["apiVersion"] == f"{group}/v1beta1"
        async with http.get(base) as resp:
            assert (await resp.json())["preferredVersion"]["version"] == "v1"


@pytest.mark.emulator_only(reason="the emulator's own loading of CRD files")
async def test_apply_crd_files(kube_server: kubeapi.Server, tmp_path: Path) -> None:
    path = tmp_path / "crds.yaml"
    path.write_text(yaml.safe_dump_all([WIDGET_CRD, {"apiVersion": "v1", "kind": "ConfigMap"}]))
    applied = kube_server.apply_crd_files([path])
    assert [c["metadata"]["name"] for c in applied] == ["widgets.example.com"]
    assert kube_server.store.resolve("example.com", "v1", "widgets") is not None
    again = kube_server.apply_crd_files([path])  # idempotent: an update, not a 409
    assert again[0]["metadata"]["uid"] == applied[0]["metadata"]["uid"]


@pytest.mark.emulator_only(reason="the emulator's own command")
async def test_module_entry_point_runs_until_interrupted(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    crd_file = tmp_path / "crd.yaml"
    crd_file.write_text(yaml.safe_dump(WIDGET_CRD))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sandbox.kubeapi",
        "--port",
        "0",
        "--kubeconfig",
        str(kubeconfig),
        "--name",
        "solo",
        "--crd",
        str(crd_file),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), timeout=30)).decode()
        url = line.split()[0]
        assert url.startswith("http://127.0.0.1:")
        assert yaml.safe_load(kubeconfig.read_text())["current-context"] == "solo"
        async with aiohttp.ClientSession() as http, http.get(f"{url}/apis/example.com/v1") as resp:
            assert resp.status == 200
    finally:
        proc.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(proc.wait(), timeout=30)
    assert code == 0
    stderr = await proc.stderr.read() if proc.stderr else b""
    assert b"Traceback" not in stderr


@pytest.mark.parametrize("path", ["/openapi/v2", "/openapi/v3", "/healthz"])
async def test_stub_endpoints(backend: backends.Backend, path: str) -> None:
    async with backend.http() as http, http.get(f"{backend.url}{path}") as resp:
        assert resp.status == 200
