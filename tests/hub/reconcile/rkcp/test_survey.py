"""The survey of the intent stream, judged from two of its states and the hub's own writes."""

from __future__ import annotations

import pytest

from hub.reconcile.rkcp.survey import Mark, Verdict, judge

M = Mark(messages=10, first_seq=1, last_seq=20)


def moved(*, messages: int = 10, first_seq: int = 1, last_seq: int = 20) -> Mark:
    return Mark(messages=messages, first_seq=first_seq, last_seq=last_seq)


CASES: list[tuple[str, Mark | None, Mark, set[int], Verdict]] = [
    # id, last survey, this survey, sequences the hub published since, verdict
    ("first survey: the baseline", None, M, set(), Verdict()),
    ("nothing moved: nothing read", M, M, set(), Verdict()),
    ("nothing moved, whatever the hub noted", M, M, {5}, Verdict()),
    (
        "only the hub's own publishes: the subject list, no message",
        M,
        moved(messages=11, last_seq=22),
        {21, 22},
        Verdict(compare=True),
    ),
    (
        "a sequence the hub did not publish: read it, and the list",
        M,
        moved(last_seq=22),
        {21},
        Verdict(foreign=(22,), compare=True),
    ),
    (
        "a replay between two of the hub's publishes",
        M,
        moved(last_seq=23),
        {21, 23},
        Verdict(foreign=(22,), compare=True),
    ),
    ("a purge: fewer messages, same last sequence", M, moved(messages=9), set(), Verdict(compare=True)),
    (
        "a deleted first message: the first sequence moved",
        M,
        moved(first_seq=2),
        set(),
        Verdict(compare=True),
    ),
    ("the last sequence went back: a new stream", M, moved(last_seq=5), set(), Verdict(everything=True)),
]


@pytest.mark.parametrize(
    ("before", "now", "own", "verdict"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_judge(before: Mark | None, now: Mark, own: set[int], verdict: Verdict) -> None:
    assert judge(before, now, own) == verdict


def test_more_foreign_sequences_than_the_limit_read_everything_again() -> None:
    assert judge(M, moved(last_seq=20 + 4), set(), limit=4) == Verdict(foreign=(21, 22, 23, 24), compare=True)
    assert judge(M, moved(last_seq=20 + 5), set(), limit=4) == Verdict(everything=True)
