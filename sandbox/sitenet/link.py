"""A namespace's link to this machine, shaped: delayed, lossy, one way or cut.

``Link.attach`` starts ``linkshaper`` inside the namespace (built from ``gomod/linkshaper`` by
``gomod/build.sh net``, found by ``sandbox.realkube.binaries.linkshaper``: tc netem's delay,
jitter and loss where the kernel has no netem, through NFQUEUE), then adds two iptables rules
there that send it every packet leaving by the namespace's end of the veth pair, and every
packet arriving by that end. Its loopback is untouched: a site's agent still reaches its own API
server at once. ``shape`` changes either direction and returns what each did so far; ``close``
removes the rules, then stops linkshaper. Were linkshaper to die first, its queues would have
no reader and the kernel would drop the link's packets: a cut, never an unshaped link by
accident. Needs root, ``iptables`` and ``ip netns exec``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
from pathlib import Path

from sandbox.sitenet.namespace import Namespace, NetnsError
from sandbox.sitenet.shape import Counts, LinkError, Shape, answer, request

__all__ = ["Link"]

OUT_QUEUE = 1
IN_QUEUE = 2
ANSWER_TIMEOUT = 10.0
"""Seconds linkshaper has to answer a line (it answers at once)."""


def _rules(namespace: Namespace, peers: tuple[str, ...]) -> list[list[str]]:
    """The rule specs (after the chain's verb) that send the link's packets to the queues: those
    to and from ``peers`` (addresses), or every one."""
    out = ["OUTPUT", "-o", namespace.ns_if]
    into = ["INPUT", "-i", namespace.ns_if]
    out_queue = ["-j", "NFQUEUE", "--queue-num", str(OUT_QUEUE)]
    in_queue = ["-j", "NFQUEUE", "--queue-num", str(IN_QUEUE)]
    if not peers:
        return [[*out, *out_queue], [*into, *in_queue]]
    return [rule for p in peers for rule in ([*out, "-d", p, *out_queue], [*into, "-s", p, *in_queue])]


def _iptables(namespace: Namespace, verb: str, rule: list[str]) -> None:
    iptables = shutil.which("iptables")
    if iptables is None:
        raise NetnsError("`iptables` is not installed: a site's link is shaped through its rules")
    args = [*namespace.exec_prefix(), iptables, "-w", verb, *rule]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise NetnsError(f"`{' '.join(args)}` failed: {done.stderr.strip() or done.stdout.strip()}")


class Link:
    """The shaped link of one namespace (see the module)."""

    def __init__(
        self, namespace: Namespace, process: asyncio.subprocess.Process, peers: tuple[str, ...] = ()
    ) -> None:
        self.namespace = namespace
        self.peers = peers
        """The addresses whose traffic with the namespace is shaped (none: all of its link's)."""
        self._process = process
        self._lock = asyncio.Lock()
        self._ruled = False
        self._broken = ""
        """Why the link answers no more (an answer that never came would be read as the next)."""
        self._said = bytearray()
        """The end of what linkshaper wrote on stderr, read as it comes (a full pipe would stop it)."""
        self._reading = asyncio.ensure_future(self._read_stderr())

    async def _read_stderr(self) -> None:
        if self._process.stderr is None:
            return
        while chunk := await self._process.stderr.read(4096):
            self._said = (self._said + chunk)[-2000:]

    @classmethod
    async def attach(cls, namespace: Namespace, shaper: Path, *, peers: tuple[str, ...] = ()) -> Link:
        """Start shaping ``namespace``'s link with the ``linkshaper`` binary ``shaper``: what it
        carries between the namespace and ``peers`` (addresses), or all it carries. It passes
        everything until ``shape`` says otherwise."""
        argv = [*namespace.exec_prefix(), str(shaper)]
        argv += ["-out", str(OUT_QUEUE), "-in", str(IN_QUEUE)]
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        link = cls(namespace, process, peers)
        try:
            await link._read()  # ready: its queues are bound
            for rule in _rules(namespace, peers):
                link._ruled = True
                await asyncio.to_thread(_iptables, namespace, "-A", rule)
        except BaseException:
            await link.close()
            raise
        return link

    async def shape(self, *, out: Shape | None = None, into: Shape | None = None) -> tuple[Counts, Counts]:
        """Set ``out`` (from the site) and ``into`` (to it), ``None`` keeping one as it is; what
        each direction did so far, ``out`` first."""
        async with self._lock:
            stdin = self._process.stdin
            if self._broken or stdin is None or stdin.is_closing():
                raise LinkError(self._broken or f"the link of {self.namespace.name} is closed")
            try:
                stdin.write(request(out=out, into=into))
                await stdin.drain()
            except ConnectionError:  # its end of the pipe closed: it exited, and says why below
                pass
            return await self._read()

    async def counts(self) -> tuple[Counts, Counts]:
        return await self.shape()

    async def _read(self) -> tuple[Counts, Counts]:
        assert self._process.stdout is not None
        try:
            line = await asyncio.wait_for(self._process.stdout.readline(), ANSWER_TIMEOUT)
        except TimeoutError:
            self._broken = f"linkshaper of {self.namespace.name} did not answer in {ANSWER_TIMEOUT:g} s"
            raise LinkError(self._broken) from None
        if not line:
            with contextlib.suppress(TimeoutError):  # the rest of what it said
                await asyncio.wait_for(asyncio.shield(self._reading), 1.0)
            why = self._said.decode(errors="replace").strip() or "no reason given"
            self._broken = f"linkshaper of {self.namespace.name} exited: {why}"
            raise LinkError(self._broken)
        return answer(line)

    async def close(self) -> None:
        """Unshaped again: the rules removed, linkshaper stopped; safe to call twice."""
        if self._ruled:
            self._ruled = False
            for rule in _rules(self.namespace, self.peers):
                with contextlib.suppress(NetnsError):
                    await asyncio.to_thread(_iptables, self.namespace, "-D", rule)
        if self._process.returncode is None:
            if self._process.stdin is not None:
                self._process.stdin.close()
            try:
                await asyncio.wait_for(self._process.wait(), 5.0)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._process.pid, 9)
                await self._process.wait()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._reading, 5.0)
