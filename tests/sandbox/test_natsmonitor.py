"""sandbox.natsmonitor: reading /jsz documents (tables, shaped as nats-server 2.x writes them).

The fetch against real servers is covered by tests/cli/test_nats_cluster.py and the cluster
topology of tests/faults/test_nats_faults.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from sandbox import natsmonitor


def _jsz(meta: dict[str, Any] | None = None, streams: dict[str, str | None] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"server_id": "NABC", "streams": len(streams or {})}
    if meta is not None:
        doc["meta_cluster"] = meta
    if streams is not None:
        doc["account_details"] = [
            {"name": "$SYS", "stream_detail": []},
            {
                "name": "$G",
                "stream_detail": [
                    {"name": name, **({"cluster": {"leader": leader}} if leader is not None else {})}
                    for name, leader in streams.items()
                ],
            },
        ]
    return doc


@pytest.mark.parametrize(
    ("case", "doc", "expected"),
    [
        ("single server: its own leader", _jsz(), natsmonitor.Meta("NABC", "NABC", 1)),
        (
            "cluster with a leader",
            _jsz({"name": "kb", "leader": "nats-2", "cluster_size": 3}),
            natsmonitor.Meta("NABC", "nats-2", 3),
        ),
        (
            "cluster in an election",
            _jsz({"name": "kb", "cluster_size": 3}),
            natsmonitor.Meta("NABC", "", 3),
        ),
        ("cluster not yet sized", _jsz({"name": "kb", "leader": ""}), natsmonitor.Meta("NABC", "", 0)),
    ],
)
def test_meta(case: str, doc: dict[str, Any], expected: natsmonitor.Meta) -> None:
    assert natsmonitor.meta(doc) == expected, case


@pytest.mark.parametrize(
    ("case", "doc", "stream", "expected"),
    [
        ("led", _jsz(streams={"KB_INTENTS": "nats-1", "KB_SITE_a": "nats-0"}), "KB_INTENTS", "nats-1"),
        (
            "other stream",
            _jsz(streams={"KB_INTENTS": "nats-1", "KB_SITE_a": "nats-0"}),
            "KB_SITE_a",
            "nats-0",
        ),
        ("no replica here", _jsz(streams={"KB_SITE_a": "nats-0"}), "KB_INTENTS", ""),
        ("leader being elected", _jsz(streams={"KB_INTENTS": ""}), "KB_INTENTS", ""),
        ("no cluster section", _jsz(streams={"KB_INTENTS": None}), "KB_INTENTS", ""),
        ("no account details (not asked)", _jsz(), "KB_INTENTS", ""),
    ],
)
def test_stream_leader(case: str, doc: dict[str, Any], stream: str, expected: str) -> None:
    assert natsmonitor.stream_leader(doc, stream) == expected, case


@pytest.mark.parametrize(
    ("case", "answers", "expected"),
    [
        ("all agree", ["nats-1", "nats-1", "nats-1"], "nats-1"),
        ("one node still believes in a dead leader", ["nats-1", "nats-2", "nats-2"], ""),
        ("an election", ["", "", ""], ""),
        ("partly elected", ["nats-1", ""], ""),
        ("no node answers", [], ""),
    ],
)
def test_agreed(case: str, answers: list[str], expected: str) -> None:
    assert natsmonitor.agreed(answers) == expected, case


def _node(
    name: str, leader: str, *, current: bool = True, streams: dict[str, tuple[str, bool]] | None = None
) -> dict[str, Any]:
    """One node's /jsz of a 3-node cluster: the meta group and each stream (leader, peers current)
    as that node reports it (a leader lists the others, the others list the leader too)."""
    others = [n for n in ("nats-0", "nats-1", "nats-2") if n != name]
    peers = [{"name": n, "current": current if name == leader else True} for n in others]
    doc: dict[str, Any] = {
        "server_id": name,
        "meta_cluster": {"name": "kb", "leader": leader, "cluster_size": 3, "replicas": peers},
    }
    details = []
    for stream, (stream_leader, caught_up) in (streams or {}).items():
        stream_peers = [{"name": n, "current": caught_up if name == stream_leader else True} for n in others]
        details.append({"name": stream, "cluster": {"leader": stream_leader, "replicas": stream_peers}})
    doc["account_details"] = [{"name": "$G", "stream_detail": details}]
    return doc


WHOLE = {"KB_INTENTS": ("nats-1", True)}


@pytest.mark.parametrize(
    ("case", "docs", "expected"),
    [
        ("whole", [_node(n, "nats-2", streams=WHOLE) for n in ("nats-0", "nats-1", "nats-2")], True),
        ("a node does not answer", [_node(n, "nats-2", streams=WHOLE) for n in ("nats-0", "nats-1")], False),
        (
            "a node still believes in another meta leader",
            [
                _node("nats-0", "nats-1", streams=WHOLE),
                *(_node(n, "nats-2", streams=WHOLE) for n in ("nats-1", "nats-2")),
            ],
            False,
        ),
        (
            "the meta leader sees a peer behind",
            [_node(n, "nats-2", current=False, streams=WHOLE) for n in ("nats-0", "nats-1", "nats-2")],
            False,
        ),
        (
            "the stream leader sees a replica behind (a node started again, catching up)",
            [
                _node(n, "nats-2", streams={"KB_INTENTS": ("nats-1", False)})
                for n in ("nats-0", "nats-1", "nats-2")
            ],
            False,
        ),
        (
            "the stream has no leader yet",
            [_node(n, "nats-2", streams={"KB_INTENTS": ("", True)}) for n in ("nats-0", "nats-1", "nats-2")],
            False,
        ),
        ("the stream does not exist", [_node(n, "nats-2") for n in ("nats-0", "nats-1", "nats-2")], False),
    ],
)
def test_settled(case: str, docs: list[dict[str, Any]], expected: bool) -> None:
    assert natsmonitor.settled(docs, nodes=3, streams=["KB_INTENTS"]) is expected, case


def test_settled_single_server() -> None:
    doc = _jsz(streams={"KB_INTENTS": "solo"})
    assert natsmonitor.settled([doc], nodes=1, streams=["KB_INTENTS"])
    assert not natsmonitor.settled([], nodes=1)
