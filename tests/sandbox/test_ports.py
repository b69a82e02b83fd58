"""Ports for the sandbox's and the tests' listeners: outside the ephemeral range, never twice."""

from __future__ import annotations

import fcntl
import socket
import time
from pathlib import Path

from sandbox import ports


def test_ports_are_below_the_ephemeral_range_and_bindable() -> None:
    text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
    low = int(text.split()[0])
    for _ in range(20):
        port = ports.free_port()
        assert port in ports.RANGE and port < low
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_port_is_not_handed_out_twice_while_claimed() -> None:
    # 300 random picks from ~12,800 ports repeat one with a probability of about 97 %
    # (the birthday bound); the claims make every pick a new port.
    picked = [ports.free_port() for _ in range(300)]
    assert len(set(picked)) == len(picked)


def test_a_port_in_use_is_not_bindable() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        assert not ports._bindable(listener.getsockname()[1])


def test_a_stale_claim_is_taken_over_and_a_fresh_one_is_not() -> None:
    port = ports.free_port()
    assert not ports._claim(port)  # ours, just now
    claim = ports.CLAIMS / str(port)
    claim.write_text(repr(time.time() - ports.CLAIM_SECONDS - 1))
    assert ports._claim(port)
    assert not ports._claim(port)  # claimed again, now


def test_a_claim_being_made_elsewhere_is_not_taken() -> None:
    port = ports.free_port()
    claim = ports.CLAIMS / str(port)
    claim.write_text("0")  # stale, but another process holds the lock while it claims
    with claim.open("r+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert not ports._claim(port)
    assert ports._claim(port)
