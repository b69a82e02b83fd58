"""hub.ingest.consumer on the real nats-server: the test plays the agent by publishing on its subjects."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import msgspec
import pytest

from common import bus
from hub import metrics as hub_metrics
from hub.ingest import consumer as ingest
from hub.ingest import heartbeats, liveness, observations, record
from hub.ingest import sealed as boxes
from protocol import messages, sealing, streams, subjects
from protocol.coordinates import Coordinates
from tests import helpers
from tests.hub.ingest.test_observations import CP1, HUB, PAYLOAD, STRANGER, public, sealed_to

CP2 = Coordinates("site-a", "tenants", "cp2")


@dataclass
class Hub:
    """One hub process's ingest: its observations, metrics and the coordinates announced."""

    ingest: ingest.Ingest
    intake: record.Intake
    obs: observations.Observations
    metrics: hub_metrics.Metrics
    changes: list[Coordinates] = field(default_factory=list)
    mapped: set[Coordinates] = field(default_factory=set)
    """Coordinates an RKCP maps to (the controller's ``maps``); the ingest keeps nothing else."""
    sites: liveness.Sites = field(default_factory=liveness.Sites)
    """The heartbeats the consumer delivered (``liveness.heartbeats``)."""

    def rejected(self, kind: subjects.Kind, reason: str, *, site: str = "site-a") -> float:
        stream = helpers.stream(kind, self.intake.prefix, site=site)
        value = self.metrics.registry.get_sample_value(
            "kb_hub_bus_rejected_total", {"stream": stream, "reason": reason}
        )
        return value or 0.0


def new_hub(
    conn: bus.Connection,
    prefix: str,
    *,
    sites: list[str] | None = None,
    box_budget: int = boxes.DEFAULT_BUDGET,
    ensured: Callable[[str], bool] = lambda site: True,
) -> Hub:
    known = ["site-a", "site-b"] if sites is None else sites
    obs = observations.Observations(box_budget=box_budget)
    metrics = hub_metrics.Metrics()
    changes: list[Coordinates] = []
    mapped = {CP1, CP2}
    heard = liveness.Sites()
    reader = record.Intake(
        record.Deps(conn=conn, observations=obs, keyring=sealing.Keyring([HUB]), metrics=metrics),
        prefix=prefix,
    )
    return Hub(
        ingest=ingest.Ingest(
            ingest.Deps(
                intake=reader,
                sites=lambda: known,
                maps=mapped.__contains__,
                on_change=changes.append,
                ensured=ensured,
                heartbeat=heartbeats.heartbeats(heard, metrics),
            ),
            ingest.Settings(rescan_interval=0.2, retain_interval=0.2),
        ),
        intake=reader,
        obs=obs,
        metrics=metrics,
        changes=changes,
        mapped=mapped,
        sites=heard,
    )


@contextlib.asynccontextmanager
async def running(hub: Hub) -> AsyncIterator[Hub]:
    task = asyncio.create_task(hub.ingest.run())
    try:
        yield hub
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.fixture
async def hub(conn: bus.Connection, topology: str) -> AsyncIterator[Hub]:
    async with running(new_hub(conn, topology)) as h:
        yield h


async def publish(conn: bus.Connection, subject: str, payload: bytes) -> int:
    ack = await bus.publish(conn, subject, payload, msg_id=uuid.uuid4().hex)
    return ack.seq


async def publish_status(conn: bus.Connection, prefix: str, status: messages.Status) -> int:
    subject = subjects.status(status.site, status.namespace, status.name, prefix=prefix)
    return await publish(conn, subject, messages.encode(status))


async def publish_sealed(conn: bus.Connection, prefix: str, sealed: messages.SealedSecrets) -> int:
    subject = subjects.secret(sealed.site, sealed.namespace, sealed.name, prefix=prefix)
    return await publish(conn, subject, messages.encode(sealed))


async def settled(conn: bus.Connection, prefix: str) -> None:
    """The hub's consumers of both sites have nothing pending: every message was delivered (the
    consumers have no acks, so nothing is ever pending an ack either). Delivered, not yet handled:
    wait on what the hub did with them (``counted``, ``eventually``) before asserting it."""

    async def check() -> bool:
        for site in ("site-a", "site-b"):
            d = streams.hub_consumer(site, prefix=prefix)
            state = await bus.consumer_info(conn, d.stream, d.durable_name)
            if state.num_pending or state.num_ack_pending:
                return False
        return True

    await helpers.eventually(check)


