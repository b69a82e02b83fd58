"""agent.credential.state: the identity Secret read and written, a stored JWT judged, when to
renew, what /readyz says. Tables; real JWTs signed with throw-away keys."""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

import msgspec
import pytest

from agent.credential import state
from protocol import credentials, natsjwt

ACCOUNT = natsjwt.new_seed("account")
SEED = natsjwt.new_seed("user")
OTHER = natsjwt.new_seed("user")
NOW = 1_800_000_000.0


def jwt(seed: bytes = SEED, *, iat: float = NOW - 100, exp: float = NOW + 200) -> str:
    issued = dt.datetime.fromtimestamp(iat, dt.UTC)
    claims = credentials.site_user(
        "site-a", natsjwt.public_of(seed), account=natsjwt.public_of(ACCOUNT), now=issued
    )
    return natsjwt.encode(msgspec.structs.replace(claims, exp=int(exp)), natsjwt.key_pair(ACCOUNT))


def secret(data: dict[str, str], version: str = "7") -> dict[str, Any]:
    return {"metadata": {"resourceVersion": version}, "data": data}


def b64(text: str | bytes) -> str:
    return base64.b64encode(text if isinstance(text, bytes) else text.encode()).decode()


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        (None, state.Stored(exists=False)),
        (secret({}), state.Stored(exists=True, resource_version="7")),
        (secret({"seed": b64(SEED)}), state.Stored(exists=True, seed=SEED, resource_version="7")),
        (secret({"seed": b64("not a seed")}), state.Stored(exists=True, resource_version="7")),
        (secret({"seed": "%%%"}), state.Stored(exists=True, resource_version="7")),
        (
            secret({"seed": b64(SEED), "jwt": b64("a.b.c")}),
            state.Stored(exists=True, seed=SEED, jwt="a.b.c", resource_version="7"),
        ),
    ],
    ids=["absent", "empty", "seed", "bad-seed", "not-base64", "seed-and-jwt"],
)
def test_read(found: dict[str, Any] | None, expected: state.Stored) -> None:
    assert state.read(found) == expected


def test_body_round_trips_and_keeps_the_resource_version() -> None:
    body = state.body("ns", "identity", seed=SEED, jwt="a.b.c", resource_version="9")
    assert body["metadata"]["namespace"] == "ns" and body["metadata"]["resourceVersion"] == "9"
    assert state.read(body) == state.Stored(exists=True, seed=SEED, jwt="a.b.c", resource_version="9")
    fresh = state.body("ns", "identity", seed=SEED, jwt=None, resource_version=None)
    assert "resourceVersion" not in fresh["metadata"] and set(fresh["data"]) == {"seed"}


@pytest.mark.parametrize(
    ("stored", "why"),
    [
        (state.Stored(exists=False), "no seed"),
        (state.Stored(exists=True, seed=SEED), "no JWT yet"),
        (state.Stored(exists=True, seed=SEED, jwt="a.b.c"), "unreadable"),
        (state.Stored(exists=True, seed=SEED, jwt=jwt(OTHER)), "for another key"),
        (state.Stored(exists=True, seed=SEED, jwt=jwt(exp=NOW - 1)), "expired at"),
        (state.Stored(exists=True, seed=SEED, jwt=jwt()), "valid"),
    ],
    ids=["nothing", "seed-only", "garbage", "other-key", "expired", "valid"],
)
def test_usable(stored: state.Stored, why: str) -> None:
    life, reason = state.usable(stored, now=NOW)
    assert why in reason
    assert (life is not None) == (why == "valid")
    if life is not None:
        assert life == state.Lifetime(issued=int(NOW - 100), expires=int(NOW + 200))


@pytest.mark.parametrize(
    ("life", "renew_before", "at"),
    [
        (state.Lifetime(0, 300), None, 200),
        (state.Lifetime(0, 300), 30, 270),
        (state.Lifetime(0, 300), 900, 0),
        (state.Lifetime(0, float("inf")), None, float("inf")),
    ],
    ids=["a-third-left", "configured", "longer-than-lifetime", "no-expiry"],
)
def test_renew_at(life: state.Lifetime, renew_before: float | None, at: float) -> None:
    assert state.renew_at(life, renew_before=renew_before) == at


@pytest.mark.parametrize(
    ("now", "failure", "ok", "text"),
    [
        (100, "", True, "JWT valid until"),
        (250, "no responders", True, "renewal failing: no responders"),
        (275, "", False, "expiring soon"),
        (300, "hub down", False, "JWT expired at"),
        (400, "", False, "JWT expired at"),
    ],
    ids=["fresh", "failing-but-time-left", "under-a-tenth", "at-expiry", "past"],
)
def test_readiness(now: float, failure: str, ok: bool, text: str) -> None:
    got_ok, got = state.readiness(state.Lifetime(0, 300), now=now, failure=failure)
    assert (got_ok, text in got) == (ok, True), got
    if failure:
        assert failure in got


@pytest.mark.parametrize(
    ("now", "at"),
    [(0, 270), (269, 270), (270, 300), (299, 300), (300, float("inf"))],
    ids=["fresh", "before-close", "at-close", "before-expiry", "expired"],
)
def test_next_change(now: float, at: float) -> None:
    assert state.next_change(state.Lifetime(0, 300), now=now) == at


def test_failed_says_what_and_when_again() -> None:
    assert state.failed("bootstrap", "the hub refused: used", retry_in=2.25) == (
        "bootstrap failed: the hub refused: used; retrying in 2.2s"
    )
