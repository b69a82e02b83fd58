"""The Site status from what the hub observed of the site: pure, one setter per condition.

``new_status`` assembles ``Site.status`` (connected, last heartbeat, backlog, control planes,
agent version, trusted hub key ids) and its conditions; ``worth_writing`` keeps the writes
change-only: the heartbeat time alone moves every interval, so it is written only when it is
``HEARTBEAT_WRITE_INTERVAL`` newer than the stored one, or with any other change.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Final

from hub import conditions as c
from hub.api import site

HEARTBEAT_WRITE_INTERVAL: Final = 300.0
"""Seconds: how stale ``lastHeartbeatTime`` may get before it alone is worth a write, as a
kubelet reports an unchanged node status every 5 minutes. Without this, every site would cost
one API write per heartbeat (10 s); ``Connected`` changes at once, and the bus has the live
heartbeat (``kamaji-broker status --nats-url`` reads it there)."""


@dataclass(frozen=True)
class Facts:
    generation: int
    connected: bool | None
    """None: no heartbeat ever seen."""
    last_heartbeat_time: dt.datetime | None
    backlog: int | None
    control_planes: int
    agent_version: str | None
    trusted_key_ids: tuple[str, ...]
    """From the heartbeat; empty when none came or the agent is too old to report them."""
    signing_key_id: str
    """The key id the hub signs intents with."""


def _set(status: site.SiteStatus, cond: c.Condition, now: dt.datetime) -> None:
    status.conditions = c.set_condition(status.conditions, cond, now=now)


def set_connected_condition(status: site.SiteStatus, f: Facts, *, now: dt.datetime) -> None:
    g = f.generation
    if f.connected is None:
        cond = c.new_condition(
            site.CONNECTED, c.UNKNOWN, "NoHeartbeat", "no heartbeat from the site's agent yet",
            observed_generation=g, now=now,
        )  # fmt: skip
    elif f.connected:
        cond = c.new_condition(
            site.CONNECTED, c.TRUE, "HeartbeatReceived", "", observed_generation=g, now=now
        )
    else:
        when = c.moment(f.last_heartbeat_time)
        cond = c.new_condition(
            site.CONNECTED, c.FALSE, "HeartbeatMissing", f"last heartbeat {when}",
            observed_generation=g, now=now,
        )  # fmt: skip
    _set(status, cond, now)


def set_signing_key_trusted_condition(status: site.SiteStatus, f: Facts, *, now: dt.datetime) -> None:
    g = f.generation
    if not f.trusted_key_ids:
        cond = c.new_condition(
            site.SIGNING_KEY_TRUSTED, c.UNKNOWN, "NotReported",
            "the agent has not reported the hub keys it trusts (no heartbeat yet, or an older agent)",
            observed_generation=g, now=now,
        )  # fmt: skip
    elif f.signing_key_id in f.trusted_key_ids:
        cond = c.new_condition(
            site.SIGNING_KEY_TRUSTED, c.TRUE, "Trusted",
            f"the agent trusts signing key {f.signing_key_id}",
            observed_generation=g, now=now,
        )  # fmt: skip
    else:
        cond = c.new_condition(
            site.SIGNING_KEY_TRUSTED, c.FALSE, "NotTrusted",
            f"the hub signs with key {f.signing_key_id}, which the agent does not trust "
            f"(it trusts {', '.join(f.trusted_key_ids)}): it refuses every intent; give it the current "
            "hub-public-keys.json",
            observed_generation=g, now=now,
        )  # fmt: skip
    _set(status, cond, now)


def new_status(previous: site.SiteStatus, f: Facts, *, now: dt.datetime) -> site.SiteStatus:
    status = previous.model_copy(deep=True)
    status.connected = f.connected
    # Whole seconds, like every Kubernetes timestamp (metav1.Time): `kubectl get sites` prints it.
    status.last_heartbeat_time = (
        f.last_heartbeat_time.replace(microsecond=0) if f.last_heartbeat_time else None
    )
    status.backlog = f.backlog
    status.control_planes = f.control_planes
    status.agent_version = f.agent_version
    status.trusted_key_ids = list(f.trusted_key_ids)
    status.observed_generation = f.generation
    set_connected_condition(status, f, now=now)
    set_signing_key_trusted_condition(status, f, now=now)
    return status


def worth_writing(stored: site.SiteStatus, new: site.SiteStatus) -> bool:
    """Whether ``new`` differs from ``stored`` by more than a heartbeat time moving a little."""
    if stored.model_copy(update={"last_heartbeat_time": None}) != new.model_copy(
        update={"last_heartbeat_time": None}
    ):
        return True
    before, after = stored.last_heartbeat_time, new.last_heartbeat_time
    if before is None or after is None:
        return before != after
    return (after - before).total_seconds() >= HEARTBEAT_WRITE_INTERVAL


def counts_only(stored: site.SiteStatus, new: site.SiteStatus) -> bool:
    """Whether ``new`` differs from ``stored`` only in its counts (control planes placed there,
    the backlog) and heartbeat time: information a burst moves with every step, written at a
    pace; any other change (connected, the agent's version and keys, a condition) is news."""
    moving = {"control_planes": None, "backlog": None, "last_heartbeat_time": None}
    return stored.model_copy(update=moving) == new.model_copy(update=moving)


def counts_wait(*, still_for: float, written_ago: float, quiet: float, interval: float) -> float:
    """Seconds before a status in which only the counts moved is written: none once they have
    stood still for ``quiet`` seconds, or ``interval`` seconds after the last write while they
    keep moving (a burst of placements at the site)."""
    return max(0.0, min(quiet - still_for, interval - written_ago))
