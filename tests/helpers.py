"""Builders of sample messages and small utilities shared by the test suites."""

from __future__ import annotations

import asyncio
import atexit
import datetime as dt
import functools
import inspect
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, overload

import aiohttp
import yaml

from common import bus
from common.files import tls
from protocol import messages, natsjwt, streams, subjects
from sandbox.realkube import binaries as kube_binaries

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[1]
"""The repository's root."""
PACKAGES: tuple[str, ...] = tuple(
    tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["packages"]
)
"""The product's packages, as pyproject.toml lists them for the type checker."""
KAMAJI_CRD = ROOT.parent / "shared" / "fixtures" / "kamaji-tenantcontrolplane-crd.yaml"
"""Kamaji's real TenantControlPlane CRD, from ../shared beside the repository (CI has it)."""


@functools.cache
def kubectl() -> str:
    """The kubectl of the pinned Kubernetes release (``make kube-binaries``); where it was not
    built, the one on PATH; "" when there is neither."""
    try:
        return str(kube_binaries.find().kubectl)
    except kube_binaries.MissingBinaries:
        return shutil.which("kubectl") or ""


def kamaji_crd_path() -> Path:
    """``KAMAJI_CRD``, failing (not skipping) with the path when ../shared is missing."""
    if not KAMAJI_CRD.is_file():
        raise AssertionError(f"Kamaji's real TenantControlPlane CRD is missing: {KAMAJI_CRD} (../shared)")
    return KAMAJI_CRD


