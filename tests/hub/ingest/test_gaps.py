"""hub.ingest.gaps: whether the hub saw every message its consumer delivered, by table."""

from __future__ import annotations

import pytest

from hub.ingest import gaps

S = "KB_SITE_site-a"


def run(*ops: tuple[str, int]) -> list[str | None]:
    c = gaps.Continuity(check_interval=30.0)
    answers: list[str | None] = []
    for op, n in ops:
        if op == "delivered":
            answers.append(c.delivered(S, n))
        elif op == "bound":
            answers.append(c.bound(S, n))
        elif op == "checked":
            answers.append(c.checked(S, n, now=0.0, reconnects=0))
    return answers


GAP = "gap"


@pytest.mark.parametrize(
    ("ops", "expected"),
    [
        ((("bound", 0), ("delivered", 1), ("delivered", 2)), [None, None, None]),
        ((("bound", 0), ("delivered", 1), ("delivered", 3)), [None, None, GAP]),  # 2 went elsewhere
        ((("bound", 5), ("delivered", 7)), [None, GAP]),  # the first after a bind skips one
        ((("delivered", 9), ("delivered", 10)), [None, None]),  # no bind seen: the first is the start
        ((("bound", 0), ("delivered", 2), ("delivered", 2)), [None, GAP, None]),  # sent again
        ((("bound", 0), ("delivered", 4), ("delivered", 2)), [None, GAP, None]),  # server rolled back
        ((("bound", 3), ("bound", 3)), [None, None]),  # a rebind that follows on
        ((("bound", 3), ("bound", 5)), [None, GAP]),  # delivered elsewhere between bindings
        ((("bound", 3), ("bound", 0)), [None, GAP]),  # the consumer was created again
        ((("bound", 3), ("checked", 3)), [None, None]),  # quiet, nothing missed
        ((("bound", 3), ("checked", 4)), [None, GAP]),  # the quiet stream's last message was lost
        ((("bound", 3), ("checked", 4), ("delivered", 4)), [None, GAP, None]),  # or was on its way
        ((("bound", 3), ("checked", 2)), [None, None]),
    ],
)
def test_gaps(ops: tuple[tuple[str, int], ...], expected: list[str | None]) -> None:
    assert [GAP if a else None for a in run(*ops)] == expected


def test_the_reason_names_both_sequences() -> None:
    c = gaps.Continuity(check_interval=30.0)
    c.bound(S, 1)
    assert c.delivered(S, 4) == "delivery 4 follows 1"
    assert c.bound(S, 9) == "the consumer delivered up to 9, this hub saw 4"


@pytest.mark.parametrize(
    ("checked_at", "now", "reconnects", "due"),
    [
        (None, 0.0, 0, False),  # a stream never bound: nothing to check
        (0.0, 10.0, 0, False),
        (0.0, 30.0, 0, True),  # the interval passed
        (0.0, 1.0, 1, True),  # a reconnect: at once
    ],
)
def test_when_a_quiet_stream_is_checked(
    checked_at: float | None, now: float, reconnects: int, due: bool
) -> None:
    c = gaps.Continuity(check_interval=30.0)
    if checked_at is not None:
        c.bound(S, 1)
        c.checked(S, 1, now=checked_at, reconnects=0)
    assert c.check_due(S, now=now, reconnects=reconnects) is due
