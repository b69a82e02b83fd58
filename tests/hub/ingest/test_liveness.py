"""hub.ingest.liveness: heartbeat freshness and backlogs (tables), and the poll on the real nats-server."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import uuid

import msgspec
import pytest

from common import bus
from hub import metrics as hub_metrics
from hub.ingest import heartbeats, liveness
from protocol import messages, streams, subjects
from tests import helpers

T0 = helpers.T0
S = dt.timedelta(seconds=1)


def beat(*, site: str = "site-a", sent_at: dt.datetime = T0) -> messages.Heartbeat:
    return messages.Heartbeat(site=site, started_at=T0, sent_at=sent_at)


@pytest.mark.parametrize(
    ("received", "now", "interval", "connected"),
    [
        pytest.param(None, T0, 10.0, False, id="never"),
        pytest.param(T0, T0, 10.0, True, id="just-now"),
        pytest.param(T0, T0 + 30 * S, 10.0, True, id="three-intervals"),
        pytest.param(T0, T0 + 31 * S, 10.0, False, id="past-three-intervals"),
        pytest.param(T0, T0 + 31 * S, 20.0, True, id="longer-interval"),
        pytest.param(T0 + 5 * S, T0, 10.0, True, id="received-after-now"),
    ],
)
def test_connected(received: dt.datetime | None, now: dt.datetime, interval: float, connected: bool) -> None:
    s = liveness.Sites()
    if received is not None:
        s.record_heartbeat("site-a", beat(), seq=1, received_at=received)
    assert s.connected("site-a", now, interval) is connected
    assert s.snapshot("site-a", now, interval=interval).connected is connected


@pytest.mark.parametrize(
    ("stored_at", "sent_at", "first_sight", "expected"),
    [
        pytest.param(T0 - 5 * S, T0 - 60 * S, True, T0 - 5 * S, id="server-time-wins"),
        pytest.param(T0 + 5 * S, T0, True, T0, id="server-time-never-in-future"),
        pytest.param(None, T0 - 3600 * S, True, T0 - 3600 * S, id="after-start-old-heartbeat-is-old"),
        pytest.param(None, T0 + 60 * S, True, T0, id="after-start-site-clock-ahead"),
        pytest.param(None, T0 - 3600 * S, False, T0, id="new-since-last-poll-is-now"),
        pytest.param(
            T0 - 120 * S, T0 - 120 * S, False, T0, id="new-since-last-poll-is-now-whatever-the-server-clock"
        ),
    ],
)
def test_arrival(
    stored_at: dt.datetime | None, sent_at: dt.datetime, first_sight: bool, expected: dt.datetime
) -> None:
    assert liveness.arrival(stored_at=stored_at, sent_at=sent_at, first_sight=first_sight, now=T0) == expected


def test_heartbeats_are_ordered_by_sequence() -> None:
    s = liveness.Sites()
    assert s.record_heartbeat("site-a", beat(sent_at=T0), seq=5, received_at=T0)
    assert not s.record_heartbeat("site-a", beat(sent_at=T0 - S), seq=4, received_at=T0 + S)
    assert not s.record_heartbeat("site-a", beat(sent_at=T0), seq=5, received_at=T0 + S)
    s.record_rejected("site-a", 6)
    assert s.seen_seq("site-a") == 6
    snap = s.snapshot("site-a", T0)
    assert (snap.last_heartbeat_time, snap.heartbeat) == (T0, beat(sent_at=T0))


def test_changed_reports_connected_and_backlog_transitions() -> None:
    """A backlog that appears or drains is the Site's news alone: no control plane shows it."""
    s = liveness.Sites()
    steps = []
    s.record_heartbeat("site-a", beat(), seq=1, received_at=T0)
    steps.append(s.changed("site-a", T0))  # first look: connected, backlog unknown
    steps.append(s.changed("site-a", T0 + 10 * S))  # still connected
    s.record_backlog("site-a", 4)
    steps.append(s.changed("site-a", T0 + 10 * S))  # backlog known
    s.record_backlog("site-a", 4)
    steps.append(s.changed("site-a", T0 + 20 * S))  # nothing new
    s.record_backlog("site-a", 7)
    steps.append(s.changed("site-a", T0 + 20 * S))  # only its size moved: not worth a look
    s.record_backlog("site-a", 0)
    steps.append(s.changed("site-a", T0 + 20 * S))  # drained
    steps.append(s.changed("site-a", T0 + 40 * S))  # aged out: disconnected
    none, site, planes = liveness.Change.NONE, liveness.Change.SITE, liveness.Change.CONTROL_PLANES
    assert steps == [planes, none, site, none, none, site, planes]
    assert s.snapshot("site-a", T0 + 40 * S) == liveness.SiteSnapshot(
        site="site-a", connected=False, last_heartbeat_time=T0, backlog=0, heartbeat=beat()
    )


