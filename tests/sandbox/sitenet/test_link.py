"""A namespace's link shaped by linkshaper: delayed, one way, lossy or cut, its loopback never;
unshaped again when closed, and cut (never opened) if linkshaper dies."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest

from sandbox.realkube import binaries as kbin
from sandbox.sitenet import Namespace
from sandbox.sitenet.link import Link
from sandbox.sitenet.shape import CLEAR, DOWN, Counts, Shape

pytestmark = [
    pytest.mark.skipif(shutil.which("ip") is None, reason="ip (iproute2) is not installed"),
    pytest.mark.skipif(shutil.which("iptables") is None, reason="iptables is not installed"),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces are made as root"),
]

ECHO = """
import socket, sys
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("0.0.0.0", int(sys.argv[1])))
print("ready", flush=True)
heard = 0
while True:
    data, peer = u.recvfrom(100)
    if peer[0] == "127.0.0.1" and data == b"heard?":
        data = str(heard).encode()
    elif peer[0] != "127.0.0.1":
        heard += 1
    u.sendto(data, peer)
"""
"""Echoes every datagram; asked ``heard?`` over its loopback, says how many came from outside."""

ASK = """
import socket, sys
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(10)
u.sendto(sys.argv[2].encode(), ("127.0.0.1", int(sys.argv[1])))
print(u.recvfrom(100)[0].decode())
"""

PORT = 7907


@dataclass
class Site:
    netns: Namespace
    link: Link
    sock: socket.socket

    def send(self, count: int) -> None:
        for i in range(count):
            self.sock.sendto(str(i).encode(), (self.netns.address, PORT))

    async def replies(self, want: int) -> list[float]:
        """The arrival times of ``want`` replies; fails if they are not all back within 30 s."""
        loop = asyncio.get_running_loop()
        got: list[float] = []
        async with asyncio.timeout(30):
            while len(got) < want:
                await loop.sock_recv(self.sock, 100)
                got.append(loop.time())
        return got

    def pending(self) -> int:
        """Replies waiting in the socket now (without waiting for more)."""
        n = 0
        while True:
            try:
                self.sock.recv(100)
            except BlockingIOError:
                return n
            n += 1

    async def ask(self, word: str) -> str:
        """The echo's answer to ``word`` over the site's own loopback."""
        argv = [*self.netns.exec_prefix(), sys.executable, "-c", ASK, str(PORT), word]
        asked = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
        said, _ = await asked.communicate()
        return said.decode().strip()

    def queued(self, chain: str) -> int:
        """Packets the rule of ``chain`` (INPUT or OUTPUT) has sent to linkshaper's queue
        (0 when there is no such rule)."""
        listed = subprocess.run(
            [*self.netns.exec_prefix(), "iptables", "-L", chain, "-v", "-x", "-n"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return sum(int(line.split()[0]) for line in listed.splitlines() if "NFQUEUE" in line)

    async def until(self, done: Callable[[Counts, Counts], bool]) -> tuple[Counts, Counts]:
        async with asyncio.timeout(30):
            while True:
                out, into = await self.link.counts()
                if done(out, into):
                    return out, into
                await asyncio.sleep(0.02)


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    try:
        shaper = await asyncio.to_thread(kbin.linkshaper, build_missing=True)
    except kbin.MissingBinaries as exc:
        pytest.skip(str(exc))
    netns = Namespace.create(10)
    echo = subprocess.Popen(  # noqa: ASYNC220 (a server for the test, started once)
        [*netns.exec_prefix(), sys.executable, "-c", ECHO, str(PORT)], stdout=subprocess.PIPE, text=True
    )
    link: Link | None = None
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        assert echo.stdout is not None and echo.stdout.readline().strip() == "ready"
        link = await Link.attach(netns, shaper)
        sock.setblocking(False)
        yield Site(netns, link, sock)
    finally:
        sock.close()
        if link is not None:
            await link.close()
        echo.kill()
        echo.wait()
        if echo.stdout is not None:
            echo.stdout.close()
        netns.delete()


async def test_a_clear_link_passes_every_packet_through_linkshaper(site: Site) -> None:
    site.send(5)
    await site.replies(5)
    out, into = await site.link.counts()
    assert (out, into) == (Counts(passed=5), Counts(passed=5))


async def test_each_direction_is_delayed_by_its_own_delay(site: Site) -> None:
    await site.link.shape(out=Shape(delay=0.1), into=Shape(delay=0.05, jitter=0.01))
    loop = asyncio.get_running_loop()
    sent = loop.time()
    site.send(3)
    arrived = await site.replies(3)
    # Each reply waited 0.05 ± 0.01 s coming in and 0.1 s going out.
    assert min(arrived) - sent >= 0.14


@pytest.mark.parametrize("down", ["out", "into"])
async def test_a_one_way_partition_drops_one_direction_only(site: Site, down: str) -> None:
    await site.link.shape(**{down: DOWN})
    site.send(4)
    out, into = await site.until(lambda o, i: o.dropped + i.dropped == 4)
    if down == "into":
        assert (out, into) == (Counts(), Counts(dropped=4))  # nothing reached the site
    else:
        assert (out, into) == (Counts(dropped=4), Counts(passed=4))  # it heard, its answers were lost
    assert site.pending() == 0
    await site.link.shape(out=CLEAR, into=CLEAR)
    site.send(2)
    await site.replies(2)


async def test_a_lossy_link_loses_some_packets_and_passes_the_rest(site: Site) -> None:
    await site.link.shape(out=Shape(loss=0.5))
    site.send(200)
    out, _ = await site.until(lambda o, i: o.passed + o.dropped == 200)
    # Half lost at random: none or all of 200 would be a chance of 2 in 2**200.
    assert 0 < out.dropped < 200
    assert len(await site.replies(out.passed)) == out.passed


async def test_a_cut_link_leaves_the_sites_loopback_alone(site: Site) -> None:
    await site.link.shape(out=DOWN, into=DOWN)
    assert await site.ask("local") == "local"
    site.send(1)
    await site.until(lambda o, i: i.dropped == 1)
    assert await site.ask("heard?") == "0"


async def test_closing_the_link_leaves_it_unshaped(site: Site) -> None:
    await site.link.shape(out=DOWN, into=DOWN)
    await site.link.close()
    assert site.queued("INPUT") == site.queued("OUTPUT") == 0  # no rule left to count
    site.send(3)
    await site.replies(3)


async def test_a_linkshaper_that_dies_leaves_the_link_cut(site: Site) -> None:
    site.send(1)
    await site.replies(1)
    site.link._process.kill()
    await site.link._process.wait()
    before = site.queued("INPUT")
    site.send(3)
    # The rule has counted them once the kernel gave them their verdict: a queue without a
    # reader drops what it gets, so the echo never heard them.
    async with asyncio.timeout(30):
        while site.queued("INPUT") < before + 3:  # noqa: ASYNC110 (the kernel's counter, polled)
            await asyncio.sleep(0.02)
    assert await site.ask("heard?") == "1"
    assert site.pending() == 0
