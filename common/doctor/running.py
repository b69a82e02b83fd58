"""Running doctor's checks in order: a check whose prerequisites did not pass is SKIPped.

A ``Step`` is one named check (an async function returning its results), the names of the
steps it needs and, optionally, a reason to skip it that earlier steps found; ``run`` runs each
in turn, bounded in time, and turns an unexpected exception into a FAIL, so the report always
comes out whole. ``blocked`` is the pure decision.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from common.doctor import results
from common.doctor.results import Outcome, Result

_RANK: dict[Outcome, int] = {"PASS": 0, "WARN": 1, "SKIP": 2, "FAIL": 3}


@dataclass(frozen=True)
class Step:
    name: str
    run: Callable[[], Awaitable[Sequence[Result]]]
    needs: tuple[str, ...] = ()
    """Names of earlier steps that must have passed (PASS or WARN) for this one to run."""
    skip: Callable[[], str] | None = None
    """Why not to run it, known only once earlier steps ran ("": run it); said instead of
    ``needs`` (an agent that has no credential of its own yet has no consumer to check)."""


def worst(got: Sequence[Result]) -> Outcome:
    return max((r.outcome for r in got), key=_RANK.__getitem__, default="SKIP")


def blocked(needs: Sequence[str], outcomes: Mapping[str, Outcome]) -> str:
    """Why a step with ``needs`` cannot run, given the earlier steps' outcomes ("" if it can)."""
    bad = [n for n in needs if outcomes.get(n, "SKIP") not in ("PASS", "WARN")]
    if not bad:
        return ""
    return "needs " + ", ".join(f"{n} ({outcomes.get(n, 'not run')})" for n in bad)


async def run(steps: Sequence[Step], *, timeout: float) -> list[Result]:
    """Every step's results in order; no step runs longer than ``timeout`` seconds."""
    outcomes: dict[str, Outcome] = {}
    out: list[Result] = []
    for step in steps:
        why = (step.skip() if step.skip is not None else "") or blocked(step.needs, outcomes)
        if why:
            got: Sequence[Result] = [results.skipped(step.name, why)]
        else:
            try:
                got = await asyncio.wait_for(step.run(), timeout)
            except TimeoutError:
                got = [results.failed(step.name, f"no answer within {timeout:g}s", "see the checks above")]
            except Exception as exc:  # a check must never crash the report
                got = [results.failed(step.name, f"{type(exc).__name__}: {exc}", "see the detail")]
        outcomes[step.name] = worst(got)
        out.extend(got)
    return out
