"""common.files.serverconf: the server configuration text, single server and cluster node (tables).

Whether a real nats-server accepts it and forms a cluster is tests/cli/test_nats_cluster.py.
"""

from __future__ import annotations

import pytest

from common.files import serverconf

ROUTES = ("nats://127.0.0.1:6001", "nats://127.0.0.1:6002", "nats://127.0.0.1:6003")
NODE = serverconf.Cluster(name="kb", listen="127.0.0.1:6001", routes=ROUTES)
TLS = {"tls_cert": "/t/server.crt", "tls_key": "/t/server.key", "tls_ca": "/t/ca.crt"}


def _main(**kwargs: object) -> str:
    base: dict[str, object] = {"host": "127.0.0.1", "port": 4222, "store_dir": "/s", "server_name": "n0"}
    return serverconf.main(**{**base, **kwargs})  # type: ignore[arg-type]


def _block(text: str, name: str, *, indent: str = "") -> str:
    """The body of the block ``name {`` opened at ``indent`` (up to its closing brace)."""
    start = text.index(f"{indent}{name} {{\n") + len(indent) + len(name) + 3
    return text[start : text.index(f"\n{indent}}}", start)]


@pytest.mark.parametrize(
    ("case", "kwargs", "present", "absent"),
    [
        (
            "single server: no cluster block",
            {},
            ['server_name: "n0"', 'listen: "127.0.0.1:4222"', 'store_dir: "/s"', 'include "auth.conf"'],
            ["cluster {", "routes"],
        ),
        (
            "cluster node without TLS: name, listen, every route, plaintext routes",
            {"cluster_of": NODE},
            ['name: "kb"', 'listen: "127.0.0.1:6001"', *(f'"{r}"' for r in ROUTES)],
            ["ca_file", "verify"],
        ),
        (
            "cluster node with TLS: the routes are mutual TLS with the CA",
            {"cluster_of": NODE, **TLS},
            ['ca_file: "/t/ca.crt"', "verify: true", 'cert_file: "/t/server.crt"', "timeout: 5"],
            [],
        ),
    ],
)
def test_main_renders(case: str, kwargs: dict[str, object], present: list[str], absent: list[str]) -> None:
    text = _main(**kwargs)
    scope = _block(text, "cluster") if "cluster_of" in kwargs else text
    for wanted in present:
        assert wanted in scope, f"{case}: {wanted!r} missing from\n{scope}"
    for unwanted in absent:
        assert unwanted not in scope, f"{case}: {unwanted!r} in\n{scope}"


def test_cluster_routes_and_tls_are_inside_the_cluster_block() -> None:
    text = _main(cluster_of=NODE, **TLS)
    body = _block(text, "cluster")
    assert _block(body, "tls", indent="  ").count("cert_file") == 1
    # The clients' tls block stays the top-level one, without a CA (clients are not verified).
    assert "ca_file" not in _block(text, "tls")
    assert text.index("cluster {") > text.index("jetstream {") and text.rstrip().endswith(
        'include "auth.conf"'
    )


@pytest.mark.parametrize(
    ("case", "kwargs", "message"),
    [
        ("route TLS without a CA", {"tls_cert": "/c", "tls_key": "/k"}, "route TLS needs the CA"),
    ],
)
def test_main_refuses(case: str, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _main(cluster_of=NODE, **kwargs)


@pytest.mark.parametrize(
    ("case", "name", "listen", "routes", "message"),
    [
        ("name with a space", "k b", "127.0.0.1:6001", ROUTES, "--cluster-name"),
        ("name with a dot", "k.b", "127.0.0.1:6001", ROUTES, "--cluster-name"),
        ("empty name", "", "127.0.0.1:6001", ROUTES, "--cluster-name"),
        ("listen without port", "kb", "127.0.0.1", ROUTES, "--cluster-listen"),
        ("listen port out of range", "kb", "127.0.0.1:70000", ROUTES, "--cluster-listen"),
        ("no routes", "kb", "127.0.0.1:6001", (), "--routes"),
        ("route without scheme", "kb", "127.0.0.1:6001", ("127.0.0.1:6002",), "--routes"),
        ("route with client scheme", "kb", "127.0.0.1:6001", ("tls://127.0.0.1:6002",), "--routes"),
        ("route without port", "kb", "127.0.0.1:6001", ("nats://127.0.0.1",), "--routes"),
        ("route with a path", "kb", "127.0.0.1:6001", ("nats://h:6002/x",), "--routes"),
    ],
)
def test_cluster_refuses(case: str, name: str, listen: str, routes: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        serverconf.Cluster(name=name, listen=listen, routes=routes)


@pytest.mark.parametrize("route", ["nats://127.0.0.1:6002", "nats-route://nats-1.example:6222"])
def test_cluster_accepts_route_urls(route: str) -> None:
    assert serverconf.Cluster(name="kb_1", listen="0.0.0.0:6222", routes=(route,)).routes == (route,)