def kamaji_crd() -> dict[str, Any]:
    """Kamaji's real TenantControlPlane CRD, parsed."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd: dict[str, Any] = yaml.load(kamaji_crd_path().read_text(), Loader=loader)
    return crd


T0 = dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=dt.UTC)


@functools.cache
def nats_tls() -> tls.Paths:
    """The test session's CA and server certificate (SANs 127.0.0.1, localhost), made once by
    ``kamaji-broker nats-config``'s own code: every nats-server of the tests serves it, and
    ``options`` trusts its CA for ``tls://`` URLs."""
    directory = Path(tempfile.mkdtemp(prefix="kb-test-tls-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return tls.generate(directory)


def tls_context(url: str) -> ssl.SSLContext | None:
    """For raw nats-py clients (attackers in tests/security): ``nats.connect(url, tls=...)``
    trusting the CA ``ca_for(url)``; None for a plaintext URL."""
    ca = ca_for(url)
    return ssl.create_default_context(cafile=str(ca)) if ca is not None else None


def tls_options(url: str) -> dict[str, Any]:
    """``nats.connect`` options of a raw client for ``url``: TLS from the first byte, as
    kamaji-broker's own clients do (the server sends INFO to a client that waits for it only
    after its TLS-first wait, ``natsconfig.TLS_FIRST_FALLBACK``, which a default connect
    timeout would race)."""
    context = tls_context(url)
    return {} if context is None else {"tls": context, "tls_handshake_first": True}


_TRUSTED: dict[str, Path] = {}


def trust(url: str, ca_file: Path) -> None:
    """Verify the server at ``url`` with ``ca_file`` from now on (a server with a CA of its own,
    such as the sandbox system's, made by ``nats-config --tls-generate``)."""
    _TRUSTED[url] = ca_file


def untrust(url: str) -> None:
    """Forget ``trust(url, ...)``: the server is stopped and its port may be handed to another
    server, with another CA, by the next test."""
    _TRUSTED.pop(url, None)


def ca_for(url: str) -> Path | None:
    """The CA a test client verifies ``url`` with: the one ``trust`` registered, else the test CA
    for ``tls://``, none otherwise."""
    if url in _TRUSTED:
        return _TRUSTED[url]
    return nats_tls().ca if url.startswith("tls://") else None


def options(
    url: str, *, seed_file: Path | None = None, inbox_prefix: str = "_INBOX", ca_file: Path | None = None
) -> bus.Options:
    """``seed_file`` is an NKey seed, or a ``.creds`` file (operator mode) by its suffix."""
    creds = seed_file is not None and seed_file.suffix == ".creds"
    return bus.Options(
        servers=(url,),
        seed_file=None if creds else seed_file,
        creds_file=seed_file if creds else None,
        inbox_prefix=inbox_prefix,
        request_timeout=2.0,
        reconnect_wait=0.2,
        ca_file=ca_file if ca_file is not None else ca_for(url),
    )


def identity_file(conf: Path, name: str) -> Path:
    """The credential a configuration directory holds for ``name`` (``hub``, ``sites/site-a``):
    its ``.creds`` in operator mode (``tests.conftest.operator_nats``), its NKey seed otherwise."""
    creds = conf / f"{name}.creds"
    return creds if creds.exists() else conf / f"{name}.nk"


def identity_flag(path: Path, *, prefix: str = "--nats") -> list[str]:
    """The process flag for a credential file: ``--nats-creds`` for a ``.creds``, else
    ``--nats-seed``."""
    return [f"{prefix}-{'creds' if path.suffix == '.creds' else 'seed'}", str(path)]


def seed_of(path: Path) -> str:
    """The NKey seed of a credential file: a ``.creds`` file's seed, or the seed file itself."""
    lines = [line.strip() for line in path.read_text().splitlines()]
    if path.suffix == ".creds":
        return lines[lines.index("-----BEGIN USER NKEY SEED-----") + 1]
    return lines[0]


def credential_option(path: Path) -> dict[str, str]:
    """``nats.connect``'s argument for a credential file (``.creds`` or an NKey seed)."""
    return {"user_credentials": str(path)} if path.suffix == ".creds" else {"nkeys_seed": str(path)}


def creds_jwt(path: Path) -> str:
    """The user JWT of a ``.creds`` file."""
    return natsjwt.jwt_of_creds(path.read_text())


def stream(kind: subjects.Kind, prefix: str, *, site: str = "site-a") -> str:
    """The stream holding ``kind``'s subjects: KB_INTENTS, or ``site``'s own stream."""
    return streams.stream_name(kind, site=site, prefix=prefix)


def intent(
    *, site: str = "site-a", namespace: str = "tenants", name: str = "cp1", generation: int = 1, **kw: Any
) -> messages.Intent:
    return messages.Intent(
        op=kw.pop("op", "provision"),
        site=site,
        namespace=namespace,
        name=name,
        owner=messages.Owner(uid="8d1c-uid", namespace="default", name=name, cluster=name),
        generation=generation,
        issued_at=T0,
        spec=kw.pop(
            "spec", {"kubernetes": {"version": "v1.31.0"}, "controlPlane": {"deployment": {"replicas": 2}}}
        ),
        **kw,
    )


def status(
    *, site: str = "site-a", namespace: str = "tenants", name: str = "cp1", **kw: Any
) -> messages.Status:
    return messages.Status(
        site=site,
        namespace=namespace,
        name=name,
        owner_uid="8d1c-uid",
        observed_generation=1,
        intent_seq=7,
        phase=kw.pop("phase", "Ready"),
        version="v1.31.0",
        endpoint=messages.Endpoint(host="10.0.0.1", port=6443),
        replicas=2,
        ready_replicas=2,
        observed_at=T0,
        **kw,
    )


def sealed(*, site: str = "site-a", namespace: str = "tenants", name: str = "cp1") -> messages.SealedSecrets:
    return messages.SealedSecrets(
        site=site,
        namespace=namespace,
        name=name,
        owner_uid="8d1c-uid",
        recipient_key_id="0011223344556677",
        ciphertext=b"\x00\x01sealed",
        checksum="ab" * 32,
        observed_at=T0,
    )


def heartbeat(*, site: str = "site-a") -> messages.Heartbeat:
    return messages.Heartbeat(site=site, agent_version="0.1.0", started_at=T0, sent_at=T0, managed=3, ready=2)


@overload
async def eventually(
    probe: Callable[[], Awaitable[T]],
    done: Callable[[T], bool] | None = None,
    *,
    within: float = 10.0,
    every: float = 0.05,
    what: str = "condition",
) -> T: ...


@overload
async def eventually(
    probe: Callable[[], T],
    done: Callable[[T], bool] | None = None,
    *,
    within: float = 10.0,
    every: float = 0.05,
    what: str = "condition",
) -> T: ...


async def eventually(
    probe: Callable[[], Any],
    done: Callable[[Any], bool] | None = None,
    *,
    within: float = 10.0,
    every: float = 0.05,
    what: str = "condition",
) -> Any:
    """Poll ``probe`` (plain or async) until ``done`` holds for its value (by default: the value is
    truthy) and return that value; fail naming ``what`` and the last value seen when it never does.

    The one way tests wait: on a condition, never on a fixed sleep.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = probe()
        if inspect.isawaitable(value):
            value = await value
        if done(value) if done is not None else value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"{what} not met within {within}s; last seen: {value!r}")
        await asyncio.sleep(every)


class CliProcess:
    """``kamaji-broker <command> ...`` as a child process with its health port on 127.0.0.1."""

    def __init__(
        self, command: str, args: list[str], *, log: Path, env: dict[str, str] | None = None
    ) -> None:
        self.log = log
        self._port = 0
        prefix = "KB_HUB_" if command == "hub" else "KB_AGENT_"
        # Port 0: the process picks a free port and logs it (a port chosen here could be taken
        # by another process before the child binds it).
        full_env = {**os.environ, f"{prefix}LISTEN": "127.0.0.1:0"}
        # A process pointed at a test server (tls://) trusts the test CA unless told otherwise
        # (a --nats-ca-file flag wins over the variable).
        for url in (a for a in args if a.startswith("tls://")):
            full_env[f"{prefix}NATS_CA_FILE"] = str(ca_for(url))
        full_env.update(env or {})
        with open(log, "wb") as out:
            self.p = subprocess.Popen(
                [sys.executable, "-m", "kamaji_broker.cli", command, *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=full_env,
            )

    @property
    def port(self) -> int:
        """The health port, from the process's start-up log line; 0 until it has started."""
        if not self._port:
            found = re.search(r"health on port (\d+)", self.log.read_text(errors="replace"))
            self._port = int(found.group(1)) if found else 0
        return self._port

    async def get(self, path: str) -> tuple[int, str]:
        if not self.port:
            raise aiohttp.ClientConnectionError("not serving yet")
        async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{self.port}{path}") as r:
            return r.status, await r.text()

    async def readyz(self, want: Callable[[int, str], bool]) -> str:
        """Poll /readyz until ``want(status, text)``; returns the text."""
        seen: list[str] = []

        async def check() -> bool:
            try:
                status, text = await self.get("/readyz")
            except aiohttp.ClientError:
                return False
            seen[:] = [text]
            return want(status, text)

        await eventually(check, within=20, every=0.2)
        return seen[0]

    def stop(self, sig: int | None = None) -> int:
        """Signal (SIGTERM by default) and wait; SIGKILL after 15 s. Returns the exit code.

        Blocking: call it through ``asyncio.to_thread`` when the process talks to something
        served by this test's event loop (an in-process emulator).
        """

        if self.p.poll() is None:
            self.p.send_signal(sig if sig is not None else signal.SIGTERM)
            try:
                return self.p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
                return -9
        return int(self.p.returncode)
