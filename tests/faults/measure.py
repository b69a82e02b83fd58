"""``Measure``: one fault scenario's clock and verdict (the ``fault`` fixture of tests/faults).

A scenario calls ``inject(world)`` just before it injects its fault (the logs are marked there:
error lines after it must be explained by the fault), ``lifted()`` when the fault is over (the
killed process started again, the paused one continued, the hand edit done), then
``await converges(world, ...)``: it waits until the invariants of ``sandbox.launcher.invariants``
hold (a condition, never a fixed sleep), asserts that none is violated, and records the seconds
from lifting to convergence. With ``KB_FAULTS_REPORT=<file>`` every scenario appends one JSON
line there (``bench/faults.py`` runs the suite that way and prints them); the suite itself asserts
convergence, never time.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox.launcher import System, invariants
from tests import helpers

REPORT_ENV = "KB_FAULTS_REPORT"


@dataclass
class Measure:
    scenario: str
    workload: str = ""
    """What ran while the fault was injected, in words (e.g. "12 RKCPs created at site-a")."""
    fault: str = ""
    """The fault, in words (e.g. "agent-site-a SIGKILL mid-burst, started again")."""
    marks: dict[str, int] = field(default_factory=dict)
    injected_at: float | None = None
    lifted_at: float | None = None
    at_lift: dict[str, int] = field(default_factory=dict)
    """The invariants' counts when the fault was lifted: what there was to heal."""

    def inject(self, world: System, *, fault: str = "", workload: str = "") -> None:
        self.fault = fault or self.fault
        self.workload = workload or self.workload
        self.marks = world.log_marks()
        self.injected_at = time.monotonic()

    async def lifted(self, world: System) -> None:
        self.lifted_at = time.monotonic()
        self.at_lift = invariants.counts(await invariants.findings(world))

    async def converges(
        self,
        world: System,
        *,
        deleted: Iterable[invariants.Deleted] = (),
        allowed_errors: Sequence[str | re.Pattern[str]] = (),
        within: float = 120.0,
    ) -> float:
        """Wait for the invariants, assert them, record and return the seconds since ``lifted``."""
        if self.lifted_at is None:
            raise RuntimeError("call lifted() when the fault is over, before converges()")
        gone = tuple(deleted)

        async def healthy() -> bool:
            return await invariants.converged(world, deleted=gone)

        try:
            await helpers.eventually(healthy, within=within, every=0.2)
        finally:
            # The logs are judged once the rest holds (or the wait gave up), with every cause known.
            seconds = time.monotonic() - self.lifted_at
            found = await invariants.findings(
                world, deleted=gone, since=self.marks, allowed_errors=allowed_errors
            )
            self._report(seconds, found)
        assert not found, "the invariants do not hold:\n" + "\n".join(str(f) for f in found)
        return seconds

    def _report(self, seconds: float, found: list[invariants.Finding]) -> None:
        path = os.environ.get(REPORT_ENV)
        if not path:
            return
        line: dict[str, Any] = {
            "scenario": self.scenario,
            "fault": self.fault,
            "workload": self.workload,
            "converged": not found,
            "convergence_seconds": round(seconds, 2),
            "at_lift": self.at_lift,
            "after": invariants.counts(found),
        }
        if self.injected_at is not None and self.lifted_at is not None:
            line["fault_seconds"] = round(self.lifted_at - self.injected_at, 2)
        with Path(path).open("a") as out:
            out.write(json.dumps(line) + "\n")