async def counted(hub: Hub, want: dict[tuple[subjects.Kind, str], float]) -> None:
    """The refusals ``want`` counts, and no more. A consumer without acks has nothing pending once
    it delivered, which is before the hub handled it: so first wait until as many were counted."""

    def counts() -> dict[tuple[subjects.Kind, str], float]:
        return {key: hub.rejected(*key) for key in want}

    got = await helpers.eventually(counts, lambda c: sum(c.values()) >= sum(want.values()), what="refusals")
    assert got == want


def beat() -> messages.Heartbeat:
    return msgspec.structs.replace(helpers.heartbeat(), sent_at=messages.utcnow())


async def test_heartbeats_are_delivered_to_liveness_with_no_poll(conn: bus.Connection, hub: Hub) -> None:
    """Each heartbeat the hub's consumer delivers is what the site is judged by: a site
    connected, then its next heartbeat taken as it lands; nothing else is announced."""
    prefix = hub.intake.prefix
    subject = subjects.heartbeat("site-a", prefix=prefix)
    first = await publish(conn, subject, messages.encode(beat()))

    async def heard(seq: int) -> bool:
        return hub.sites.seen_seq("site-a") == seq

    await helpers.eventually(lambda: heard(first))
    assert hub.sites.connected("site-a", messages.utcnow())
    second = await publish(conn, subject, messages.encode(beat()))
    await helpers.eventually(lambda: heard(second))
    assert hub.changes == [] and hub.obs.get(CP1) is None


async def test_status_and_secrets_reach_the_observations(conn: bus.Connection, hub: Hub) -> None:
    prefix = hub.intake.prefix
    status_seq = await publish_status(conn, prefix, helpers.status(phase="Ready"))
    sealed_seq = await publish_sealed(conn, prefix, sealed_to(HUB))

    async def both() -> bool:
        held = hub.obs.get(CP1)
        return held is not None and held.status is not None and held.sealed is not None

    await helpers.eventually(both)
    held = hub.obs.get(CP1)
    assert held is not None
    assert held.status == helpers.status(phase="Ready")
    assert (held.status_seq, held.sealed_seq) == (status_seq, sealed_seq)
    assert held.secrets_error is None  # it opens; the payload is not kept
    assert hub.changes == [CP1, CP1]
    assert hub.metrics.registry.get_sample_value("kb_hub_status_received_total") == 1.0
    await settled(conn, prefix)
    # Fetch and open: the one way to the plaintext, from the stream.
    opened = await hub.intake.open_latest(CP1)
    assert opened is not None and opened[1] == PAYLOAD
    assert held.sealed == observations.SealedRef.of(opened[0])


async def test_messages_for_coordinates_no_rkcp_maps_to_are_counted_never_kept(
    conn: bus.Connection, hub: Hub
) -> None:
    prefix = hub.intake.prefix
    nobody = Coordinates("site-a", "tenants", "nobody")
    await publish_status(conn, prefix, helpers.status(name="nobody"))
    await publish_sealed(conn, prefix, sealed_to(HUB, name="nobody"))
    await counted(hub, {(subjects.Kind.STATUS, record.UNMAPPED): 2.0})
    assert hub.obs.get(nobody) is None and not hub.obs.loaded(nobody)
    assert hub.obs.coordinates() == frozenset()
    assert hub.changes == []
    assert hub.metrics.registry.get_sample_value("kb_hub_status_received_total") == 0.0

    # An RKCP appears: the stream kept both, and load reads them (the box opens only now).
    hub.mapped.add(nobody)
    loaded = await hub.intake.load(nobody)
    assert loaded is not None and loaded.status is not None and loaded.sealed is not None
    assert (loaded.status.name, loaded.secrets_error) == ("nobody", None)


async def test_what_no_rkcp_maps_to_any_more_is_dropped(conn: bus.Connection, hub: Hub) -> None:
    prefix = hub.intake.prefix
    await publish_status(conn, prefix, helpers.status())

    async def recorded() -> bool:
        return hub.obs.get(CP1) is not None

    await helpers.eventually(recorded)
    hub.mapped.discard(CP1)

    async def dropped() -> bool:
        return hub.obs.get(CP1) is None and not hub.obs.loaded(CP1)

    await helpers.eventually(dropped)
    # An RKCP maps to it again (recreated, or a released owner's messages purged): the streams
    # are read again, and what is on them is held again although it was held before.
    hub.mapped.add(CP1)
    loaded = await hub.intake.load(CP1)
    assert loaded is not None and loaded.status == helpers.status()


