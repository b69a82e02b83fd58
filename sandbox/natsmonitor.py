"""nats-server's HTTP monitoring (/jsz), read by the sandbox and the tests: is a JetStream cluster
ready (a meta leader elected and known to every node), and which node leads a stream (so that a
fault test can kill exactly that one).

``meta`` and ``stream_leader`` are pure readers of one /jsz document, tested by tables; ``jsz``
is the one fetch (aiohttp, 127.0.0.1), and the ``wait_*``/``*_of`` helpers combine the nodes'
answers. Monitoring needs no credentials, so the launcher can ask before any user exists.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

__all__ = [
    "Meta",
    "agreed",
    "jsz",
    "meta",
    "meta_leader_of",
    "settled",
    "settled_of",
    "stream_leader",
    "stream_leader_of",
]

Doc = Mapping[str, Any]


@dataclass(frozen=True)
class Meta:
    """What one node knows of the JetStream meta group (the cluster-wide API and placement)."""

    server: str
    leader: str
    """Empty while no meta leader is known to this node (an election, no quorum)."""
    cluster_size: int


def meta(doc: Doc) -> Meta:
    """The meta group as one node's /jsz reports it. A single server has no meta group: it is
    its own leader (named by its id: /jsz does not carry the server's name)."""
    group = doc.get("meta_cluster") or {}
    server = str(doc.get("server_id") or "")
    if not group:
        return Meta(server=server, leader=server, cluster_size=1)
    return Meta(
        server=server, leader=str(group.get("leader") or ""), cluster_size=int(group.get("cluster_size") or 0)
    )


def stream_leader(doc: Doc, stream: str) -> str:
    """The leader of ``stream`` as one node's ``/jsz?accounts=true&streams=true`` reports it
    (empty when this node holds no replica of it, or knows no leader)."""
    for account in doc.get("account_details") or ():
        for detail in account.get("stream_detail") or ():
            if detail.get("name") == stream:
                return str((detail.get("cluster") or {}).get("leader") or "")
    return ""


def _stream_detail(doc: Doc, stream: str) -> Mapping[str, Any]:
    for account in doc.get("account_details") or ():
        for detail in account.get("stream_detail") or ():
            if detail.get("name") == stream:
                return dict(detail)
    return {}


def _is_leader(group: Mapping[str, Any]) -> bool:
    """Whether the node reporting this raft group leads it: a leader lists only the others
    among its ``replicas``, every other node lists the leader."""
    leader = group.get("leader")
    return bool(leader) and not any(peer.get("name") == leader for peer in group.get("replicas") or ())


def settled(docs: Sequence[Doc], *, nodes: int, streams: Sequence[str] = ()) -> bool:
    """Whether a cluster of ``nodes`` is whole (``docs``: ``/jsz?accounts=true&streams=true`` of
    the nodes that answered): every node answers, all agree on the meta leader and on each of
    ``streams``' leaders, and every leader sees all its peers current (a node started again has
    caught up). Asked before a fault is injected, so that the fault hits a whole cluster."""
    if len(docs) != nodes:
        return False
    metas = [meta(doc) for doc in docs]
    if not agreed([m.leader for m in metas]) or any(m.cluster_size != nodes for m in metas):
        return False
    groups = [doc.get("meta_cluster") or {} for doc in docs]
    for stream in streams:
        details = [d for d in (_stream_detail(doc, stream) for doc in docs) if d]
        if not agreed([str((d.get("cluster") or {}).get("leader") or "") for d in details]):
            return False
        groups += [d.get("cluster") or {} for d in details]
    return all(
        all(bool(peer.get("current")) for peer in group.get("replicas") or ())
        for group in groups
        if _is_leader(group)
    )


def agreed(answers: Sequence[str]) -> str:
    """The one non-empty answer every node gives, else empty (an election is under way, or a
    node still believes in a leader that died)."""
    counts = collections.Counter(answers)
    if len(counts) == 1 and answers and answers[0]:
        return answers[0]
    return ""


async def jsz(session: aiohttp.ClientSession, monitor_url: str, *, streams: bool = False) -> dict[str, Any]:
    params = {"accounts": "true", "streams": "true"} if streams else {}
    async with session.get(f"{monitor_url}/jsz", params=params) as response:
        response.raise_for_status()
        doc: dict[str, Any] = await response.json()
        return doc


async def _answers(monitor_urls: Sequence[str], *, streams: bool) -> list[dict[str, Any]]:
    """/jsz of every node that answers (a killed node does not)."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
        found = await asyncio.gather(
            *(jsz(session, url, streams=streams) for url in monitor_urls), return_exceptions=True
        )
    return [doc for doc in found if isinstance(doc, dict)]


async def meta_leader_of(monitor_urls: Sequence[str], *, nodes: int) -> str:
    """The meta leader every answering node agrees on, in a cluster of ``nodes``; empty otherwise."""
    metas = [meta(doc) for doc in await _answers(monitor_urls, streams=False)]
    if not metas or any(m.cluster_size != nodes for m in metas):
        return ""
    return agreed([m.leader for m in metas])


async def stream_leader_of(monitor_urls: Sequence[str], stream: str) -> str:
    """The leader of ``stream`` every answering node that holds a replica agrees on; empty
    while there is none or they disagree."""
    docs = await _answers(monitor_urls, streams=True)
    return agreed([leader for leader in (stream_leader(doc, stream) for doc in docs) if leader] or [""])


async def settled_of(monitor_urls: Sequence[str], *, nodes: int, streams: Sequence[str] = ()) -> bool:
    """``settled`` for the nodes at ``monitor_urls``."""
    return settled(await _answers(monitor_urls, streams=True), nodes=nodes, streams=streams)
