"""The two API servers the emulator's contract tests run against: the emulator and the real one.

A ``Backend`` is what a contract test talks to, whichever server answers: a kubernetes_asyncio
``api`` client as the admin, raw ``http`` sessions as the admin, a ``kubeconfig`` for kubectl,
fresh namespaces, CRDs applied until they serve, and ServiceAccount kubeconfigs.

``emulator``  a ``sandbox.kubeapi.Server`` of the test's own (``server``), started and stopped
              with it: plain HTTP, any request is the admin's.
``real``      the session's ``realkube.Cluster`` (etcd, kube-apiserver, kube-controller-manager),
              shared by every test: HTTPS, the admin by client certificate. Tests keep to
              namespaces of their own (``new_namespace``) and to cluster-scoped names of their
              own; the CRDs of ``conftest`` are shared and never changed, a test that changes
              or deletes a CRD makes one of its own (``own_crd``), deleted after it.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import ssl
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from kubernetes_asyncio import client as aclient
from kubernetes_asyncio import config as aconfig
from kubernetes_asyncio.client.exceptions import ApiException

from sandbox import kubeapi, realkube
from tests import helpers

CRD_WAIT = 30.0
"""Seconds a CRD may take to be Established on the real server (its controllers, a moment later)."""

SETTLE_WAIT = 10.0
"""Seconds the real controllers may take to furnish a new namespace (ServiceAccount, CA bundle)."""


def _established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def status_of(exc: ApiException) -> dict[str, Any]:
    """The Status body of a refused request."""
    body: dict[str, Any] = yaml.safe_load(exc.body or b"{}") or {}
    return body


class Backend:
    """What a contract test uses of an API server; ``Emulator`` and ``Real`` fill it in."""

    url: str
    api: aclient.ApiClient
    admin_kubeconfig: Path
    server: kubeapi.Server | None = None
    """The emulator itself, for the tests of what only it has (``emulator_only``)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.namespaces: list[str] = []
        self.crds: list[str] = []

    @property
    def real(self) -> bool:
        return self.server is None

    def ssl_context(self, *, admin: bool) -> ssl.SSLContext | bool:
        return False

    def http(self, *, admin: bool = True, **kwargs: Any) -> aiohttp.ClientSession:
        """A raw HTTP session (close it: ``async with``), as the admin unless ``admin`` is false:
        then as whoever the requests' bearer token names."""
        connector = aiohttp.TCPConnector(ssl=self.ssl_context(admin=admin))
        return aiohttp.ClientSession(connector=connector, **kwargs)

    def kubeconfig(self, path: Path, *, namespace: str) -> Path:
        """The admin's kubeconfig at ``path``, its context in ``namespace`` (kubectl's default)."""
        config = yaml.safe_load(self.admin_kubeconfig.read_text())
        for context in config["contexts"]:
            context["context"]["namespace"] = namespace
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path

    async def new_namespace(self, prefix: str = "t") -> str:
        """A namespace of the test's own, as the real controllers leave a new one (with its
        ``default`` ServiceAccount and ``kube-root-ca.crt``), so nothing arrives in it later."""
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        core = aclient.CoreV1Api(self.api)
        await core.create_namespace(aclient.V1Namespace(metadata=aclient.V1ObjectMeta(name=name)))
        self.namespaces.append(name)
        if self.real:

            async def furnished() -> bool:
                accounts = await core.list_namespaced_service_account(name)
                maps = await core.list_namespaced_config_map(name)
                return bool(accounts.items) and bool(maps.items)

            await helpers.eventually(furnished, within=SETTLE_WAIT, what=f"namespace {name} furnished")
        return name

    def own_crd(self, crd: dict[str, Any]) -> dict[str, Any]:
        """A copy of ``crd`` in an API group of the test's own (``<random>.<group>``), for a test
        that changes or deletes its CRD: the other tests keep the original. Deleted after it."""
        new = copy.deepcopy(crd)
        group = f"t{uuid.uuid4().hex[:8]}.{crd['spec']['group']}"
        new["spec"]["group"] = group
        new["metadata"]["name"] = f"{crd['spec']['names']['plural']}.{group}"
        self.crds.append(new["metadata"]["name"])
        return new

    async def apply_crd(self, crd: dict[str, Any]) -> dict[str, Any]:
        """Create or update ``crd`` and return it once it is Established."""
        base = f"{self.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        url = f"{base}/{crd['metadata']['name']}"
        async with self.http() as http:
            async with http.post(base, json=crd) as resp:
                created = resp.status == 201
                assert created or resp.status == 409, await resp.text()
            if not created:
                async with http.get(url) as resp:
                    current = await resp.json()
                body = copy.deepcopy(crd)
                body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                async with http.put(url, json=body) as resp:
                    assert resp.status == 200, await resp.text()

            async def read() -> dict[str, Any]:
                async with http.get(url) as resp:
                    found: dict[str, Any] = await resp.json()
                    return found

            return await helpers.eventually(
                read, _established, within=CRD_WAIT, what=f"CRD {url} Established"
            )

    async def service_account_kubeconfig(self, *, namespace: str, name: str, path: Path) -> Path:
        raise NotImplementedError

    async def close(self) -> None:
        """Delete the test's namespaces and CRDs (not waiting for them to go); close the client."""
        async with self.http() as http:
            paths = [f"/api/v1/namespaces/{n}" for n in self.namespaces]
            paths += [f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{n}" for n in self.crds]
            for path in paths:
                async with http.delete(f"{self.url}{path}") as resp:
                    assert resp.status in (200, 202, 404, 409), await resp.text()
        await self.api.close()


class Emulator(Backend):
    def __init__(self, directory: Path, server: kubeapi.Server) -> None:
        super().__init__(directory)
        self.server = server
        self.url = server.url
        self.api = aclient.ApiClient(aclient.Configuration(host=server.url))
        self.admin_kubeconfig = server.write_kubeconfig(directory / "admin.kubeconfig")

    async def service_account_kubeconfig(self, *, namespace: str, name: str, path: Path) -> Path:
        assert self.server is not None
        return await self.server.service_account_kubeconfig(namespace=namespace, name=name, path=path)

    async def close(self) -> None:
        await self.api.close()  # the server goes with the test, and its namespaces with it


class Real(Backend):
    def __init__(self, directory: Path, cluster: realkube.Cluster, api: aclient.ApiClient) -> None:
        super().__init__(directory)
        self.cluster = cluster
        self.url = cluster.url
        self.api = api
        self.admin_kubeconfig = cluster.kubeconfig
        user = yaml.safe_load(cluster.kubeconfig.read_text())["users"][0]["user"]
        self._cert, self._key = directory / "admin.crt", directory / "admin.key"
        self._cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
        self._key.write_bytes(base64.b64decode(user["client-key-data"]))
        self._key.chmod(0o600)

    @classmethod
    async def connect(cls, directory: Path, cluster: realkube.Cluster) -> Real:
        api = await aconfig.new_client_from_config(config_file=str(cluster.kubeconfig), persist_config=False)
        return cls(directory, cluster, api)

    def ssl_context(self, *, admin: bool) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.cluster.pki.ca))
        if admin:  # a client certificate is the admin's, whatever token a request carries
            context.load_cert_chain(self._cert, self._key)
        return context

    async def service_account_kubeconfig(self, *, namespace: str, name: str, path: Path) -> Path:
        return await self.cluster.service_account_kubeconfig(namespace=namespace, name=name, path=path)


@contextlib.asynccontextmanager
async def emulator(directory: Path, **options: Any) -> AsyncIterator[Emulator]:
    """An emulator of its own (``options``: ``kubeapi.Server``'s), started and stopped with it."""
    server = kubeapi.Server(name="test", **options)
    await server.start(port=0)
    backend = Emulator(directory, server)
    try:
        yield backend
    finally:
        await backend.close()
        await server.stop()


@contextlib.asynccontextmanager
async def real(directory: Path, cluster: realkube.Cluster) -> AsyncIterator[Real]:
    """``cluster`` as a backend; what the test made in its namespaces is deleted after it."""
    backend = await Real.connect(directory, cluster)
    try:
        yield backend
    finally:
        await backend.close()
