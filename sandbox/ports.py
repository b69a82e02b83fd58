"""Ports for the listeners the sandbox and the tests start on 127.0.0.1, picked so they do not collide.

A port is picked before its server binds it (a nats-server's route port must be in every node's
configuration first), so in between anything else could take it. Two things did, with two
``make test`` runs side by side: an outgoing connection (the kernel gives those ports from the
ephemeral range, 32768-60999 on Linux) and the other run picking the same port. So ports come
from below the ephemeral range, where no connection is ever given one, and each pick is claimed
for ``CLAIM_SECONDS`` in a file under ``CLAIMS`` (locked while read and written, shared by
every process of the user on the machine), long enough for the server it is meant for to bind
it. Talks to the operating system only.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
import time
from pathlib import Path
from typing import Final

RANGE: Final = range(20000, 32768)
"""Below Linux's default ephemeral range (``net.ipv4.ip_local_port_range``)."""
CLAIMS: Final = Path(tempfile.gettempdir()) / f"kamaji-broker-ports-{os.getuid()}"
"""One directory per user: a second user on the machine claims in a directory of its own."""
CLAIM_SECONDS: Final = 120.0


def _claim(port: int) -> bool:
    """Claim ``port`` for this process unless another claimed it within ``CLAIM_SECONDS``.

    The claim file holds the time of the last claim; it is read and written only under an
    exclusive ``flock``, so of two processes picking the same port at once only one claims it.
    """
    fd = os.open(CLAIMS / str(port), os.O_CREAT | os.O_RDWR, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # another process is claiming it right now
        try:
            claimed_at = float(os.read(fd, 64) or b"0")
        except ValueError:
            claimed_at = 0.0
        now = time.time()
        if now - claimed_at < CLAIM_SECONDS:
            return False
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, repr(now).encode())
        return True
    finally:
        os.close(fd)  # and with it the lock


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on and no process of ours was handed lately."""
    CLAIMS.mkdir(mode=0o700, exist_ok=True)
    for _ in range(1000):
        port = random.choice(RANGE)
        if _claim(port) and _bindable(port):
            return port
    raise RuntimeError(f"no free port in {RANGE.start}-{RANGE.stop - 1} on 127.0.0.1")
