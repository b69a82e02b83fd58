"""The plaintext scan: the secrets a site's Kamaji generates never reach the bus, its
disk or any log in the clear, and every connection to NATS is TLS.

The sandbox topology runs as it does for ``kamaji-broker sandbox`` (every part a process, the
credentials and TLS files made by the operator commands) until every control plane is Ready and
its CAPI Secrets exist. Then the real secret material is read from each site cluster, the admin
kubeconfig's client key and the CA key, each as raw PEM, as its base64 (the API's and the
kubeconfig's form) and as a line of the PEM body (a leak with other line breaks or JSON escapes
still contains it), and searched for in every JetStream store file, the nats-server log and
every process log under the sandbox directory. The sealed boxes on the bus are the only form
the secrets may take there.

The TLS case fails on the old code (plaintext connections); the scans already held and guard
against regressions (a debug log of a Secret, an unsealed publish).
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml

from common.kube import resources
from sandbox.launcher import Options, System, workload
from tests import helpers

pytestmark = pytest.mark.asyncio(loop_scope="module")

SITES = ("site-a", "site-b")
NAMESPACE = "tenants"


class Scan:
    """The running topology and the material that must not leak, by (site, secret, form)."""

    def __init__(self, topology: System) -> None:
        self.topology = topology
        self.needles: dict[tuple[str, str, str], list[bytes]] = {}

    def add(self, site: str, what: str, pem: bytes) -> None:
        body = [ln for ln in pem.decode().splitlines() if ln and not ln.startswith("-----")]
        forms = {
            "raw": [pem],
            "base64": [base64.b64encode(pem)],
            # Every full line of the body: a leak with other line breaks still shows them.
            "pem body": [ln.encode() for ln in body if len(ln) >= 48],
        }
        for form, values in forms.items():
            assert values, f"{site} {what}: no {form} form"
            self.needles.setdefault((site, what, form), []).extend(values)


async def _secret_material(topology: System, scan: Scan) -> None:
    for site in SITES:
        items = (await topology.site_kube(site).list(resources.SECRET, namespace=NAMESPACE)).items
        for secret in items:
            name = secret["metadata"]["name"]
            data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
            if name.endswith("-ca"):
                scan.add(site, "CA key", data["ca.key"])
            elif name.endswith("-admin-kubeconfig"):
                config = yaml.safe_load(data["admin.conf"])
                (user,) = config["users"]
                scan.add(site, "admin client key", base64.b64decode(user["user"]["client-key-data"]))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def scan(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Scan]:
    topology = System(
        tmp_path_factory.mktemp("plaintext") / "sandbox", Options(sites=SITES, kamaji_delay=0.2)
    )
    await topology.start()
    try:
        names = workload.control_plane_names(SITES, per_site=1)
        for name, site in names:
            await topology.create_control_plane(name, site=site)

        async def all_ready() -> bool:
            return (await topology.progress()).done

        await helpers.eventually(all_ready, within=60, every=0.2)
        result = Scan(topology)
        await _secret_material(topology, result)
        # Every site's CA and admin key, or the scan proves nothing.
        assert {(s, w) for s, w, _ in result.needles} == {
            (s, w) for s in SITES for w in ("CA key", "admin client key")
        }
        yield result
    finally:
        await topology.stop()


def _files(topology: System, place: str) -> list[Path]:
    if place == "JetStream store":
        found = [p for p in (topology.directory / "jetstream").rglob("*") if p.is_file()]
    elif place == "nats-server log":
        found = [topology.log("nats-server")]
    else:
        found = [p for p in topology.logs_dir.glob("*.log") if p.name != "nats-server.log"]
    assert found and all(p.is_file() for p in found), place
    return found


PLACES = ["JetStream store", "nats-server log", "process logs"]
FORMS = ["raw", "base64", "pem body"]
WHAT = ["admin client key", "CA key"]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("what", WHAT)
@pytest.mark.parametrize("place", PLACES)
async def test_no_secret_in_the_clear(scan: Scan, place: str, what: str, form: str) -> None:
    files = _files(scan.topology, place)
    contents = {p: p.read_bytes() for p in files}
    leaks = [
        f"{site}'s {what} ({form}) in {path}"
        for (site, kind, f), needles in scan.needles.items()
        if kind == what and f == form
        for path, content in contents.items()
        if any(n in content for n in needles)
    ]
    assert leaks == []


async def test_the_scan_reads_the_real_store(scan: Scan) -> None:
    """The store files are the ones the streams live in, readable as they are: the subjects of
    the control planes are there in the clear (only the secrets are sealed)."""
    store = b"".join(p.read_bytes() for p in _files(scan.topology, "JetStream store"))
    for site in SITES:
        assert f"kb.secret.{site}.{NAMESPACE}.{site}-1".encode() in store
        assert f"kb.status.{site}.{NAMESPACE}.{site}-1".encode() in store


async def test_every_connection_to_nats_is_tls(scan: Scan) -> None:
    url = f"{scan.topology.nats_monitor_url}/connz?limit=1024"
    async with aiohttp.ClientSession() as http, http.get(url) as r:
        connections: list[dict[str, Any]] = (await r.json())["connections"]
    names = {c.get("name") for c in connections}
    assert {"kamaji-broker-hub", *(f"kamaji-broker-agent-{s}" for s in SITES)} <= names
    plaintext = [c.get("name") for c in connections if not c.get("tls_version")]
    assert plaintext == []
    assert all(c.get("tls_first") for c in connections), "TLS before the server's first byte"
    log = scan.topology.log("nats-server").read_text()
    assert "TLS required for client connections" in log
