"""hub.credentials.revocation's pure parts: revocations merged, and what a push left pending."""

from __future__ import annotations

import datetime as dt

import pytest

from hub.credentials import revocation

NOW = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)
T = int(NOW.timestamp())

UNCOVERED = [
    # id, pending before the push returned, what the push revoked, still pending
    ("all pushed", {"UA": T}, {"UA": T, "UB": T - 9}, {}),
    ("asked for while the push was on its way", {"UA": T, "UB": T}, {"UA": T}, {"UB": T}),
    ("asked again for a later time meanwhile", {"UA": T + 5}, {"UA": T}, {"UA": T + 5}),
    ("nothing pending", {}, {"UA": T}, {}),
]


@pytest.mark.parametrize(
    ("pending", "pushed", "left"), [c[1:] for c in UNCOVERED], ids=[c[0] for c in UNCOVERED]
)
def test_uncovered(pending: dict[str, int], pushed: dict[str, int], left: dict[str, int]) -> None:
    assert revocation.uncovered(pending, pushed) == left


def test_merged_keeps_the_later_time_and_drops_what_has_expired() -> None:
    held = {"UA": T - 10, "UOLD": T - 3600}
    got = revocation.merged(held, {"UA": T, "UB": T}, now=NOW, keep_for=dt.timedelta(minutes=30))
    assert got == {"UA": T, "UB": T}