@pytest.mark.parametrize(
    ("field", "value", "news"),
    [
        pytest.param("sent_at", T0 + 10 * S, False, id="only-its-time-moved"),
        pytest.param("managed", 7, False, id="only-a-count-moved"),
        pytest.param("agent_version", "v2", True, id="agent-upgraded"),
        pytest.param("trusted_key_ids", ("k2",), True, id="trusts-other-hub-keys"),
        pytest.param("kamaji_detected", True, True, id="found-kamaji"),
    ],
)
def test_changed_reports_what_the_agent_says_of_itself(field: str, value: object, news: bool) -> None:
    """The Site's status (version, trusted keys) and the RKCPs' decisions (Kamaji found) show it:
    without this, it would wait for the Site's next resync, minutes later."""
    s = liveness.Sites()
    s.record_heartbeat("site-a", beat(), seq=1, received_at=T0)
    assert s.changed("site-a", T0)
    later = msgspec.structs.replace(beat(), **{field: value})
    s.record_heartbeat("site-a", later, seq=2, received_at=T0 + 10 * S)
    assert (s.changed("site-a", T0 + 10 * S) is liveness.Change.CONTROL_PLANES) is news


@pytest.mark.parametrize(
    ("case", "second", "polled_at", "expected"),
    [
        # Polls every 5 s, heartbeats every 10 s (limit 30 s): the usual steps are no change.
        ("next heartbeat one poll later", 5, 5, False),
        ("next heartbeat at the limit", 30, 30, False),
        # The agent could not publish for a while (NATS restarted) and the polls fell on either
        # side of the gap: both saw the site connected, but in between it was not.
        ("next heartbeat past the limit", 31, 31, True),
        ("gap seen by no poll, reported once", 40, 40, True),
    ],
)
def test_changed_reports_a_gap_no_poll_saw(case: str, second: int, polled_at: int, expected: bool) -> None:
    s = liveness.Sites()
    s.record_heartbeat("site-a", beat(), seq=1, received_at=T0)
    assert s.changed("site-a", T0, interval=10.0)  # first look
    s.record_heartbeat("site-a", beat(), seq=2, received_at=T0 + second * S)
    assert bool(s.changed("site-a", T0 + polled_at * S, interval=10.0)) is expected, case
    assert not s.changed("site-a", T0 + polled_at * S, interval=10.0), f"{case}: reported once"


def backlog_sites(backlog: int | None, *, published: bool) -> liveness.Sites:
    s = liveness.Sites()
    s.record_backlog("site-a", backlog)
    if published:
        s.published_to("site-a")
    return s


@pytest.mark.parametrize(
    ("backlog", "published", "due"),
    [
        pytest.param(0, False, False, id="empty-and-nothing-published-since: no request"),
        pytest.param(0, True, True, id="published-to-since"),
        pytest.param(2, False, True, id="pending: read until it drains"),
        pytest.param(None, False, True, id="unknown (no consumer yet)"),
    ],
)
def test_backlog_due(backlog: int | None, published: bool, due: bool) -> None:
    assert backlog_sites(backlog, published=published).backlog_due("site-a") is due


def test_a_site_never_read_is_due_and_reading_it_settles_it() -> None:
    s = liveness.Sites()
    assert s.backlog_due("site-a")
    s.published_to("site-a")  # nothing known yet: still due, nothing recorded
    s.record_backlog("site-a", 0)
    assert not s.backlog_due("site-a")


def test_unknown_site_snapshot() -> None:
    assert liveness.Sites().snapshot("site-x", T0) == liveness.SiteSnapshot(
        site="site-x", connected=False, last_heartbeat_time=None, backlog=None
    )


# -- on the real nats-server -------------------------------------------------------------------


async def publish(conn: bus.Connection, subject: str, payload: bytes) -> None:
    await bus.publish(conn, subject, payload, msg_id=uuid.uuid4().hex)


