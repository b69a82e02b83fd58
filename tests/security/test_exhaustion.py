"""One site tries to fill the NATS store and the hub's memory.

Real processes: nats-server configured by ``nats-config`` (sites added by ``site add``) and
``kamaji-broker hub`` with a per-site quota of 200 messages and 8 MiB. site-a, with its own
credentials on its own subjects, publishes the attack (150 statuses and 150 valid
sealed boxes of ~0.5 MB on distinct subjects), then near-limit valid boxes and then small
statuses on distinct subjects until the server refuses. Before the per-site quotas all of it was stored
(the store grew by ~180 MB) and the hub opened and kept it (its RSS grew by ~250 MB).

Prints the figures as one JSON line (``pytest -s`` shows it; bench/exhaustion.py prints the
same without pytest), including the hub's peak RSS.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from protocol import streams
from tests.security import exhaustion_support as ex
from tests.security import intake_support
from tests.security.intake_support import Stand


@pytest.fixture
async def stand(tmp_path: Path) -> AsyncIterator[Stand]:
    async with intake_support.stand(tmp_path, hub_flags=ex.HUB_FLAGS) as s:
        yield s


async def test_one_site_cannot_fill_the_store_or_the_hub(stand: Stand) -> None:
    before_b = await stand.last_seq("site-b")
    outcome = await ex.attack(stand)
    print(json.dumps({"case": "exhaustion", **outcome.as_json()}))

    # Every 0.5 MB message was refused before it reached the store (max_payload, 128 KiB).
    assert outcome.big_refused == {"max_payload": 2 * ex.ATTACK_COUNT}
    assert outcome.big_stored == 0
    # Valid boxes just under max_msg_size fill the bytes quota; then small statuses on new
    # subjects fill what is left; the refusals name their limit.
    assert outcome.boxes_refused_by == "max_bytes"
    assert outcome.boxes_stored > 100
    assert outcome.small_refused_by in ("max_bytes", "max_msgs")
    assert f"({outcome.small_refused_by}): maximum" in outcome.refusal_text
    # The store holds at most the site's quota.
    assert outcome.stream_messages == outcome.boxes_stored + outcome.small_stored <= ex.SITE_MAX_MSGS
    assert outcome.stream_bytes <= ex.SITE_MAX_BYTES
    # A full stream still takes updates of subjects it holds: existing control planes report.
    assert outcome.update_stored
    # The hub's memory stayed bounded (a bound from configuration, not a timing).
    allowance = ex.rss_allowance(sites=len(intake_support.SITES), max_msg_size=streams.MAX_MSG_SIZE)
    assert outcome.rss_peak <= outcome.rss_before + allowance

    # site-b is untouched: its stream takes its messages and the hub processes them.
    await ex.site_b_still_served(stand)
    assert await stand.last_seq("site-b") == before_b + 2
    assert await stand.alive()
