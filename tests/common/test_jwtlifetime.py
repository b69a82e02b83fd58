"""common.jwtlifetime: the one rule for a JWT's lifetime (the agent's /readyz, doctor's WARN/FAIL)."""

from __future__ import annotations

import pytest

from common import jwtlifetime
from common.jwtlifetime import Lifetime


@pytest.mark.parametrize(
    ("life", "now", "ready", "text"),
    [
        (Lifetime(0, 1000), 100, True, "JWT valid until 1970-01-01T00:16:40+00:00 (900s left)"),
        (Lifetime(0, 1000), 899, True, "JWT valid until 1970-01-01T00:16:40+00:00 (101s left)"),
        (
            Lifetime(0, 1000),
            950,
            False,
            "expiring soon: JWT valid until 1970-01-01T00:16:40+00:00 (50s left)",
        ),
        (Lifetime(0, 1000), 1000, False, "JWT expired at 1970-01-01T00:16:40+00:00"),
        (Lifetime(0, float("inf")), 10**9, True, "JWT without expiry"),
    ],
)
def test_readiness(life: Lifetime, now: float, ready: bool, text: str) -> None:
    assert jwtlifetime.readiness(life, now=now) == (ready, text)


@pytest.mark.parametrize(("now", "at"), [(0, 900), (899, 900), (900, 1000), (1000, float("inf"))])
def test_next_change(now: float, at: float) -> None:
    assert jwtlifetime.next_change(Lifetime(0, 1000), now=now) == at
