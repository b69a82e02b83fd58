"""A site's network namespace on this machine: reachable at its address and its Services', with
host names of its own, removed with everything it made; one left by a dead process goes too."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from sandbox.sitenet import Namespace, NetnsError

pytestmark = [
    pytest.mark.skipif(shutil.which("ip") is None, reason="ip (iproute2) is not installed"),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces are made as root"),
]

SERVE = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen()
print(open("/etc/hosts").read(), flush=True)
c, _ = s.accept(); c.sendall(b"hello from " + sys.argv[1].encode()); c.close()
"""


@pytest.fixture
def netns() -> Iterator[Namespace]:
    made = Namespace.create(7)
    yield made
    made.delete()


def _names() -> list[str]:
    return [
        line.split()[0]
        for line in subprocess.run(
            ["ip", "netns", "list"], capture_output=True, text=True
        ).stdout.splitlines()
        if line
    ]


def _hello(address: str, port: int) -> bytes:
    deadline = time.monotonic() + 10
    while True:
        try:
            with socket.create_connection((address, port), timeout=2) as s:
                return s.recv(100)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.mark.parametrize("where", ["address", "service"])
def test_a_server_in_the_namespace_is_reached_from_this_machine(netns: Namespace, where: str) -> None:
    address = netns.address if where == "address" else str(netns.services.network_address + 10)
    if where == "service":
        netns.add_address(address)
    netns.write_hosts({"demo.tenants.svc": address})
    server = subprocess.Popen(
        [*netns.exec_prefix(), sys.executable, "-c", SERVE, address, "6443"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert _hello(address, 6443) == f"hello from {address}".encode()
        hosts = server.communicate(timeout=10)[0]
        assert f"{address} demo.tenants.svc" in hosts, "the namespace's own /etc/hosts"
    finally:
        server.kill()
        server.wait()
    with open("/etc/hosts") as f:
        assert "demo.tenants.svc" not in f.read(), "this machine's /etc/hosts is untouched"


def test_an_address_outside_its_services_is_refused_by_name(netns: Namespace) -> None:
    with pytest.raises(NetnsError, match=f"{netns.name}.*Service network"):
        netns.add_address("192.0.2.77")


def test_two_namespaces_take_blocks_apart(netns: Namespace) -> None:
    other = Namespace.create(8)
    try:
        assert not other.plan.block.overlaps(netns.plan.block)
        assert other.name != netns.name
    finally:
        other.delete()


def test_delete_removes_the_namespace_its_link_and_route() -> None:
    made = Namespace.create(9)
    services = str(made.services)
    made.delete()
    assert made.name not in _names()
    routes = subprocess.run(["ip", "route"], capture_output=True, text=True).stdout
    assert services not in routes and made.host_if not in routes
    assert not made.hosts_file.parent.exists()


def test_a_namespace_left_by_a_dead_process_is_removed_by_the_next_create() -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    name = f"kb-{dead.pid:x}x0"
    subprocess.run(["ip", "netns", "add", name], check=True)
    assert name in _names()
    made = Namespace.create(10)
    try:
        assert name not in _names()
        assert made.name == f"kb-{os.getpid():x}x{10:x}" and made.name in _names(), (
            "this process's own is kept"
        )
    finally:
        made.delete()
