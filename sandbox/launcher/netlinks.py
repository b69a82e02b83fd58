"""Sites behind links of their own: each site, and each nats-server, in a network namespace.

With ``Options.site_links`` every nats-server runs in a network namespace of its own
(``sandbox.sitenet``), listening at the namespace's address, and so does each site: its emulated
API server (at its namespace's address), its Kamaji simulator and its agent. A site then reaches
NATS through this machine over its veth pair, and ``link(site)`` shapes what crosses it between
the site and the nats-servers (``sandbox.sitenet.Link``: delayed, lossy, one way or cut); the
rest of its traffic (this machine reading its API server, the agent's health port) never is, and
neither are the hub's connections, from this machine. Without ``site_links`` every process runs
here on 127.0.0.1. A layer of ``sandbox.launcher.system.System`` under the NATS nodes and the
clusters.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from sandbox import processes
from sandbox.launcher.children import Children
from sandbox.launcher.options import Options
from sandbox.realkube import binaries as kbin
from sandbox.sitenet import Link, Namespace

__all__ = ["LOCAL", "NetLinks"]

LOCAL = "127.0.0.1"

_NATS_INDEX = 0x40
"""Namespace indices of the nats-servers start here; the sites' start at 0."""


class NetLinks(Children):
    """After ``_make_namespaces``: ``host(owner)`` and ``exec_prefix(owner)`` for a site or a
    nats-server's child name; after ``_attach_links``: ``link(site)``."""

    def __init__(self, directory: Path, options: Options) -> None:
        super().__init__(directory, options)
        self._spaces: dict[str, Namespace] = {}
        self._links: dict[str, Link] = {}

    def host(self, owner: str) -> str:
        """Where ``owner`` (a site, or a nats-server's child name) listens and is reached."""
        netns = self._spaces.get(owner)
        return netns.address if netns is not None else LOCAL

    def exec_prefix(self, owner: str) -> list[str]:
        """What runs a command of ``owner``'s where it lives (nothing: on this machine)."""
        netns = self._spaces.get(owner)
        return netns.exec_prefix() if netns is not None else []

    def link(self, site: str) -> Link:
        """``site``'s link to the nats-servers, to shape (``Options.site_links``)."""
        try:
            return self._links[site]
        except KeyError:
            raise KeyError(
                f"site {site!r} has no link of its own: is the system started with site_links?"
            ) from None

    async def _make_namespaces(self, nats_names: Sequence[str]) -> None:
        """A namespace for each of ``nats_names`` and each site, with ``Options.site_links``."""
        if not self.options.site_links:
            return
        owners = [(_NATS_INDEX + i, n) for i, n in enumerate(nats_names)]
        owners += list(enumerate(self.sites))
        for index, owner in owners:
            made = asyncio.ensure_future(asyncio.to_thread(Namespace.create, index))
            try:
                self._spaces[owner] = await asyncio.shield(made)
            except asyncio.CancelledError:  # a start given up: the namespace is still removed
                self._spaces[owner] = await made
                raise

    async def _attach_links(self, nats_names: Sequence[str]) -> None:
        """Each site's link, shaped between it and the nats-servers only (passing all for now)."""
        if not self.options.site_links:
            return
        shaper = await asyncio.to_thread(kbin.linkshaper, build_missing=True)
        peers = tuple(self.host(n) for n in nats_names)
        for site in self.sites:
            self._links[site] = await Link.attach(self._spaces[site], shaper, peers=peers)

    async def _release_links(self) -> None:
        """After every child stopped: the links closed and the namespaces removed."""
        for link in self._links.values():
            await link.close()
        self._links.clear()
        for netns in self._spaces.values():
            await asyncio.to_thread(netns.delete)
        self._spaces.clear()

    def _spawn_at(
        self,
        owner: str,
        name: str,
        args: list[str],
        *,
        health_url: str | None = None,
        ready_text: str | None = None,
    ) -> processes.Child:
        """``_spawn`` where ``owner`` lives: in its namespace, or here."""
        return self._spawn(
            name, [*self.exec_prefix(owner), *args], health_url=health_url, ready_text=ready_text
        )