async def test_garbage_is_counted_dropped_and_the_ingest_lives_on(conn: bus.Connection, hub: Hub) -> None:
    prefix = hub.intake.prefix
    await publish(conn, subjects.status("site-a", "tenants", "cp1", prefix=prefix), b"not json")
    await publish(conn, subjects.secret("site-a", "tenants", "cp1", prefix=prefix), b'{"schema": "x"}')
    # A body naming cp1 on cp2's subject: refused, recorded under neither.
    await publish(
        conn, subjects.status("site-a", "tenants", "cp2", prefix=prefix), messages.encode(helpers.status())
    )
    # Both came on site-a's stream: the metric's stream label names the site.
    await counted(
        hub, {(subjects.Kind.STATUS, "DecodeError"): 2.0, (subjects.Kind.STATUS, "CoordinatesMismatch"): 1.0}
    )
    assert hub.obs.get(CP1) is None
    assert hub.obs.get(CP2) is None
    assert hub.changes == []

    # Still consuming: a good status right after is recorded.
    await publish_status(conn, prefix, helpers.status(name="cp2"))

    async def recorded() -> bool:
        return hub.obs.get(CP2) is not None

    await helpers.eventually(recorded)
    assert hub.metrics.registry.get_sample_value("kb_hub_status_received_total") == 2.0


async def test_secrets_sealed_to_an_unknown_key_are_a_decrypt_error(conn: bus.Connection, hub: Hub) -> None:
    prefix = hub.intake.prefix
    seq = await publish_sealed(conn, prefix, sealed_to(STRANGER))

    async def recorded() -> bool:
        held = hub.obs.get(CP1)
        return held is not None and held.sealed_seq == seq

    await helpers.eventually(recorded)
    held = hub.obs.get(CP1)
    assert held is not None
    assert held.secrets_error is not None
    assert held.secrets_error.reason == "DecryptFailed"
    assert public(STRANGER).key_id in held.secrets_error.message
    assert hub.rejected(subjects.Kind.SECRET, "DecryptFailed") == 1.0
    assert hub.changes == [CP1]
    await settled(conn, prefix)

    # The site re-seals to the right key (after a rotation): the error gives way to the payload.
    newer = await publish_sealed(conn, prefix, sealed_to(HUB))

    async def healed() -> bool:
        h = hub.obs.get(CP1)
        return h is not None and h.sealed_seq == newer

    await helpers.eventually(healed)
    held = hub.obs.get(CP1)
    assert held is not None
    assert held.secrets_error is None
    opened = await hub.intake.open_latest(CP1)
    assert opened is not None and opened[1] == PAYLOAD


async def test_an_older_status_does_not_replace_a_newer_one(conn: bus.Connection, topology: str) -> None:
    """A delivery fetched before a restart's load() and handled after it: the load's newer status stays."""
    hub = new_hub(conn, topology)
    status_def = streams.hub_consumer("site-a", prefix=topology)
    await publish_status(conn, topology, helpers.status(phase="Provisioning"))
    consumer = await bus.bind(conn, status_def)
    try:
        (early,) = await consumer.fetch(1, timeout=5.0)
        newer = await publish_status(conn, topology, helpers.status(phase="Ready"))
        loaded = await hub.intake.load(CP1)
        assert loaded is not None
        assert loaded.status is not None
        assert (loaded.status.phase, loaded.status_seq) == ("Ready", newer)

        await hub.ingest.handle(early)
    finally:
        await consumer.unsubscribe()
    held = hub.obs.get(CP1)
    assert held is not None
    assert held.status is not None
    assert (held.status.phase, held.status_seq, held.version) == ("Ready", newer, 1)
    assert hub.changes == []  # load() answers its caller; handle() recorded nothing


