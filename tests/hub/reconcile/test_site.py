"""hub.reconcile.site: the Site status and its conditions, by table."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest

from hub import conditions as c
from hub.api import site
from hub.reconcile import site as site_status

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
FACTS = site_status.Facts(
    generation=2, connected=True, last_heartbeat_time=NOW, backlog=0, control_planes=3,
    agent_version="0.2.0", trusted_key_ids=("k1", "k2"), signing_key_id="k1",
)  # fmt: skip

CASES = [
    ("connected, key trusted", {}, ("True", "HeartbeatReceived"), ("True", "Trusted")),
    ("no heartbeat yet", {"connected": None, "last_heartbeat_time": None, "agent_version": None,
                          "trusted_key_ids": ()}, ("Unknown", "NoHeartbeat"), ("Unknown", "NotReported")),
    ("heartbeat missing", {"connected": False}, ("False", "HeartbeatMissing"), ("True", "Trusted")),
    ("the agent does not trust the hub's key", {"trusted_key_ids": ("k9",)}, ("True", "HeartbeatReceived"),
     ("False", "NotTrusted")),
    ("an older agent reports no keys", {"trusted_key_ids": ()}, ("True", "HeartbeatReceived"),
     ("Unknown", "NotReported")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "connected", "trusted"), [x[1:] for x in CASES], ids=[x[0] for x in CASES]
)
def test_new_status(changes: dict[str, object], connected: tuple[str, str], trusted: tuple[str, str]) -> None:
    f = dataclasses.replace(FACTS, **changes)  # type: ignore[arg-type]
    status = site_status.new_status(site.SiteStatus(), f, now=NOW)
    got = {x.type: (x.status, x.reason) for x in status.conditions}
    assert got == {site.CONNECTED: connected, site.SIGNING_KEY_TRUSTED: trusted}
    assert (status.connected, status.control_planes, status.observed_generation) == (f.connected, 3, 2)
    assert status.trusted_key_ids == list(f.trusted_key_ids)
    assert all(x.observed_generation == 2 for x in status.conditions)


def test_the_untrusted_key_message_names_both_key_sets() -> None:
    f = dataclasses.replace(FACTS, trusted_key_ids=("k9",))
    cond = c.get(site.SiteStatus().conditions, "x")
    assert cond is None
    status = site_status.new_status(site.SiteStatus(), f, now=NOW)
    found = c.get(status.conditions, site.SIGNING_KEY_TRUSTED)
    assert found is not None and "k1" in found.message and "k9" in found.message


WRITES = [
    ("nothing changed", {}, False),
    ("heartbeat a little newer", {"last_heartbeat_time": NOW + dt.timedelta(seconds=290)}, False),
    ("heartbeat much newer", {"last_heartbeat_time": NOW + dt.timedelta(seconds=301)}, True),
    ("connectedness changed", {"connected": False}, True),
    ("backlog changed", {"backlog": 4}, True),
    ("a control plane more", {"control_planes": 4}, True),
    ("new agent version", {"agent_version": "0.3.0"}, True),
    ("first heartbeat", {"first": True}, True),
]


@pytest.mark.parametrize(("changes", "write"), [x[1:] for x in WRITES], ids=[x[0] for x in WRITES])
def test_worth_writing_is_change_only(changes: dict[str, object], write: bool) -> None:
    first = changes.pop("first", False)
    base = dataclasses.replace(FACTS, connected=None, last_heartbeat_time=None) if first else FACTS
    stored = site_status.new_status(site.SiteStatus(), base, now=NOW)
    new = site_status.new_status(stored, dataclasses.replace(FACTS, **changes), now=NOW)  # type: ignore[arg-type]
    assert site_status.worth_writing(stored, new) is write
    assert site_status.worth_writing(new, new) is False


def test_the_heartbeat_time_is_written_in_whole_seconds() -> None:
    f = dataclasses.replace(FACTS, last_heartbeat_time=NOW.replace(microsecond=171902))
    assert site_status.new_status(site.SiteStatus(), f, now=NOW).last_heartbeat_time == NOW


@pytest.mark.parametrize(
    ("change", "counts"),
    [
        pytest.param({"control_planes": 9}, True, id="placed-there"),
        pytest.param({"backlog": 7, "control_planes": 4}, True, id="backlog-and-count"),
        pytest.param({"last_heartbeat_time": NOW + dt.timedelta(seconds=400)}, True, id="heartbeat-time"),
        pytest.param({"agent_version": "v9"}, False, id="agent-upgraded"),
        pytest.param({"connected": False}, False, id="disconnected"),
    ],
)
def test_only_counts_moved(change: dict[str, Any], counts: bool) -> None:
    stored = site_status.new_status(site.SiteStatus(), FACTS, now=NOW)
    new = site_status.new_status(stored, dataclasses.replace(FACTS, **change), now=NOW)
    assert site_status.counts_only(stored, new) is counts


@pytest.mark.parametrize(
    ("still_for", "written_ago", "wait"),
    [
        pytest.param(0.0, 600.0, 0.0, id="first-move-after-a-quiet-while"),
        pytest.param(0.0, 1.0, 2.0, id="just-moved-just-written"),
        pytest.param(1.5, 10.0, 0.5, id="standing-still-nearly-long-enough"),
        pytest.param(2.0, 10.0, 0.0, id="stood-still-long-enough"),
        pytest.param(0.3, 29.0, 1.0, id="still-moving-interval-nearly-over"),
        pytest.param(0.3, 30.0, 0.0, id="still-moving-interval-over"),
    ],
)
def test_counts_wait(still_for: float, written_ago: float, wait: float) -> None:
    got = site_status.counts_wait(still_for=still_for, written_ago=written_ago, quiet=2.0, interval=30.0)
    assert got == pytest.approx(wait)
