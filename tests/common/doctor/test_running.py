"""common.doctor.running: prerequisites, and a report that always comes out whole."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from common.doctor import results, running
from common.doctor.results import Outcome, Result


@pytest.mark.parametrize(
    ("needs", "outcomes", "why"),
    [
        ((), {}, ""),
        (("a",), {"a": "PASS"}, ""),
        (("a",), {"a": "WARN"}, ""),
        (("a",), {"a": "FAIL"}, "needs a (FAIL)"),
        (("a", "b"), {"a": "SKIP", "b": "PASS"}, "needs a (SKIP)"),
        (("a",), {}, "needs a (not run)"),
    ],
)
def test_blocked(needs: tuple[str, ...], outcomes: dict[str, Outcome], why: str) -> None:
    assert running.blocked(needs, outcomes) == why


@pytest.mark.parametrize(
    ("outcomes", "worst"),
    [
        (("PASS", "WARN"), "WARN"),
        (("PASS", "FAIL", "SKIP"), "FAIL"),
        (("PASS", "SKIP"), "SKIP"),
        ((), "SKIP"),
    ],
)
def test_worst(outcomes: tuple[Outcome, ...], worst: Outcome) -> None:
    fix = {"WARN": "f", "FAIL": "f"}
    assert running.worst([Result("x", o, "", fix.get(o, "")) for o in outcomes]) == worst


async def test_run_skips_dependents_and_catches_errors() -> None:
    async def fine() -> Sequence[Result]:
        return [results.passed("a", "ok")]

    async def broken() -> Sequence[Result]:
        raise RuntimeError("boom")

    async def hangs() -> Sequence[Result]:
        await asyncio.Event().wait()
        return []

    async def never() -> Sequence[Result]:
        raise AssertionError("must not run")

    steps = [
        running.Step("a", fine),
        running.Step("b", broken, needs=("a",)),
        running.Step("c", never, needs=("b",)),
        running.Step("d", hangs),
    ]
    got = await running.run(steps, timeout=0.05)
    assert [(r.check, r.outcome, r.detail) for r in got] == [
        ("a", "PASS", "ok"),
        ("b", "FAIL", "RuntimeError: boom"),
        ("c", "SKIP", "needs b (FAIL)"),
        ("d", "FAIL", "no answer within 0.05s"),
    ]


async def test_a_reason_to_skip_found_by_an_earlier_step_is_said_instead_of_its_needs() -> None:
    found: list[str] = []

    async def finds() -> Sequence[Result]:
        found.append("no credential of its own yet")
        return [results.skipped("a", "not now")]

    async def never() -> Sequence[Result]:
        raise AssertionError("must not run")

    async def fine() -> Sequence[Result]:
        return [results.passed("c", "ok")]

    steps = [
        running.Step("a", finds),
        running.Step("b", never, needs=("a",), skip=lambda: found[0] if found else ""),
        running.Step("c", fine, skip=lambda: ""),
    ]
    got = await running.run(steps, timeout=1)
    assert [(r.check, r.outcome, r.detail) for r in got] == [
        ("a", "SKIP", "not now"),
        ("b", "SKIP", "no credential of its own yet"),
        ("c", "PASS", "ok"),
    ]