async def test_a_restarted_hub_loads_the_latest_from_the_streams(conn: bus.Connection, topology: str) -> None:
    first = new_hub(conn, topology)
    async with running(first):
        await publish_status(conn, topology, helpers.status(phase="Provisioning"))
        status_seq = await publish_status(conn, topology, helpers.status(phase="Ready"))
        sealed_seq = await publish_sealed(conn, topology, sealed_to(HUB))

        async def caught_up() -> bool:
            held = first.obs.get(CP1)
            return held is not None and (held.status_seq, held.sealed_seq) == (status_seq, sealed_seq)

        await helpers.eventually(caught_up)
        await settled(conn, topology)

    # A new process: its durable consumers redeliver nothing, the streams still hold the latest.
    second = new_hub(conn, topology)
    async with running(second):
        loaded = await second.intake.load(CP1)
        assert loaded is not None
        assert loaded.status is not None
        assert (loaded.status.phase, loaded.status_seq, loaded.sealed_seq) == (
            "Ready",
            status_seq,
            sealed_seq,
        )
        assert loaded.secrets_error is None
        assert second.obs.loaded(CP1)
        assert await second.intake.load(CP2) is None
        assert second.obs.loaded(CP2)

        # After the load, news arrives through the consumer as usual.
        later = await publish_status(conn, topology, helpers.status(phase="NotReady"))

        async def updated() -> bool:
            held = second.obs.get(CP1)
            return held is not None and held.status_seq == later

        await helpers.eventually(updated)
        assert second.changes == [CP1]


async def test_load_counts_garbage_in_the_stream_and_returns_nothing(
    conn: bus.Connection, topology: str
) -> None:
    await publish(conn, subjects.status("site-a", "tenants", "cp1", prefix=topology), b"\xff garbage")
    hub = new_hub(conn, topology)
    assert await hub.intake.load(CP1) is None
    assert hub.rejected(subjects.Kind.STATUS, "DecodeError") == 1.0


