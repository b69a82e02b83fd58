"""sandbox.kubeapi.Server and `python -m sandbox.kubeapi`: lifecycle, kubeconfig, discovery, Tables, verbs."""

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

ROOT = Path(__file__).resolve().parents[3]
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"


async def test_kubeconfig_names_the_context_after_the_server(
    kube_server: kubeapi.Server, tmp_path: Path
) -> None:
    path = kube_server.write_kubeconfig(tmp_path / "deep" / "mgmt.kubeconfig")
    config = yaml.safe_load(path.read_text())
    assert config["current-context"] == "test"
    assert config["clusters"][0]["cluster"]["server"] == kube_server.url
    assert kube_server.url.startswith("http://127.0.0.1:")


async def test_two_servers_are_two_clusters() -> None:
    async with kubeapi.Server("a") as a, kubeapi.Server("b") as b, aiohttp.ClientSession() as http:
        assert a.url != b.url
        await http.post(f"{a.url}/api/v1/namespaces", json={"metadata": {"name": "only-in-a"}})
        async with http.get(f"{b.url}/api/v1/namespaces/only-in-a") as resp:
            assert resp.status == 404


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
        ("POST", "configmaps", "default", ""): 1,
        ("GET", "configmaps", "default", "c1"): 2,
        ("GET", "configmaps", "default", "absent"): 1,
        ("GET", "configmaps", "default", ""): 1,
    }


async def test_discovery_answers_legacy_json_to_aggregated_requests(kube_server: kubeapi.Server) -> None:
    async with aiohttp.ClientSession(headers={"Accept": AGGREGATED}) as http:
        async with http.get(f"{kube_server.url}/apis") as resp:
            assert resp.content_type == "application/json"
            groups = await resp.json()
        async with http.get(f"{kube_server.url}/api") as resp:
            assert (await resp.json())["versions"] == ["v1"]
        async with http.get(f"{kube_server.url}/version") as resp:
            assert (await resp.json())["major"] == "1"
        async with http.get(f"{kube_server.url}/apis/coordination.k8s.io") as resp:
            assert (await resp.json())["preferredVersion"]["version"] == "v1"
        async with http.get(f"{kube_server.url}/apis/nothing.io/v1") as resp:
            assert resp.status == 404
    assert groups["kind"] == "APIGroupList"
    assert [g["name"] for g in groups["groups"]] == [
        "apiextensions.k8s.io",
        "authorization.k8s.io",
        "coordination.k8s.io",
        "events.k8s.io",
        "rbac.authorization.k8s.io",
    ]


async def test_table_output_uses_printer_columns(with_widgets: kubeapi.Server) -> None:
    crd = copy.deepcopy(WIDGET_CRD)
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = [
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    await with_widgets.apply_crd(crd)
    base = f"{with_widgets.url}/apis/example.com/v1/namespaces/default/widgets"
    async with aiohttp.ClientSession() as http:
        await http.post(base, json=widget("w", replicas=3))
        async with http.get(base, headers={"Accept": TABLE}) as resp:
            table = await resp.json()
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Replicas", "Age"]
    cells = table["rows"][0]["cells"]
    assert cells[:2] == ["w", 3] and cells[2].endswith("s")
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


async def test_dry_run_stores_nothing(kube_server: kubeapi.Server) -> None:
    base = f"{kube_server.url}/api/v1/namespaces/default/configmaps"
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{base}?dryRun=All", json={"metadata": {"name": "dry"}}) as resp:
            assert resp.status == 201
        async with http.get(f"{base}/dry") as resp:
            assert resp.status == 404


async def test_delete_collection_with_a_selector(kube_server: kubeapi.Server) -> None:
    base = f"{kube_server.url}/api/v1/namespaces/default/configmaps"
    async with aiohttp.ClientSession() as http:
        for name, tier in (("a", "x"), ("b", "x"), ("c", "y")):
            await http.post(base, json={"metadata": {"name": name, "labels": {"tier": tier}}})
        async with http.delete(f"{base}?labelSelector=tier%3Dx") as resp:
            assert [i["metadata"]["name"] for i in (await resp.json())["items"]] == ["a", "b"]
        async with http.get(base) as resp:
            assert [i["metadata"]["name"] for i in (await resp.json())["items"]] == ["c"]


async def test_every_served_version_of_a_crd(kube_server: kubeapi.Server) -> None:
    crd: dict[str, Any] = copy.deepcopy(WIDGET_CRD)
    v1 = crd["spec"]["versions"][0]
    crd["spec"]["versions"] = [{**copy.deepcopy(v1), "name": "v1beta1", "storage": False}, v1]
    await kube_server.apply_crd(crd)
    async with aiohttp.ClientSession() as http:
        await http.post(
            f"{kube_server.url}/apis/example.com/v1beta1/namespaces/default/widgets",
            json={**widget("w"), "apiVersion": "example.com/v1beta1"},
        )
        async with http.get(f"{kube_server.url}/apis/example.com/v1/namespaces/default/widgets/w") as resp:
            assert (await resp.json())["apiVersion"] == "example.com/v1"
        async with http.get(
            f"{kube_server.url}/apis/example.com/v1beta1/namespaces/default/widgets/w"
        ) as resp:
            assert (await resp.json())["apiVersion"] == "example.com/v1beta1"
        async with http.get(f"{kube_server.url}/apis/example.com") as resp:
            assert (await resp.json())["preferredVersion"]["version"] == "v1"


async def test_apply_crd_files(kube_server: kubeapi.Server, tmp_path: Path) -> None:
    path = tmp_path / "crds.yaml"
    path.write_text(yaml.safe_dump_all([WIDGET_CRD, {"apiVersion": "v1", "kind": "ConfigMap"}]))
    applied = kube_server.apply_crd_files([path])
    assert [c["metadata"]["name"] for c in applied] == ["widgets.example.com"]
    assert kube_server.store.resolve("example.com", "v1", "widgets") is not None
    again = kube_server.apply_crd_files([path])  # idempotent: an update, not a 409
    assert again[0]["metadata"]["uid"] == applied[0]["metadata"]["uid"]


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
async def test_stub_endpoints(kube_server: kubeapi.Server, path: str) -> None:
    async with aiohttp.ClientSession() as http, http.get(f"{kube_server.url}{path}") as resp:
        assert resp.status == 200
