"""hub.ingest.held: what the hub knows a stream holds, by table."""

from __future__ import annotations

import math

import pytest

from hub.ingest import held as holdings

A, B, C = "kb.status.site-a.t.a", "kb.status.site-a.t.b", "kb.secret.site-a.t.c"
NEVER = -math.inf


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
        elif op == "learning":
            held.learning()
        elif op == "failed":
            held.failed(at=2.0)
    return held


@pytest.mark.parametrize(
    ("ops", "subject", "expected", "taken_at"),
    [
        ((), A, None, NEVER),  # nothing learnt: not known
        ((("add", A),), A, None, NEVER),  # a delivery before any list teaches nothing
        ((("seed", A),), A, True, 1.0),
        ((("seed", A),), B, False, 1.0),
        ((("seed", ""),), A, False, 1.0),  # an empty stream
        ((("seed", A), ("add", B)), B, True, 1.0),
        ((("seed", A), ("discard", A)), A, False, 1.0),
        ((("seed", A), ("forget", "")), B, None, NEVER),  # a gap: nothing known
        # past the limit: nothing known, but the list's time stays (no list again at once)
        ((("seed", A), ("add", B), ("add", C)), C, None, 1.0),
        ((("seed", f"{A},{B},{C}"),), C, None, 1.0),
        ((("seed", A), ("add", A), ("add", B)), B, True, 1.0),  # adding what is held grows nothing
        # added while a list is taken (which may predate it): kept on top of the list
        ((("seed", A), ("learning", ""), ("add", B), ("seed", A)), B, True, 1.0),
        ((("learning", ""), ("add", B), ("seed", "")), B, True, 1.0),
        ((("learning", ""), ("seed", A), ("add", B), ("seed", A)), B, False, 1.0),  # once only
        ((("seed", A), ("learning", ""), ("failed", "")), A, None, 2.0),  # a failed list
    ],
)
def test_what_a_stream_holds(
    ops: tuple[tuple[str, str], ...], subject: str, expected: bool | None, taken_at: float
) -> None:
    held = steps(*ops)
    assert held.holds(subject) is expected
    assert held.seeded is (expected is not None)
    assert held.taken_at == taken_at
