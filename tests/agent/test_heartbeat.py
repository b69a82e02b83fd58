"""agent.heartbeat: the pure constructor, and beats on a real nats-server from an emulated site."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent import heartbeat
from common import bus
from common import kube as ckube
from protocol import messages, streams, subjects
from sandbox import kubeapi, natsd
from tests import helpers
from tests.agent import wiring
from tests.agent.apply.test_loop import Agent, tcp_where
from tests.agent.conftest import SITE, Hub, intent

LATER = helpers.T0 + dt.timedelta(minutes=5)


@pytest.mark.parametrize(
    ("managed", "ready", "seq", "want"),
    [
        (3, 2, 17, (3, 2, 17)),
        (0, 0, 0, (0, 0, 0)),
        (-1, -2, -3, (0, 0, 0)),  # never publish what the hub would refuse to decode
    ],
    ids=["counts", "empty site", "negative clamped"],
)
def test_new_heartbeat(managed: int, ready: int, seq: int, want: tuple[int, int, int]) -> None:
    beat = heartbeat.new_heartbeat(
        site=SITE,
        agent_version="1.2.3",
        started_at=helpers.T0,
        now=LATER,
        managed=managed,
        ready=ready,
        last_intent_seq=seq,
        kamaji_detected=True,
    )
    assert (beat.managed, beat.ready, beat.last_intent_seq) == want
    assert (beat.site, beat.agent_version, beat.started_at, beat.sent_at) == (
        SITE,
        "1.2.3",
        helpers.T0,
        LATER,
    )
    assert beat.kamaji_detected is True
    assert messages.decode_heartbeat(messages.encode(beat)) == beat


async def latest(hub: Hub) -> messages.Heartbeat | None:
    stream = streams.stream_name(subjects.Kind.SITE, site=SITE, prefix=hub.prefix)
    stored = await bus.last_message(hub.conn, stream, subjects.heartbeat(SITE, prefix=hub.prefix))
    return messages.decode_heartbeat(stored.data) if stored else None


def beater(conn: bus.Connection, kube: ckube.Kube, hub: Hub, **kw: Any) -> heartbeat.Heartbeat:
    settings = wiring.settings(
        prefix=hub.prefix, namespaces=kw.pop("namespaces", ()), heartbeat_interval=kw.pop("interval", 10.0)
    )
    return heartbeat.Heartbeat(
        settings,
        wiring.deps(conn, kube, hub.public, prefix=hub.prefix),
        counts=kw.pop("counts", lambda: (3, 2)),
        last_intent_seq=kw.pop("last_intent_seq", lambda: 0),
        agent_version="0.1.0",
        **kw,
    )


async def test_a_beat_lands_on_the_sites_stream_with_the_counts(
    conn: bus.Connection, site: ckube.Kube, hub: Hub
) -> None:
    a = Agent(conn, site, hub)
    a.start()
    try:
        seq = await hub.send(intent())
        await tcp_where(site, "cp1", lambda o: o is not None)
        await helpers.eventually(lambda: a.loop.last_seq == seq)
        hb = beater(conn, site, hub, last_intent_seq=lambda: a.loop.last_seq, namespaces=("tenants",))
        sent = await hb.beat()
    finally:
        await a.stop()
    stored = await latest(hub)
    assert stored == sent
    assert stored is not None
    assert (stored.site, stored.managed, stored.ready, stored.last_intent_seq) == (SITE, 3, 2, seq)
    assert stored.kamaji_detected is True and stored.agent_version == "0.1.0"
    assert stored.interval == 10.0  # what a reader judges the next beat's lateness by
    assert stored.started_at <= stored.sent_at


async def test_run_beats_every_interval_and_outlives_a_lost_bus(
    nats_server: natsd.NatsServer, site: ckube.Kube, hub: Hub
) -> None:
    own = await bus.connect(helpers.options(nats_server.url), deadline=10)
    hb = beater(own, site, hub, interval=0.1)
    task = asyncio.create_task(hb.run())
    try:
        await helpers.eventually(lambda: hb.beats >= 2)
        first = await latest(hub)
        await helpers.eventually(lambda: _later_than(hub, first))
        await own.close()  # publishing now fails on every beat
        before = hb.beats
        # Each failed beat takes the publisher's own retries (a few seconds); two show it goes on.
        await helpers.eventually(lambda: hb.failures >= 2, within=30)
        assert hb.beats == before and not task.done()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await own.close()


async def test_kamaji_not_detected_on_a_cluster_without_its_crd(
    conn: bus.Connection, hub: Hub, tmp_path: Path
) -> None:
    bare = kubeapi.Server(name="bare")
    await bare.start(port=0)
    api = await ckube.api_client_from_kubeconfig(bare.write_kubeconfig(tmp_path / "kubeconfig"))
    try:
        hb = beater(conn, ckube.Kube(api), hub)
        assert (await hb.beat()).kamaji_detected is False
        stored = await latest(hub)
        assert stored is not None and stored.kamaji_detected is False
    finally:
        await api.close()
        await bare.stop()


async def test_a_beat_does_not_wait_for_an_api_server_that_never_answers(
    conn: bus.Connection, hub: Hub, tmp_path: Path
) -> None:
    """A server that accepts the connection and the request, and never answers (one stopped,
    or behind a dead proxy): the beat goes out all the same, with what the agent knew."""
    held: list[asyncio.StreamWriter] = []

    async def never_answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    silent = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    kubeconfig = tmp_path / "silent.kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "silent",
            "clusters": [{"name": "silent", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
            "users": [{"name": "silent", "user": {"token": "t"}}],
            "contexts": [{"name": "silent", "context": {"cluster": "silent", "user": "silent"}}],
        })
    )  # fmt: skip
    api = await ckube.api_client_from_kubeconfig(kubeconfig)
    try:
        hb = beater(conn, ckube.Kube(api), hub)
        hb.detect_timeout = 0.5  # not the 10 s of a real site: the test need not wait that long
        # Bounded so that a beat that waits for the server fails here, not at pytest's timeout.
        sent = await asyncio.wait_for(hb.beat(), timeout=15)
        assert held, "the server took the probe's connection"
        assert sent.kamaji_detected is False and await latest(hub) == sent
    finally:
        await api.close()
        for writer in held:
            writer.close()
        silent.close()
        await silent.wait_closed()


async def _later_than(hub: Hub, first: messages.Heartbeat | None) -> bool:
    now = await latest(hub)
    return first is not None and now is not None and now.sent_at > first.sent_at


def test_new_heartbeat_carries_the_trusted_hub_key_ids_sorted() -> None:
    beat = heartbeat.new_heartbeat(
        site=SITE, agent_version="1.2.3", started_at=helpers.T0, now=LATER, managed=0, ready=0,
        last_intent_seq=0, kamaji_detected=False, trusted_key_ids=("k2", "k1"),
    )  # fmt: skip
    assert beat.trusted_key_ids == ("k1", "k2")
