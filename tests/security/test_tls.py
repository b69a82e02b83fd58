"""Attacks on the transport: NATS traffic must be TLS, verified against the
operator's CA, with no way back to plaintext.

Each case asserts the exact refusal (the server hangs up on plaintext without a word; the client
names the CA file and the verification failure), that the server is still alive and serves a
client with the right CA, and, for hub and agent, that the process keeps running and says why in
/readyz. On the old code every one of them fails: servers spoke
plaintext, clients had no CA setting, and nats-config wrote no TLS.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from common import bus
from common.bus import errors
from common.files import keys, natsserver, serverconf
from common.files import tls as tlsfiles
from sandbox import kubeapi, natsd, ports
from tests import helpers
from tests.security import tls_support as ts

CLI = [sys.executable, "-m", "kamaji_broker.cli"]


async def _still_serves(server: natsd.NatsServer, ca: Path | None, seed: Path | None = None) -> None:
    """The server survived the attempt: a client with the right CA connects and round-trips."""
    assert server.process is not None and server.process.poll() is None
    conn = await bus.connect(helpers.options(server.url, ca_file=ca, seed_file=seed), deadline=10)
    try:
        await conn.sync()
        assert conn.connected
    finally:
        await conn.close()


# -- the server refuses plaintext -------------------------------------------------------------


@pytest.fixture(params=["open server", "nats-config server"])
def tls_server(
    request: pytest.FixtureRequest,
    nats_server: natsd.NatsServer,
    secured_nats: tuple[natsd.NatsServer, Path],
) -> tuple[natsd.NatsServer, Path | None]:
    """(server, the hub's seed when it authenticates)."""
    if request.param == "open server":
        return nats_server, None
    return secured_nats[0], helpers.identity_file(secured_nats[1], "hub")


@pytest.mark.parametrize(
    "connect",
    [
        pytest.param({"verbose": False, "pedantic": False}, id="anonymous"),
        pytest.param({"verbose": True, "pedantic": False, "user": "hub", "pass": "x"}, id="with-credentials"),
    ],
)
async def test_plaintext_client_is_refused(
    tls_server: tuple[natsd.NatsServer, Path | None], connect: dict[str, object]
) -> None:
    server, seed = tls_server
    attempt = ts.plaintext_client(server.port, connect=connect)
    assert attempt.info["tls_required"] is True
    # Not one protocol answer in the clear: no PONG, no +OK, no -ERR (which would show a
    # plaintext session was parsed); the server read the CONNECT as a failed TLS handshake and
    # hung up.
    assert attempt.answer == b""
    await _still_serves(server, helpers.ca_for(server.url), seed)


# -- the client refuses a server it cannot verify ---------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tlsfiles.Paths]:
    d = tmp_path_factory.mktemp("certs")
    past = dt.datetime.now(dt.UTC) - dt.timedelta(days=60)
    return {
        "other names": ts.server_files(d / "names", hosts=("nats.example.com",), defaults=()),
        "expired": ts.server_files(d / "expired", now=past, days=30),
    }


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another CA with exactly our CA's subject name: only the signature tells them apart."""
    return ts.write_ca(tmp_path_factory.mktemp("other-ca"))[2]


@pytest.fixture
def server_for(tmp_path: Path, certs: dict[str, tlsfiles.Paths]) -> Iterator[dict[str, natsd.NatsServer]]:
    started: dict[str, natsd.NatsServer] = {}
    yield started
    for server in started.values():
        server.stop()


def _start(
    started: dict[str, natsd.NatsServer], name: str, tls: tlsfiles.Paths | None, d: Path
) -> natsd.NatsServer:
    server = natsd.NatsServer(store_dir=d / name.replace(" ", "-"), log_file=d / f"{name}.log", tls=tls)
    server.start()
    started[name] = server
    return server


NO_ISSUER = "unable to get local issuer certificate"
CLIENT_CASES = [
    # (id, server's certificate, host in the URL, the CA the client trusts, the verification failure)
    ("another CA of the same name", "test", "127.0.0.1", "other", NO_ISSUER),
    ("the system's CAs", "test", "127.0.0.1", "none", NO_ISSUER),
    ("the server's certificate as CA", "test", "127.0.0.1", "server-cert", NO_ISSUER),
    ("IP not in the certificate", "other names", "127.0.0.1", "own",
     "IP address mismatch, certificate is not valid for '127.0.0.1'"),
    ("name not in the certificate", "other names", "localhost", "own",
     "Hostname mismatch, certificate is not valid for 'localhost'"),
    ("expired certificate", "expired", "127.0.0.1", "own", "certificate has expired"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("server_kind", "host", "trust", "expected"),
    [c[1:] for c in CLIENT_CASES],
    ids=[c[0] for c in CLIENT_CASES],
)
async def test_client_refuses_a_server_it_cannot_verify(
    server_kind: str,
    host: str,
    trust: str,
    expected: str,
    nats_server: natsd.NatsServer,
    certs: dict[str, tlsfiles.Paths],
    other_ca: Path,
    server_for: dict[str, natsd.NatsServer],
    tmp_path: Path,
) -> None:
    if server_kind == "test":
        server, own = nats_server, helpers.nats_tls()
    else:
        own = certs[server_kind]
        server = _start(server_for, server_kind, own, tmp_path)
    ca = {"other": other_ca, "none": None, "server-cert": own.cert, "own": own.ca}[trust]
    url = f"tls://{host}:{server.port}"
    options = bus.Options(servers=(url,), ca_file=ca, request_timeout=2.0, reconnect_wait=0.2)
    with pytest.raises(errors.Unavailable) as refused:
        await bus.connect(options, deadline=2)
    message = str(refused.value)
    trusted = f"CA file {str(ca)!r}" if ca is not None else "the system's CAs (no --nats-ca-file given)"
    assert f"cannot connect to NATS at {url}: no connection within 2s; last attempt: " in message
    assert f"TLS: the NATS server's certificate failed verification against {trusted}: {expected}" in message
    assert server.process is not None and server.process.poll() is None
    if server_kind == "test":
        await _still_serves(server, own.ca)


async def test_client_with_a_ca_refuses_a_plaintext_server(tmp_path: Path) -> None:
    """No downgrade: a server (or a man in the middle) that does not speak TLS gets no CONNECT."""
    plain = natsd.NatsServer(store_dir=tmp_path / "plain", log_file=tmp_path / "plain.log", monitor=True)
    with ts.running(plain):
        for url in (f"tls://127.0.0.1:{plain.port}", f"nats://127.0.0.1:{plain.port}"):
            options = bus.Options(servers=(url,), ca_file=helpers.nats_tls().ca, reconnect_wait=0.2)
            with pytest.raises(errors.Unavailable) as refused:
                await bus.connect(options, deadline=2)
            assert "TLS handshake with the NATS server failed" in str(refused.value), url
            assert "handshake_first" in str(refused.value)
        assert ts.connz(plain) == []  # no client ever got as far as a connection
        assert plain.process is not None and plain.process.poll() is None


# -- hub and agent: refused, running, and saying why in /readyz --------------------------------


@pytest.fixture
def process_files(tmp_path: Path, cluster: kubeapi.Server) -> dict[str, Path]:
    keys.generate(tmp_path / "keys")
    return {"keys": tmp_path / "keys", "kubeconfig": cluster.write_kubeconfig(tmp_path / "kubeconfig")}


def _process(
    kind: str, url: str, seed: Path, ca: Path | None, files: dict[str, Path], log: Path
) -> helpers.CliProcess:
    assert ca is not None
    common = ["--nats-url", url, *helpers.identity_flag(seed), "--nats-ca-file", str(ca)]
    common += ["--kubeconfig", str(files["kubeconfig"])]
    if kind == "hub":
        args = [
            *common, "--signing-key", str(files["keys"] / keys.SIGNING_FILE),
            "--sealing-keys", str(files["keys"] / keys.SEALING_DIR), "--all-namespaces",
        ]  # fmt: skip
    else:
        args = [
            *common, "--site", "site-a", "--hub-public-keys", str(files["keys"] / keys.PUBLIC_FILE),
            "--namespaces", "tenants",
        ]  # fmt: skip
    return helpers.CliProcess(kind, args, log=log)


@pytest.mark.parametrize("kind", ["hub", "agent"])
@pytest.mark.parametrize("server_kind", ["wrong CA", "plaintext server"])
async def test_process_with_an_unverifiable_server_says_why_and_keeps_running(
    kind: str,
    server_kind: str,
    secured_nats: tuple[natsd.NatsServer, Path],
    other_ca: Path,
    process_files: dict[str, Path],
    tmp_path: Path,
) -> None:
    server, conf = secured_nats
    seed = helpers.identity_file(conf, "hub" if kind == "hub" else "sites/site-a")
    plain = natsd.NatsServer(store_dir=tmp_path / "plain", log_file=tmp_path / "plain.log", monitor=True)
    ca: Path | None
    if server_kind == "wrong CA":
        url, ca = server.url, other_ca
        expected = (
            f"nats: cannot connect to NATS at {url}: TLS: the NATS server's certificate failed "
            f"verification against CA file {str(ca)!r}: {NO_ISSUER}"
        )
    else:
        plain.start()
        url, ca = f"tls://127.0.0.1:{plain.port}", helpers.nats_tls().ca
        expected = f"nats: cannot connect to NATS at {url}: TLS handshake with the NATS server failed"
    proc = _process(kind, url, seed, ca, process_files, tmp_path / f"{kind}.log")
    try:
        text = await proc.readyz(lambda status, text: status == 503 and expected in text)
        assert "[-] nats: " in text and text.rstrip().endswith("not ready")
        assert proc.p.poll() is None, "the process keeps running (and retrying)"
        log = proc.log.read_text()
        assert expected.removeprefix("nats: ") in log
        if server_kind == "plaintext server":
            assert ts.connz(plain) == []
    finally:
        plain.stop()
        assert proc.stop() == 0  # a clean shutdown even though it never connected


# -- the certificates nats-config makes --------------------------------------------------------


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("generated")
    done = subprocess.run(
        [*CLI, "nats-config", "--dir", str(d / "nats"), "--tls-generate", str(d / "nats" / "tls"),
         "--tls-host", "nats.example.com", "--tls-host", "10.1.2.3"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"--nats-ca-file {d / 'nats' / 'tls' / 'ca.crt'}" in done.stderr
    return d / "nats"


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_generated_ca_is_a_ca(generated: Path) -> None:
    ca = _cert(generated / "tls" / "ca.crt")
    basic = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert basic.critical and basic.value.ca is True and basic.value.path_length == 0
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign and usage.crl_sign and not usage.digital_signature
    ca.verify_directly_issued_by(ca)  # self-signed; raises otherwise


def test_generated_server_certificate_names_the_hosts_and_is_signed_by_the_ca(generated: Path) -> None:
    ca, server = _cert(generated / "tls" / "ca.crt"), _cert(generated / "tls" / "server.crt")
    server.verify_directly_issued_by(ca)
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "10.1.2.3"}
    assert set(sans.get_values_for_type(x509.DNSName)) == {"localhost", "nats.example.com"}
    assert server.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    eku = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku
    assert server.not_valid_after_utc <= ca.not_valid_after_utc


@pytest.mark.parametrize("name", ["ca.key", "server.key"])
def test_generated_private_keys_are_0600(generated: Path, name: str) -> None:
    assert stat.S_IMODE(os.stat(generated / "tls" / name).st_mode) == 0o600


def test_generated_config_requires_tls_and_is_valid(generated: Path) -> None:
    text = (generated / "nats-server.conf").read_text()
    assert f'cert_file: "{generated / "tls" / "server.crt"}"' in text
    assert f'key_file: "{generated / "tls" / "server.key"}"' in text
    assert f"handshake_first: {json.dumps(serverconf.TLS_FIRST_FALLBACK)}" in text
    done = subprocess.run(
        [natsd.find_binary(), "-t", "-c", str(generated / "nats-server.conf")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_generation_keeps_the_ca_and_reissues_only_for_new_hosts(tmp_path: Path) -> None:
    first = tlsfiles.generate(tmp_path, hosts=["nats.example.com"])
    ca, cert = first.ca.read_bytes() if first.ca else b"", first.cert.read_bytes()
    again = tlsfiles.generate(tmp_path, hosts=["nats.example.com"])
    assert (again.ca.read_bytes() if again.ca else b"", again.cert.read_bytes()) == (ca, cert)
    more = tlsfiles.generate(tmp_path, hosts=["nats.example.com", "nats.other.example"])
    assert (more.ca.read_bytes() if more.ca else b"") == ca, "clients keep trusting the same CA"
    assert more.cert.read_bytes() != cert
    sans = _cert(more.cert).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "nats.other.example" in sans.get_values_for_type(x509.DNSName)


def _own_files(tmp_path: Path) -> dict[str, Path]:
    ours = ts.server_files(tmp_path / "ours")
    theirs = ts.server_files(tmp_path / "theirs")
    assert ours.ca is not None and theirs.ca is not None
    return {"cert": ours.cert, "key": ours.key, "ca": ours.ca, "other-key": theirs.key, "other-ca": theirs.ca}


BAD_TLS_FLAGS = [
    ("cert not signed by the CA", ["--tls-cert", "{cert}", "--tls-key", "{key}", "--tls-ca", "{other-ca}"],
     "--tls-cert '{cert}' is not signed by --tls-ca '{other-ca}'"),
    ("key of another certificate", ["--tls-cert", "{cert}", "--tls-key", "{other-key}"],
     "--tls-key '{other-key}' is not the key of --tls-cert '{cert}'"),
    ("cert without key", ["--tls-cert", "{cert}"], "give both --tls-cert and --tls-key"),
    ("generate and bring both", ["--tls-generate", "{dir}", "--tls-cert", "{cert}", "--tls-key", "{key}"],
     "give either --tls-generate or --tls-cert/--tls-key/--tls-ca, not both"),
    ("host that is no name", ["--tls-generate", "{dir}", "--tls-host", "nats/evil"],
     "--tls-host 'nats/evil' is neither an IP address nor a DNS name"),
    ("host without generate", ["--tls-host", "nats.example.com"],
     "--tls-host names hosts of a generated certificate"),
    ("certificate file that is a key", ["--tls-cert", "{key}", "--tls-key", "{key}"],
     "--tls-cert '{key}' is not a PEM certificate"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("flags", "expected"), [c[1:] for c in BAD_TLS_FLAGS], ids=[c[0] for c in BAD_TLS_FLAGS]
)
def test_nats_config_refuses_tls_files_that_cannot_work(
    tmp_path: Path, flags: list[str], expected: str
) -> None:
    values = {**{k: str(v) for k, v in _own_files(tmp_path).items()}, "dir": str(tmp_path / "gen")}
    args = [f.format(**values) for f in flags]
    out = tmp_path / "nats"
    done = subprocess.run([*CLI, "nats-config", "--dir", str(out), *args], capture_output=True, text=True)
    assert done.returncode == 2
    assert f"kamaji-broker nats-config: error: {expected.format(**values)}" in done.stderr
    assert not (out / natsserver.MAIN_FILE).exists(), "nothing written"
    assert "PRIVATE KEY" not in done.stderr, "a key's content is never echoed"


# -- what the server sees: every client connection is TLS ----------------------------------------


async def test_every_client_connection_is_tls(tmp_path: Path) -> None:
    tls = helpers.nats_tls()
    server = natsd.NatsServer(store_dir=tmp_path / "s", log_file=tmp_path / "s.log", tls=tls, monitor=True)
    with ts.running(server):
        conns = [await bus.connect(helpers.options(server.url), deadline=10) for _ in range(2)]
        try:
            await bus.ensure_topology(conns[0], sites=["site-a"], prefix="ttls")
            seen = ts.connz(server)
            assert len(seen) == 2
            assert all(c.get("tls_version", "").startswith("1.") for c in seen), seen
            assert all(c.get("tls_first") is True for c in seen), "TLS before the server's INFO"
        finally:
            for c in conns:
                await c.close()


async def test_an_impostor_in_the_servers_place_is_refused_on_reconnect(tmp_path: Path) -> None:
    """Connected, the server goes away and another one answers on its address with a certificate
    of another CA: the client does not reconnect to it, and says why while it keeps trying."""
    server = natsd.NatsServer(
        store_dir=tmp_path / "real", log_file=tmp_path / "real.log", tls=helpers.nats_tls()
    )
    with ts.running(server):
        conn = await bus.connect(helpers.options(server.url), deadline=10)
    try:
        impostor = natsd.NatsServer(
            store_dir=tmp_path / "impostor",
            port=server.port,
            log_file=tmp_path / "impostor.log",
            tls=ts.server_files(tmp_path / "impostor-tls"),
            monitor=True,
        )
        with ts.running(impostor):

            async def refused() -> bool:
                return f"against CA file {str(helpers.nats_tls().ca)!r}: {NO_ISSUER}" in conn.last_failure

            await helpers.eventually(refused)
            assert conn.last_failure.startswith(f"cannot connect to NATS at {server.url}: TLS: ")
            assert not conn.connected and ts.connz(impostor) == []
    finally:
        await conn.close()


async def test_agent_facing_an_impostor_after_a_restart_says_why_and_stops_cleanly(
    tmp_path: Path, process_files: dict[str, Path]
) -> None:
    """Connected and ready, the agent's server is replaced by one with a certificate of another
    CA: /readyz names the CA file and the failure while the agent keeps trying, and SIGTERM still
    stops it at once (nats-py's close would wait forever on the failed TLS transport)."""
    port = ports.free_port()
    conf = tmp_path / "conf"
    main, _ = natsserver.nats_config(
        conf, host="127.0.0.1", port=port, store_dir=tmp_path / "store", tls=helpers.nats_tls()
    )
    natsserver.site_add(conf, "site-a")
    real = natsd.NatsServer(store_dir=tmp_path / "store", port=port, config=main, tls=helpers.nats_tls())
    impostor = natsd.NatsServer(
        store_dir=tmp_path / "impostor",
        port=port,
        tls=ts.server_files(tmp_path / "impostor-tls"),
        monitor=True,
    )
    with ts.running(real):
        hub = await bus.connect(
            helpers.options(real.url, seed_file=helpers.identity_file(conf, "hub")), deadline=10
        )
        await bus.ensure_topology(hub, sites=["site-a"])
        await hub.close()
        agent = _process(
            "agent",
            real.url,
            helpers.identity_file(conf, "sites/site-a"),
            helpers.nats_tls().ca,
            process_files,
            tmp_path / "agent.log",
        )
        try:
            await agent.readyz(lambda status, text: "[+] nats: connected" in text)
        except BaseException:
            agent.stop()
            raise
    try:
        with ts.running(impostor):
            expected = (
                f"nats: cannot connect to NATS at {real.url}: TLS: the NATS server's certificate failed "
                f"verification against CA file {str(helpers.nats_tls().ca)!r}: {NO_ISSUER}"
            )
            text = await agent.readyz(lambda status, text: status == 503 and expected in text)
            assert "[-] nats: " in text
            assert agent.p.poll() is None and ts.connz(impostor) == []
    finally:
        assert agent.stop() == 0