def gauge(metrics: hub_metrics.Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


async def test_heartbeat_makes_a_site_connected_and_staleness_disconnects_it(
    conn: bus.Connection, topology: str
) -> None:
    s, metrics = liveness.Sites(), hub_metrics.Metrics()
    sent = dt.datetime.now(dt.UTC)
    await publish(conn, subjects.heartbeat("site-a", prefix=topology), messages.encode(beat(sent_at=sent)))

    changed = await heartbeats.poll(
        s, conn, names=["site-a"], prefix=topology, metrics=metrics, now=sent + 5 * S
    )
    assert changed == {"site-a": liveness.Change.CONTROL_PLANES}
    snap = s.snapshot("site-a", sent + 5 * S)
    assert snap.connected
    assert snap.heartbeat == beat(sent_at=sent)
    assert snap.last_heartbeat_time is not None
    assert gauge(metrics, "kb_hub_sites_connected") == 1.0
    assert gauge(metrics, "kb_hub_site_connected", site="site-a") == 1.0
    assert snap.last_heartbeat_time is not None
    age = (sent + 5 * S - snap.last_heartbeat_time).total_seconds()
    assert gauge(metrics, "kb_hub_site_heartbeat_age_seconds", site="site-a") == age

    # The same heartbeat, 40 s on: more than three 10 s intervals old.
    changed = await heartbeats.poll(
        s, conn, names=["site-a"], prefix=topology, metrics=metrics, now=sent + 40 * S
    )
    assert changed == {"site-a": liveness.Change.CONTROL_PLANES}
    assert not s.connected("site-a", sent + 40 * S)
    assert gauge(metrics, "kb_hub_sites_connected") == 0.0
    assert gauge(metrics, "kb_hub_site_connected", site="site-a") == 0.0
    assert gauge(metrics, "kb_hub_site_heartbeat_age_seconds", site="site-a") == pytest.approx(age + 35.0)


async def test_backlog_counts_intents_the_agent_has_not_acked(conn: bus.Connection, topology: str) -> None:
    s, metrics = liveness.Sites(), hub_metrics.Metrics()
    for name in ("cp1", "cp2", "cp3"):
        intent = helpers.intent(name=name)
        await publish(
            conn, subjects.intent("site-a", "tenants", name, prefix=topology), messages.encode(intent)
        )
    # The agent takes one and has not acked it yet: ack-pending counts too.
    consumer = await bus.bind(conn, streams.agent_consumer("site-a", prefix=topology))
    try:
        (_taken,) = await consumer.fetch(1, timeout=5.0)
        now = dt.datetime.now(dt.UTC)
        changed = await heartbeats.poll(
            s, conn, names=["site-a", "site-c"], prefix=topology, metrics=metrics, now=now
        )
    finally:
        await consumer.unsubscribe()
    assert s.snapshot("site-a", now).backlog == 3
    assert gauge(metrics, "kb_hub_site_backlog", site="site-a") == 3.0
    # site-c has no consumer (no topology for it): backlog unknown, no gauge sample.
    assert s.snapshot("site-c", now).backlog is None
    assert gauge(metrics, "kb_hub_site_backlog", site="site-c") is None
    assert sorted(changed) == ["site-a", "site-c"]
    assert gauge(metrics, "kb_hub_sites_connected") == 0.0
    # Never heard of: not connected, and no heartbeat age (no sample rather than a made-up one).
    assert gauge(metrics, "kb_hub_site_connected", site="site-c") == 0.0
    assert gauge(metrics, "kb_hub_site_heartbeat_age_seconds", site="site-c") is None

    # A site no longer named is forgotten with its gauges.
    await heartbeats.poll(s, conn, names=[], prefix=topology, metrics=metrics, now=now)
    for name in ("kb_hub_site_backlog", "kb_hub_site_connected"):
        assert gauge(metrics, name, site="site-a") is None, name
    assert s.sites() == frozenset()


async def test_garbage_heartbeat_is_counted_once_and_ignored(conn: bus.Connection, topology: str) -> None:
    s, metrics = liveness.Sites(), hub_metrics.Metrics()
    subject = subjects.heartbeat("site-a", prefix=topology)
    await publish(conn, subject, b"{not a heartbeat")
    now = dt.datetime.now(dt.UTC)
    for _ in range(2):
        await heartbeats.poll(s, conn, names=["site-a"], prefix=topology, metrics=metrics, now=now)
    stream = helpers.stream(subjects.Kind.SITE, topology)
    assert gauge(metrics, "kb_hub_bus_rejected_total", stream=stream, reason="DecodeError") == 1.0
    assert not s.connected("site-a", now)

    # The next ones come as the hub's consumer delivers them. One naming another site on
    # site-a's subject is not site-a's.
    def deliver(data: bytes, seq: int) -> None:
        heartbeats.delivered(
            s,
            "site-a",
            data,
            seq=seq,
            stored_at=now,
            stream=stream,
            subject=subject,
            metrics=metrics,
            now=now,
        )

    deliver(messages.encode(beat(site="site-b", sent_at=now)), 2)
    assert gauge(metrics, "kb_hub_bus_rejected_total", stream=stream, reason="CoordinatesMismatch") == 1.0
    assert not s.connected("site-a", now)
    deliver(messages.encode(beat(sent_at=now)), 3)
    assert s.connected("site-a", now)
    deliver(messages.encode(beat(sent_at=now)), 3)  # delivered again: nothing new
    assert s.seen_seq("site-a") == 3


async def test_run_announces_a_site_that_connects(conn: bus.Connection, topology: str) -> None:
    s, metrics = liveness.Sites(), hub_metrics.Metrics()
    announced: list[tuple[str, liveness.Change]] = []
    task = asyncio.create_task(
        heartbeats.run(
            s,
            conn,
            sites_provider=lambda: ["site-a"],
            prefix=topology,
            metrics=metrics,
            interval=0.05,
            on_change=lambda site, change: announced.append((site, change)),
        )
    )
    news = ("site-a", liveness.Change.CONTROL_PLANES)
    try:
        # First poll: known but silent (its consumer exists, so the backlog is 0).
        async def first() -> bool:
            return announced == [news]

        await helpers.eventually(first)
        assert not s.connected("site-a", dt.datetime.now(dt.UTC))

        beat_now = beat(sent_at=dt.datetime.now(dt.UTC))
        await publish(conn, subjects.heartbeat("site-a", prefix=topology), messages.encode(beat_now))

        async def connected() -> bool:
            return announced == [news, news]

        await helpers.eventually(connected)
        assert s.connected("site-a", dt.datetime.now(dt.UTC))
        assert gauge(metrics, "kb_hub_sites_connected") == 1.0
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
