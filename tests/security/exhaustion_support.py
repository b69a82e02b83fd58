"""The exhaustion attack as one function: what site-a does with its own
credentials to fill the store and the hub's memory, and what came of it.

Used by tests/security/test_exhaustion.py (which asserts) and bench/exhaustion.py (which prints
the figures as JSON). The hub runs with a small quota so the attack reaches it quickly:
``SITE_MAX_MSGS`` messages and ``SITE_MAX_BYTES`` bytes per site, messages of at most
``streams.MAX_MSG_SIZE``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter
from typing import Any

from common import bus
from common.bus import errors
from protocol import messages, streams, subjects
from tests import helpers
from tests.security.intake_support import NS, Stand

MIB = 1024 * 1024
SITE_MAX_MSGS = 200
SITE_MAX_BYTES = 8 * MIB
HUB_FLAGS = ("--site-max-msgs", str(SITE_MAX_MSGS), "--site-max-bytes", str(SITE_MAX_BYTES))
HUB_FETCH_BATCH = 16
"""``hub.ingest.consumer.Settings.batch``: messages in flight per site."""

HALF_MIB = 512 * 1024
"""The attack: 150 statuses and 150 sealed boxes of about 0.5 MB."""
ATTACK_COUNT = 150
NEAR_MAX_PADDING = 44 * 1024
"""Plaintext padding that makes a sealed box of about 60 KiB on the wire: just under the limit."""


def rss_allowance(*, sites: int, max_msg_size: int = streams.MAX_MSG_SIZE) -> int:
    """What the hub may grow by, whatever a site sends: the messages in flight (a batch per site,
    each at most ``max_msg_size``, held decoded as well as raw: x2), plus 32 MiB for the
    allocator's arenas and the client's buffers. Generous by design: the old hub grew by the
    size of everything stored (hundreds of MiB)."""
    return 2 * sites * HUB_FETCH_BATCH * max_msg_size + 32 * MIB


@dataclasses.dataclass
class Outcome:
    big_refused: Counter[str]
    """The 0.5 MB statuses and boxes, by the limit that refused them."""
    big_stored: int
    boxes_stored: int
    boxes_refused_by: str
    small_stored: int
    small_refused_by: str
    refusal_text: str
    stream_messages: int
    stream_bytes: int
    rss_before: int
    rss_peak: int
    rss_after: int
    update_stored: bool
    """A box on a subject site-a already had was stored though the stream was full."""

    def as_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["big_refused"] = dict(self.big_refused)
        return d


async def _publish_until_refused(
    s: Stand, make: Any, *, start: int, limit: int = 10_000
) -> tuple[int, errors.QuotaExceeded]:
    """Publish ``make(i)`` for i = start, start+1, ... until the server refuses one."""
    for i in range(start, start + limit):
        subject, data = make(i)
        try:
            await s.publish("site-a", subject, data)
        except errors.QuotaExceeded as exc:
            return i - start, exc
    raise AssertionError(f"the server never refused site-a after {limit} messages")


async def attack(s: Stand) -> Outcome:
    rss_before, _ = s.hub_rss()
    big_refused: Counter[str] = Counter()
    big_stored = 0
    for i in range(ATTACK_COUNT):
        status = s.status(name=f"big-{i}", message="x" * HALF_MIB)
        box = s.sealed(name=f"big-{i}", padding=HALF_MIB)
        for subject, data in (
            (subjects.status("site-a", NS, f"big-{i}"), messages.encode(status)),
            (subjects.secret("site-a", NS, f"big-{i}"), messages.encode(box)),
        ):
            try:
                await s.publish("site-a", subject, data)
                big_stored += 1
            except errors.QuotaExceeded as exc:
                big_refused[exc.limit] += 1

    def near_max_box(i: int) -> tuple[str, bytes]:
        box = s.sealed(name=f"fill-{i}", padding=NEAR_MAX_PADDING)
        return subjects.secret("site-a", NS, f"fill-{i}"), messages.encode(box)

    def small_status(i: int) -> tuple[str, bytes]:
        return subjects.status("site-a", NS, f"small-{i}"), messages.encode(s.status(name=f"small-{i}"))

    boxes, boxes_refusal = await _publish_until_refused(s, near_max_box, start=0)
    small, small_refusal = await _publish_until_refused(s, small_status, start=0)
    # An existing control plane's box, sealed again (a key rotation) and no larger than the one
    # it replaces, is an update of a subject already stored: the full stream still takes it.
    update = s.sealed(name="fill-0", padding=NEAR_MAX_PADDING - 1024)
    ack = await s.publish("site-a", subjects.secret("site-a", NS, "fill-0"), messages.encode(update))

    # The hub has read everything site-a stored (its consumer has nothing pending or unacked).
    consumer = streams.hub_consumer("site-a")

    async def drained() -> bool:
        state = await bus.consumer_info(s.reader, consumer.stream, consumer.durable_name)
        return state.num_pending == 0 and state.num_ack_pending == 0

    await helpers.eventually(drained, within=60, every=0.2)
    stream_messages, stream_bytes = await s.stream_state("site-a")
    rss_after, rss_peak = s.hub_rss()
    return Outcome(
        big_refused=big_refused,
        big_stored=big_stored,
        boxes_stored=boxes,
        boxes_refused_by=boxes_refusal.limit,
        small_stored=small,
        small_refused_by=small_refusal.limit,
        refusal_text=str(small_refusal),
        stream_messages=stream_messages,
        stream_bytes=stream_bytes,
        rss_before=rss_before,
        rss_peak=rss_peak,
        rss_after=rss_after,
        update_stored=ack.seq > 0,
    )


async def site_b_still_served(s: Stand) -> None:
    """site-b's heartbeat and status are stored and the hub shows both on b-1."""
    beat = messages.Heartbeat(
        site="site-b", agent_version="0.1.0", started_at=helpers.T0, sent_at=dt.datetime.now(dt.UTC)
    )
    await s.publish("site-b", subjects.heartbeat("site-b"), messages.encode(beat))

    async def connected() -> bool:
        conditions = ((await s.rkcp("site-b")).get("status") or {}).get("conditions") or []
        return any(c.get("type") == "SiteConnected" and c.get("status") == "True" for c in conditions)

    await helpers.eventually(connected, within=30, every=0.2)
    await s.site_b_processed("after-exhaustion")
