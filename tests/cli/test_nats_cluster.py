"""`kamaji-broker nats-config` for a JetStream cluster: three real nats-servers from the configs it
writes form a cluster over mutual-TLS routes, elect a meta leader and hold the hub's streams at 3
replicas; and the flags are refused with a clear error when they cannot make a cluster."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest

from common import bus
from common.bus import errors as bus_errors
from common.files import operator, tls
from hub.credentials import revocation
from kamaji_broker import cli
from protocol import credentials, natsjwt, streams
from sandbox import natsd, natsmonitor, ports
from tests import helpers

NODES = ("nats-0", "nats-1", "nats-2")


def _configure(directory: Path, *extra: str) -> list[natsd.NatsServer]:
    """One `nats-config` run per node, all in one directory (they share auth.conf, or the
    operator's keys, and TLS)."""
    client_ports = {name: ports.free_port() for name in NODES}
    route_ports = {name: ports.free_port() for name in NODES}
    routes = ",".join(f"nats://127.0.0.1:{port}" for port in route_ports.values())
    servers = []
    for name in NODES:
        monitor = ports.free_port()
        argv = [
            "nats-config", "--dir", str(directory), "--host", "127.0.0.1", "--port", str(client_ports[name]),
            "--config-file", f"{name}.conf", "--server-name", name,
            "--store-dir", str(directory / f"js-{name}"), "--monitor", f"127.0.0.1:{monitor}",
            "--tls-generate", str(directory / "tls"),
            "--cluster-name", "kb", "--cluster-listen", f"127.0.0.1:{route_ports[name]}", "--routes", routes,
            *extra,
        ]  # fmt: skip
        assert cli.main(argv) == 0
        servers.append(
            natsd.NatsServer(
                store_dir=directory / f"js-{name}",
                port=client_ports[name],
                config=directory / f"{name}.conf",
                log_file=directory / f"{name}.log",
                tls=tls.Paths(
                    cert=directory / "tls" / "server.crt",
                    key=directory / "tls" / "server.key",
                    ca=directory / "tls" / "ca.crt",
                ),
                monitor_port=monitor,
            )
        )
    return servers


@contextlib.contextmanager
def _running(directory: Path, auth: str) -> Iterator[list[natsd.NatsServer]]:
    servers = _configure(directory, "--auth", auth)
    try:
        for server in servers:
            server.start()
        yield servers
    finally:
        for server in servers:
            server.stop()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[list[natsd.NatsServer]]:
    with _running(tmp_path / "nats", "static") as servers:
        yield servers


async def test_three_nodes_form_a_cluster_and_hold_r3_streams(cluster: list[natsd.NatsServer]) -> None:
    monitors = [s.monitor_url for s in cluster]
    leader: list[str] = []

    async def meta_leader() -> bool:
        leader[:] = [await natsmonitor.meta_leader_of(monitors, nodes=3)]
        return bool(leader[0])

    await helpers.eventually(meta_leader, within=30, every=0.2)
    # Every node requires mutual TLS on its routes (tests/common/files/test_serverconf.py): the cluster
    # formed over them.
    assert leader[0] in NODES
    # Every peer current before the streams are made: an election or a node still catching up
    # would leave the creation unanswered on a loaded machine.
    await helpers.eventually(lambda: natsmonitor.settled_of(monitors, nodes=3), within=60, every=0.2)

    # The hub's user (from the shared auth.conf) creates the streams at 3 replicas, each with a leader.
    directory = cluster[0].store_dir.parent
    options = bus.Options(
        servers=tuple(s.url for s in cluster),
        seed_file=directory / "hub.nk",
        ca_file=directory / "tls" / "ca.crt",
        request_timeout=15.0,
        reconnect_wait=0.2,
    )
    conn = await bus.connect(options, deadline=10)
    try:
        await bus.ensure_topology(conn, sites=["site-a"], replicas=3)
    finally:
        await conn.close()
    for stream in (streams.intents_stream_name(), streams.site_stream_name("site-a")):

        async def stream_led(stream: str = stream) -> bool:
            return await natsmonitor.stream_leader_of(monitors, stream) in NODES

        await helpers.eventually(stream_led, within=30, every=0.2)


@pytest.fixture
def operator_cluster(tmp_path: Path) -> Iterator[list[natsd.NatsServer]]:
    with _running(tmp_path / "nats", "operator") as servers:
        yield servers


async def _meta_leader(servers: list[natsd.NatsServer]) -> None:
    monitors = [s.monitor_url for s in servers]

    async def elected() -> bool:
        return bool(await natsmonitor.meta_leader_of(monitors, nodes=3))

    await helpers.eventually(elected, within=30, every=0.2)


def _site_creds(directory: Path, site: str) -> Path:
    keys = operator.Keys.load_or_create(directory)
    seed = natsjwt.new_seed("user")
    claims = credentials.site_user(
        site, natsjwt.public_of(seed), account=keys.account_public, now=dt.datetime.now(dt.UTC)
    )
    path = directory / f"{site}.creds"
    path.write_text(keys.user_creds(claims, seed))
    return path


async def test_a_revocation_reaches_every_node_and_survives_a_full_outage(
    operator_cluster: list[natsd.NatsServer],
) -> None:
    """Operator mode in a cluster: the hub pushes the revocation to one node, every node throws
    the site out, and after all three stopped and started again (the resolver's directories
    intact) none lets it back in, while another site still connects."""
    await _meta_leader(operator_cluster)
    directory = operator_cluster[0].store_dir.parent
    ca = directory / "tls" / "ca.crt"
    site_a, site_b = _site_creds(directory, "site-a"), _site_creds(directory, "site-b")
    on_last = await bus.connect(
        bus.Options(servers=(operator_cluster[2].url,), creds_file=site_a, ca_file=ca), deadline=10
    )
    keys = operator.Keys.load_or_create(directory)
    authority = revocation.Authority(
        account=keys.account_public,
        account_signing=keys.account_signing,
        operator_signing=keys.operator_signing,
    )
    system = await bus.connect(
        bus.Options(
            servers=(operator_cluster[0].url,),
            creds_file=directory / operator.HUB_SYSTEM_CREDS,
            ca_file=ca,
        ),
        deadline=10,
    )
    now = dt.datetime.now(dt.UTC)
    await revocation.revoke(
        system, authority, {natsjwt.decode(helpers.creds_jwt(site_a)).sub: int(now.timestamp())}, now=now
    )
    await system.close()
    await helpers.eventually(
        lambda: not on_last.connected, within=10, what="site-a thrown out by the third node"
    )
    await on_last.close()
    for server in operator_cluster:
        server.stop()
    for server in operator_cluster:
        server.start()
    await _meta_leader(operator_cluster)
    for server in operator_cluster:
        with pytest.raises(bus_errors.Unavailable, match=r"(?i)authorization violation"):
            await bus.connect(bus.Options(servers=(server.url,), creds_file=site_a, ca_file=ca), deadline=2)
        ok = await bus.connect(bus.Options(servers=(server.url,), creds_file=site_b, ca_file=ca), deadline=10)
        await ok.close()


@pytest.mark.parametrize(
    ("case", "extra", "message"),
    [
        ("cluster name alone", ["--cluster-name", "kb", "--server-name", "n0"], "--cluster-listen, --routes"),
        (
            "no server name",
            [
                "--cluster-name",
                "kb",
                "--cluster-listen",
                "127.0.0.1:6222",
                "--routes",
                "nats://127.0.0.1:6222",
            ],
            "its own --server-name",
        ),
        (
            "a route that is no URL",
            [
                *("--server-name", "n0", "--cluster-name", "kb", "--cluster-listen", "127.0.0.1:6222"),
                *("--routes", "127.0.0.1:6223"),
            ],
            "is not a route URL",
        ),
        ("config file with a path", ["--config-file", "../x.conf"], "--config-file"),
        ("config file over auth.conf", ["--config-file", "auth.conf"], "--config-file"),
    ],
)
def test_cluster_flags_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, extra: list[str], message: str
) -> None:
    assert cli.main(["nats-config", "--dir", str(tmp_path / "nats"), *extra]) == 2, case
    assert message in capsys.readouterr().err, case


def test_route_tls_needs_the_ca_of_an_own_certificate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    made = tls.generate(tmp_path / "tls")
    argv = [
        "nats-config", "--dir", str(tmp_path / "nats"), "--server-name", "n0",
        "--tls-cert", str(made.cert), "--tls-key", str(made.key),
        "--cluster-name", "kb", "--cluster-listen", "127.0.0.1:6222", "--routes", "nats://127.0.0.1:6222",
    ]  # fmt: skip
    assert cli.main(argv) == 2
    assert "route TLS needs the CA" in capsys.readouterr().err
    assert cli.main([*argv, "--tls-ca", str(made.ca)]) == 0
    assert 'ca_file: "' in (tmp_path / "nats" / "nats-server.conf").read_text()
