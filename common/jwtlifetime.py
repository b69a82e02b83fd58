"""How long a NATS user JWT has left, and the one rule for when that is too little.

The agent's ``/readyz`` (``agent.credential.keeper``) and ``kamaji-broker doctor`` judge a credential
by the same rule: not ready (doctor: WARN) once less than ``CLOSE_FRACTION`` of its lifetime is
left, not usable once expired. Pure: ``now`` is a unix timestamp passed in.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Final

from protocol import natsjwt

CLOSE_FRACTION: Final = 0.1
"""Less than this fraction of the JWT's lifetime left (or none): /readyz says the credential is
about to lapse. Renewal starts far earlier (``agent.credential.state.renew_at``); reaching this
means it keeps failing."""


@dataclass(frozen=True)
class Lifetime:
    """A JWT's issue and expiry times (unix seconds)."""

    issued: float
    expires: float


def lifetime_of(claims: natsjwt.Claims) -> Lifetime:
    """A JWT without an expiry (never minted by the hub) is treated as lasting forever."""
    return Lifetime(issued=float(claims.iat), expires=float(claims.exp) if claims.exp else float("inf"))


def readiness(life: Lifetime, *, now: float, failure: str = "") -> tuple[bool, str]:
    """The credential's readiness check: not ready once less than ``CLOSE_FRACTION`` of the
    lifetime is left (renewal has kept failing) or it expired; the last renewal failure is
    said either way."""
    tail = f"; renewal failing: {failure}" if failure else ""
    if life.expires == float("inf"):
        return True, f"JWT without expiry{tail}"
    left = life.expires - now
    if left <= 0:
        return False, f"JWT expired at {iso(life.expires)}{tail}"
    total = max(life.expires - life.issued, 1e-9)
    text = f"JWT valid until {iso(life.expires)} ({left:.0f}s left){tail}"
    if left / total < CLOSE_FRACTION:
        return False, f"expiring soon: {text}"
    return True, text


def next_change(life: Lifetime, *, now: float) -> float:
    """When ``readiness`` next changes on its own (the close threshold, then the expiry): the
    renewal loop looks again by then, so /readyz never lags behind a credential that lapses."""
    total = life.expires - life.issued
    for at in (life.expires - CLOSE_FRACTION * total, life.expires):
        if now < at:
            return at
    return float("inf")


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat(timespec="seconds")