async def test_the_ingest_waits_quietly_for_the_consumers_the_hub_makes(
    conn: bus.Connection, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Every start binds before the controller made the consumers: that wait is no warning. A
    consumer the hub made and that is gone (someone deleted it) is."""
    caplog.set_level(logging.DEBUG, logger=ingest.__name__)
    made: set[str] = set()
    hub = new_hub(conn, prefix, ensured=made.__contains__)

    def missing(site: str, level: int) -> bool:
        stream = f"'{prefix.upper()}_SITE_{site}'"
        return any(
            "'hub'" in r.getMessage() and stream in r.getMessage() and "does not exist" in r.getMessage()
            for r in caplog.records
            if r.levelno == level
        )

    async with running(hub):
        await helpers.eventually(lambda: missing("site-a", logging.DEBUG), what="a wait at debug")
        made.add("site-b")  # as if the hub had made it, and then someone deleted it
        await helpers.eventually(lambda: missing("site-b", logging.WARNING), what="a warning")
        await bus.ensure_topology(conn, sites=["site-a"], prefix=prefix)
        made.add("site-a")
        await publish_status(conn, prefix, helpers.status())

        async def recorded() -> bool:
            return hub.obs.get(CP1) is not None

        await helpers.eventually(recorded, within=20.0)
    assert not missing("site-a", logging.WARNING)


async def test_a_site_that_appears_is_consumed(conn: bus.Connection, topology: str) -> None:
    known = ["site-a"]
    hub = new_hub(conn, topology, sites=known)
    b1 = Coordinates("site-b", "tenants", "cp1")
    hub.mapped.add(b1)
    async with running(hub):
        await publish_status(conn, topology, helpers.status(site="site-b"))
        await publish_status(conn, topology, helpers.status())

        async def a_recorded() -> bool:
            return hub.obs.get(CP1) is not None

        await helpers.eventually(a_recorded)
        site_b = streams.hub_consumer("site-b", prefix=topology)
        state = await bus.consumer_info(conn, site_b.stream, site_b.durable_name)
        assert (state.num_pending, hub.obs.get(b1)) == (1, None)  # site-b is not known yet

        known.append("site-b")

        async def b_recorded() -> bool:
            return hub.obs.get(b1) is not None

        await helpers.eventually(b_recorded)


async def test_open_latest_fetches_records_and_opens_the_box_on_the_subject(
    conn: bus.Connection, topology: str
) -> None:
    """Fetch, open, write: the box is read from the stream whenever it is written,
    including one an earlier process acknowledged; what it finds there is recorded."""
    first = new_hub(conn, topology)
    async with running(first):
        seq = await publish_sealed(conn, topology, sealed_to(HUB))

        async def caught_up() -> bool:
            held = first.obs.get(CP1)
            return held is not None and held.sealed_seq == seq

        await helpers.eventually(caught_up)
        await settled(conn, topology)  # acknowledged by this process

    # Another process, whose consumer redelivers nothing: the box is still on its subject.
    hub = new_hub(conn, topology)
    opened = await hub.intake.open_latest(CP1)
    assert opened is not None and opened[1] == PAYLOAD
    held = hub.obs.get(CP1)
    assert held is not None and (held.sealed_seq, held.sealed) == (seq, observations.SealedRef.of(opened[0]))

    # A newer box than the one held: recorded, and it is the one opened.
    newer = sealed_to(HUB, plaintext=messages.encode(msgspec.structs.replace(PAYLOAD, kubeconfig="renewed")))
    newer_seq = await publish_sealed(conn, topology, newer)
    opened = await hub.intake.open_latest(CP1)
    assert opened is not None and opened[1].kubeconfig == "renewed"
    held = hub.obs.get(CP1)
    assert held is not None
    assert (held.sealed_seq, held.sealed) == (newer_seq, observations.SealedRef.of(newer))

    # One that does not open: recorded with why, nothing returned.
    stranger_seq = await publish_sealed(conn, topology, sealed_to(STRANGER))
    assert await hub.intake.open_latest(CP1) is None
    held = hub.obs.get(CP1)
    assert held is not None and held.sealed_seq == stranger_seq and held.secrets_error is not None
    assert hub.rejected(subjects.Kind.SECRET, "DecryptFailed") == 1.0

    # Purged behind the hub's back: nothing to write until the site sends a box again.
    await bus.purge_subject(
        conn, streams.site_stream_name("site-a", prefix=topology), subjects.secret(*CP1, prefix=topology)
    )
    assert await hub.intake.open_latest(CP1) is None
    held = hub.obs.get(CP1)
    assert held is not None
    assert (held.sealed, held.secrets_error, held.sealed_seq) == (None, None, stranger_seq)


async def handle_batch(conn: bus.Connection, topology: str, hub: Hub, n: int) -> streams.ConsumerDef:
    """Fetch ``n`` messages of site-a's stream and hand them to the hub's ingest together."""
    d = streams.hub_consumer("site-a", prefix=topology)
    consumer = await bus.bind(conn, d)
    try:
        batch: list[bus.Delivery] = []
        while len(batch) < n:
            batch.extend(await consumer.fetch(16, timeout=5))
        await hub.ingest.handle(*batch)
    finally:
        await consumer.unsubscribe()
    return d


async def test_a_batch_is_recorded_in_order_and_nothing_waits_for_an_ack(
    conn: bus.Connection, topology: str
) -> None:
    """Several messages handled together: each recorded in order, the garbage among them counted
    and dropped; the consumer has nothing pending nor waiting for an ack."""
    hub = new_hub(conn, topology)
    await publish(conn, subjects.status("site-a", "tenants", "cp2", prefix=topology), b"not json")
    ready = await publish_status(conn, topology, helpers.status(phase="Ready"))
    box = await publish_sealed(conn, topology, sealed_to(HUB))
    d = await handle_batch(conn, topology, hub, 3)
    held = hub.obs.get(CP1)
    assert held is not None and held.status is not None
    assert (held.status.phase, held.status_seq, held.sealed_seq) == ("Ready", ready, box)
    assert hub.rejected(subjects.Kind.STATUS, "DecodeError") == 1.0
    assert hub.changes == [CP1, CP1]
    state = await bus.consumer_info(conn, d.stream, d.durable_name)
    assert (state.num_pending, state.num_ack_pending, state.ack_floor_stream_seq) == (0, 0, box)


async def test_a_message_the_hub_fails_on_holds_back_nothing(conn: bus.Connection, topology: str) -> None:
    """A bug while recording one message (here the RKCP lookup raising for cp2): it is counted
    and dropped, the others of its batch are recorded, nothing is pending."""
    hub = new_hub(conn, topology)

    def maps(coords: Coordinates) -> bool:
        if coords == CP2:
            raise RuntimeError("a bug")
        return coords == CP1

    hub.ingest.deps = dataclasses.replace(hub.ingest.deps, maps=maps)
    await publish_status(conn, topology, helpers.status(name="cp2"))
    ready = await publish_status(conn, topology, helpers.status(phase="Ready"))
    d = await handle_batch(conn, topology, hub, 2)
    held = hub.obs.get(CP1)
    assert held is not None and held.status is not None and held.status_seq == ready
    assert hub.rejected(subjects.Kind.STATUS, ingest.INTERNAL_ERROR) == 1.0
    state = await bus.consumer_info(conn, d.stream, d.durable_name)
    assert (state.num_pending, state.num_ack_pending) == (0, 0)
