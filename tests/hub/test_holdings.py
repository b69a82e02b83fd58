"""hub.holdings: what the hub knows a stream holds, by table."""

from __future__ import annotations

import math

import pytest

from hub import holdings

A, B, C = "kb.status.site-a.t.a", "kb.status.site-a.t.b", "kb.secret.site-a.t.c"


def steps(*ops: tuple[str, str]) -> holdings.Holdings:
    held = holdings.Holdings(limit=2)
    for op, arg in ops:
        if op == "seed":
            held.seed([s for s in arg.split(",") if s], at=1.0)
        elif op == "add":
            held.add(arg)
        elif op == "discard":
            held.discard(arg)
        elif op == "forget":
            held.forget()
    return held


@pytest.mark.parametrize(
    ("ops", "subject", "expected"),
    [
        ((), A, None),  # nothing learnt: not known
        ((("add", A),), A, None),  # a delivery before any seed teaches nothing
        ((("seed", A),), A, True),
        ((("seed", A),), B, False),
        ((("seed", ""),), A, False),  # an empty stream
        ((("seed", A), ("add", B)), B, True),
        ((("seed", A), ("discard", A)), A, False),
        ((("seed", A), ("forget", "")), B, None),  # a gap: nothing known
        ((("seed", A), ("add", B), ("add", C)), C, None),  # past the limit: dropped
        ((("seed", f"{A},{B},{C}"),), C, None),  # a seed over the limit keeps nothing
        ((("seed", A), ("add", A), ("add", B)), B, True),  # adding what is held grows nothing
    ],
)
def test_what_a_stream_holds(ops: tuple[tuple[str, str], ...], subject: str, expected: bool | None) -> None:
    held = steps(*ops)
    assert held.holds(subject) is expected
    assert held.seeded is (expected is not None)
    assert held.taken_at == (1.0 if expected is not None else -math.inf)
