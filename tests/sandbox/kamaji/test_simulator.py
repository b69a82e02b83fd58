"""sandbox.kamaji.Simulator against the Kubernetes API emulator, through kubernetes_asyncio.

Each test runs an emulated cluster, installs a TenantControlPlane CRD (the sandbox's compact one,
and Kamaji's real one when ../shared/fixtures has it, so every status write is validated by the
real schema), and drives TCPs through their lifecycle. Assertions are on states: sequences of
phases are read from a watch (which sees every write), waits poll with a deadline.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import NameOID
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from common import kube
from sandbox import crds as crd_files
from sandbox import kubeapi
from sandbox.kamaji import FINALIZER, Simulator, crds
from tests import helpers

T = TypeVar("T")

GROUP, VERSION, PLURAL = "kamaji.clastix.io", "v1alpha1", "tenantcontrolplanes"
NAMESPACE = "tenants"
DEADLINE = 20.0


@pytest.fixture
async def site(request: pytest.FixtureRequest) -> AsyncIterator[kubeapi.Server]:
    """An emulated site cluster; ``indirect`` parametrization passes Server options."""
    emulator = kubeapi.Server(name="site-a", **getattr(request, "param", {}))
    await emulator.start(port=0)
    try:
        yield emulator
    finally:
        await emulator.stop()


@pytest.fixture
def site_kubeconfig(site: kubeapi.Server, tmp_path: Path) -> Path:
    path: Path = site.write_kubeconfig(tmp_path / "site-a.kubeconfig")
    return path


@pytest.fixture(params=["compact", "kamaji"])
def crd_path(request: pytest.FixtureRequest) -> Path:
    if request.param == "compact":
        return crd_files.TENANT_CONTROL_PLANE
    return helpers.kamaji_crd_path()


@pytest.fixture
async def api(site_kubeconfig: Path, crd_path: Path) -> AsyncIterator[Any]:
    """An ApiClient on a cluster with the TCP CRD installed and the tenants namespace."""
    api_client = await kube.api_client_from_kubeconfig(site_kubeconfig)
    try:
        await crds.install(api_client, [crd_path])
        await client.CoreV1Api(api_client).create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE))
        )
        yield api_client
    finally:
        await api_client.close()


@contextlib.asynccontextmanager
async def simulating(api_client: Any, **settings: Any) -> AsyncIterator[Simulator]:
    sim = Simulator(api_client, **settings)
    await sim.start()
    try:
        yield sim
    finally:
        await sim.stop()


def tcp_body(
    name: str, *, version: str = "v1.30.2", replicas: int = 2, address: str | None = None
) -> dict[str, Any]:
    network: dict[str, Any] = {} if address is None else {"address": address}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TenantControlPlane",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "controlPlane": {
                "deployment": {"replicas": replicas},
                "service": {"serviceType": "LoadBalancer"},
            },
            "kubernetes": {
                "version": version,
                "kubelet": {
                    "cgroupfs": "systemd",
                    "preferredAddressTypes": ["InternalIP", "ExternalIP", "Hostname"],
                },
            },
            "networkProfile": network,
        },
    }


def custom(api_client: Any) -> Any:
    return client.CustomObjectsApi(api_client)


async def create_tcp(api_client: Any, body: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = await custom(api_client).create_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, PLURAL, body
    )
    return created


async def get_tcp(api_client: Any, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = await custom(api_client).get_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, PLURAL, name
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return found


async def patch_spec(api_client: Any, name: str, spec: dict[str, Any]) -> None:
    await custom(api_client).patch_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, PLURAL, name, {"spec": spec}, _content_type="application/merge-patch+json"
    )


async def get_secret(api_client: Any, name: str) -> dict[str, Any] | None:
    try:
        secret = await client.CoreV1Api(api_client).read_namespaced_secret(name, NAMESPACE)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    data: dict[str, Any] = api_client.sanitize_for_serialization(secret)
    return data


def phase(obj: dict[str, Any] | None) -> str | None:
    status = (obj or {}).get("status") or {}
    value = ((status.get("kubernetesResources") or {}).get("version") or {}).get("status")
    return str(value) if value is not None else None


def installed(obj: dict[str, Any] | None) -> str | None:
    status = (obj or {}).get("status") or {}
    value = ((status.get("kubernetesResources") or {}).get("version") or {}).get("version")
    return str(value) if value is not None else None


async def resource_version(api_client: Any) -> str:
    listed = await custom(api_client).list_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL)
    return str(listed["metadata"]["resourceVersion"])


async def watch_phases(
    api_client: Any, name: str, since: str, *, until: Callable[[dict[str, Any]], bool]
) -> list[str]:
    """The distinct successive phases of TCP ``name`` from resourceVersion ``since`` until ``until`` holds."""
    seen: list[str] = []
    try:
        async with asyncio.timeout(DEADLINE), watch.Watch() as stream:
            async for event in stream.stream(
                custom(api_client).list_namespaced_custom_object,
                GROUP,
                VERSION,
                NAMESPACE,
                PLURAL,
                field_selector=f"metadata.name={name}",
                resource_version=since,
                timeout_seconds=int(DEADLINE),
            ):
                obj = event["raw_object"]
                current = phase(obj)
                if current is not None and (not seen or seen[-1] != current):
                    seen.append(current)
                if until(obj):
                    return seen
    except TimeoutError:
        pass
    pytest.fail(f"{name} did not reach the expected state within {DEADLINE}s; phases seen: {seen}")


def pem(secret: dict[str, Any], key: str) -> bytes:
    return base64.b64decode(secret["data"][key])


# Tests


async def test_tcp_becomes_ready_with_both_secrets(api: Any) -> None:
    since = await resource_version(api)
    async with simulating(api, ready_delay=0.2):
        await create_tcp(api, tcp_body("tcp1"))
        phases = await watch_phases(api, "tcp1", since, until=lambda o: phase(o) == "Ready")
        tcp = await get_tcp(api, "tcp1")
    assert phases == ["Provisioning", "Ready"]
    assert tcp is not None
    assert FINALIZER in tcp["metadata"]["finalizers"]
    status = tcp["status"]
    assert installed(tcp) == "v1.30.2"
    assert status["controlPlaneEndpoint"] == "10.240.0.1:6443"
    assert status["kubeconfig"]["admin"]["secretName"] == "tcp1-admin-kubeconfig"
    assert status["certificates"]["ca"]["secretName"] == "tcp1-ca"
    deployment = status["kubernetesResources"]["deployment"]
    assert {
        k: deployment[k] for k in ("replicas", "readyReplicas", "availableReplicas", "updatedReplicas")
    } == {
        "replicas": 2,
        "readyReplicas": 2,
        "availableReplicas": 2,
        "updatedReplicas": 2,
    }
    assert deployment["unavailableReplicas"] == 0
    assert deployment["selector"] == "kamaji.clastix.io/name=tcp1"

    uid = tcp["metadata"]["uid"]
    for suffix, keys in (
        ("ca", ["ca.crt", "ca.key", "tls.crt", "tls.key"]),
        ("admin-kubeconfig", ["admin.conf", "admin.svc", "super-admin.conf", "super-admin.svc"]),
    ):
        secret = await get_secret(api, f"tcp1-{suffix}")
        assert secret is not None, suffix
        assert sorted(secret["data"]) == keys
        assert secret["metadata"]["labels"] == {
            "kamaji.clastix.io/project": "kamaji",
            "kamaji.clastix.io/name": "tcp1",
            "kamaji.clastix.io/component": suffix,
        }
        [owner] = secret["metadata"]["ownerReferences"]
        assert (
            owner["kind"],
            owner["name"],
            owner["uid"],
            owner["controller"],
            owner["blockOwnerDeletion"],
        ) == (
            "TenantControlPlane",
            "tcp1",
            uid,
            True,
            True,
        )


async def test_admin_kubeconfig_certificate_verifies_against_the_ca(api: Any) -> None:
    async with simulating(api, ready_delay=0.0):
        await create_tcp(api, tcp_body("tcp1", address="192.0.2.10"))
        await helpers.eventually(lambda: get_tcp(api, "tcp1"), lambda o: phase(o) == "Ready", what="Ready")
        ca_secret = await get_secret(api, "tcp1-ca")
        kubeconfigs = await get_secret(api, "tcp1-admin-kubeconfig")
    assert ca_secret is not None and kubeconfigs is not None
    ca_cert = x509.load_pem_x509_certificate(pem(ca_secret, "ca.crt"))
    for key, server in (
        ("admin.conf", "https://192.0.2.10:6443"),
        ("admin.svc", f"https://tcp1.{NAMESPACE}.svc:6443"),
    ):
        config = yaml.safe_load(pem(kubeconfigs, key))
        cluster = config["clusters"][0]["cluster"]
        assert cluster["server"] == server
        assert base64.b64decode(cluster["certificate-authority-data"]) == pem(ca_secret, "ca.crt")
        user = config["users"][0]["user"]
        cert = x509.load_pem_x509_certificate(base64.b64decode(user["client-certificate-data"]))
        cert.verify_directly_issued_by(ca_cert)
        assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == [
            "kubernetes-admin"
        ]
        assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
            "system:masters"
        ]


async def test_provisioning_lasts_the_ready_delay(api: Any) -> None:
    async with simulating(api, ready_delay=3600):
        await create_tcp(api, tcp_body("tcp1"))
        tcp = await helpers.eventually(
            lambda: get_tcp(api, "tcp1"),
            lambda o: phase(o) == "Provisioning" and bool((o or {}).get("status", {}).get("kubeconfig")),
            what="Provisioning with secrets",
        )
    assert installed(tcp) is None, "nothing is installed before the control plane is Ready"
    deployment = (tcp or {})["status"]["kubernetesResources"]["deployment"]
    assert (deployment["readyReplicas"], deployment["unavailableReplicas"]) == (0, 2)


async def test_upgrade_goes_through_upgrading(api: Any) -> None:
    async with simulating(api, ready_delay=0.2):
        await create_tcp(api, tcp_body("tcp1"))
        await helpers.eventually(lambda: get_tcp(api, "tcp1"), lambda o: phase(o) == "Ready", what="Ready")
        since = await resource_version(api)
        await patch_spec(api, "tcp1", {"kubernetes": {"version": "v1.31.0"}})
        phases = await watch_phases(
            api, "tcp1", since, until=lambda o: phase(o) == "Ready" and installed(o) == "v1.31.0"
        )
    assert phases == ["Ready", "Upgrading", "Ready"]


async def test_sleep_and_wake_up(api: Any) -> None:
    async with simulating(api, ready_delay=0.2):
        await create_tcp(api, tcp_body("tcp1"))
        await helpers.eventually(lambda: get_tcp(api, "tcp1"), lambda o: phase(o) == "Ready", what="Ready")
        await patch_spec(api, "tcp1", {"controlPlane": {"deployment": {"replicas": 0}}})
        asleep = await helpers.eventually(
            lambda: get_tcp(api, "tcp1"), lambda o: phase(o) == "Sleeping", what="Sleeping"
        )
        since = await resource_version(api)
        await patch_spec(api, "tcp1", {"controlPlane": {"deployment": {"replicas": 3}}})
        phases = await watch_phases(api, "tcp1", since, until=lambda o: phase(o) == "Ready")
        awake = await get_tcp(api, "tcp1")
    assert (asleep or {})["status"]["kubernetesResources"]["deployment"]["replicas"] == 0
    assert phases == ["Sleeping", "NotReady", "Ready"]
    assert (awake or {})["status"]["kubernetesResources"]["deployment"]["readyReplicas"] == 3


async def test_deletion_holds_the_finalizer_until_the_delay(api: Any) -> None:
    async with simulating(api, ready_delay=0.0, delete_delay=3600):
        await create_tcp(api, tcp_body("tcp1"))
        await helpers.eventually(lambda: get_tcp(api, "tcp1"), lambda o: phase(o) == "Ready", what="Ready")
        await custom(api).delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, "tcp1")
        held = await helpers.eventually(
            lambda: get_tcp(api, "tcp1"),
            lambda o: bool((o or {})["metadata"].get("deletionTimestamp")),
            what="deleting",
        )
    assert FINALIZER in (held or {})["metadata"]["finalizers"]
    # A simulator whose delay is over (here: none) lets it go, and the Secrets follow their owner.
    async with simulating(api, ready_delay=0.0, delete_delay=0.0):
        await helpers.eventually(lambda: get_tcp(api, "tcp1"), lambda o: o is None, what="TCP gone")
        for name in ("tcp1-ca", "tcp1-admin-kubeconfig"):
            await helpers.eventually(
                functools.partial(get_secret, api, name), lambda s: s is None, what=f"{name} collected"
            )


async def test_deletion_after_a_short_delay(api: Any) -> None:
    async with simulating(api, ready_delay=0.0, delete_delay=0.3):
        await create_tcp(api, tcp_body("tcp1"))
        await helpers.eventually(lambda: get_tcp(api, "tcp1"), lambda o: phase(o) == "Ready", what="Ready")
        await custom(api).delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, "tcp1")
        await helpers.eventually(lambda: get_tcp(api, "tcp1"), lambda o: o is None, what="TCP gone")


async def test_a_restarted_simulator_keeps_every_endpoint(api: Any) -> None:
    async with simulating(api, ready_delay=0.0):
        for name in ("tcp-b", "tcp-c"):
            await create_tcp(api, tcp_body(name))
        for name in ("tcp-b", "tcp-c"):
            await helpers.eventually(
                functools.partial(get_tcp, api, name), lambda o: phase(o) == "Ready", what=f"{name} Ready"
            )
    before = {
        name: ((await get_tcp(api, name)) or {})["status"]["controlPlaneEndpoint"]
        for name in ("tcp-b", "tcp-c")
    }
    # Listed first after the restart, the new TCP must not take an address that is already in use.
    await create_tcp(api, tcp_body("tcp-a"))
    async with simulating(api, ready_delay=0.0):
        new = await helpers.eventually(
            lambda: get_tcp(api, "tcp-a"), lambda o: phase(o) == "Ready", what="tcp-a Ready"
        )
        after = {
            name: ((await get_tcp(api, name)) or {})["status"]["controlPlaneEndpoint"] for name in before
        }
    assert after == before
    assert (new or {})["status"]["controlPlaneEndpoint"] not in before.values()


async def test_simulator_from_a_kubeconfig_path_owns_and_closes_its_client(
    site_kubeconfig: Path, api: Any
) -> None:
    # filterwarnings=error turns an unclosed aiohttp session into a failure at teardown.
    async with Simulator(site_kubeconfig, ready_delay=0.0) as sim:
        await sim.wait_synced()
        await create_tcp(api, tcp_body("tcp1"))
        await helpers.eventually(lambda: get_tcp(api, "tcp1"), lambda o: phase(o) == "Ready", what="Ready")


async def test_foreign_finalizers_are_kept(api: Any) -> None:
    body = tcp_body("tcp1")
    body["metadata"]["finalizers"] = ["example.com/keep"]
    async with simulating(api, ready_delay=0.0, delete_delay=0.0):
        await create_tcp(api, body)
        ready = await helpers.eventually(
            lambda: get_tcp(api, "tcp1"), lambda o: phase(o) == "Ready", what="Ready"
        )
        assert (ready or {})["metadata"]["finalizers"] == ["example.com/keep", FINALIZER]
        await custom(api).delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, "tcp1")
        held = await helpers.eventually(
            lambda: get_tcp(api, "tcp1"),
            lambda o: FINALIZER not in (o or {})["metadata"]["finalizers"],
            what="our finalizer removed",
        )
    assert (held or {})["metadata"]["finalizers"] == ["example.com/keep"]
    assert (held or {})["metadata"].get("deletionTimestamp")


async def test_a_secret_left_by_someone_else_is_replaced(api: Any) -> None:
    stale = client.V1Secret(
        metadata=client.V1ObjectMeta(name="tcp1-ca", namespace=NAMESPACE), data={"ca.crt": "bm90IGEgY2VydA=="}
    )
    await client.CoreV1Api(api).create_namespaced_secret(NAMESPACE, stale)
    async with simulating(api, ready_delay=0.0):
        created = await create_tcp(api, tcp_body("tcp1"))
        secret = await helpers.eventually(
            lambda: get_secret(api, "tcp1-ca"),
            lambda s: bool(s and s["metadata"].get("ownerReferences")),
            what="tcp1-ca taken over",
        )
    assert (secret or {})["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    x509.load_pem_x509_certificate(pem(secret or {}, "ca.crt"))


@pytest.mark.parametrize("site", [{"history": 4, "bookmark_interval": 3600.0}], indirect=True)
async def test_relists_when_its_watch_expired(api: Any, caplog: pytest.LogCaptureFixture) -> None:
    # The relist after 410 is common.kube.watching's, which the simulator's stream comes from.
    caplog.set_level("INFO", logger="common.kube.watching")
    # watch_timeout=1: the watch ends every second and resumes from the last TCP event it saw.
    async with simulating(api, ready_delay=0.0, watch_timeout=1):
        await create_tcp(api, tcp_body("tcp1"))
        await helpers.eventually(
            lambda: get_tcp(api, "tcp1"), lambda o: phase(o) == "Ready", what="tcp1 Ready"
        )
        # Writes the TCP watch does not see push its resourceVersion out of the 4-event window.
        core = client.CoreV1Api(api)
        for index in range(8):
            filler = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"filler-{index}"))
            await core.create_namespaced_config_map(NAMESPACE, filler)
        await helpers.eventually(
            lambda: [r.getMessage() for r in caplog.records],
            lambda messages: any("relisting" in m for m in messages),
            what="a relist after 410",
        )
        await create_tcp(api, tcp_body("tcp2"))
        await helpers.eventually(
            lambda: get_tcp(api, "tcp2"), lambda o: phase(o) == "Ready", what="tcp2 Ready"
        )


async def test_module_runner(site_kubeconfig: Path, api: Any) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sandbox.kamaji",
        "--kubeconfig",
        str(site_kubeconfig),
        "--ready-delay",
        "0",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await create_tcp(api, tcp_body("tcp1"))
        await helpers.eventually(lambda: get_tcp(api, "tcp1"), lambda o: phase(o) == "Ready", what="Ready")
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(DEADLINE):
            _, stderr = await process.communicate()
    assert process.returncode == 0, stderr.decode()
