"""What ``kamaji-broker doctor`` reports: one ``Result`` per check, and how results are shown.

A result is PASS, WARN (works, but should be fixed), FAIL (the process cannot work this way)
or SKIP (not checked, because a check it depends on did not pass). Every WARN and FAIL carries
a ``fix``: what to do, concretely (which flag, which file, which command). Pure: rendering and
the exit code are functions of the results. Nothing here ever holds secret material: details
name files, subjects and key ids, never a seed, a JWT or a token.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

Outcome = Literal["PASS", "WARN", "FAIL", "SKIP"]
OUTCOMES: tuple[Outcome, ...] = ("PASS", "WARN", "FAIL", "SKIP")


@dataclass(frozen=True)
class Result:
    check: str
    """The check's name (``nats reachable``, ``rbac``, ...); several results may share it."""
    outcome: Outcome
    detail: str
    fix: str = ""
    """For WARN and FAIL: what to do about it."""

    def __post_init__(self) -> None:
        if self.outcome in ("WARN", "FAIL") and not self.fix:
            raise ValueError(f"{self.check}: a {self.outcome} needs a fix hint")


def passed(check: str, detail: str) -> Result:
    return Result(check, "PASS", detail)


def warned(check: str, detail: str, fix: str) -> Result:
    return Result(check, "WARN", detail, fix)


def failed(check: str, detail: str, fix: str) -> Result:
    return Result(check, "FAIL", detail, fix)


def skipped(check: str, why: str) -> Result:
    return Result(check, "SKIP", why)


def exit_code(results: Iterable[Result]) -> int:
    """0 when nothing failed, 1 otherwise."""
    return 1 if any(r.outcome == "FAIL" for r in results) else 0


def render_text(results: Sequence[Result]) -> str:
    """``PASS  <check>  <detail>`` per result, with an indented ``fix:`` line under WARN/FAIL."""
    width = max((len(r.check) for r in results), default=0)
    lines = []
    for r in results:
        lines.append(f"{r.outcome:<4}  {r.check:<{width}}  {r.detail}".rstrip())
        if r.fix:
            lines.append(f"      fix: {r.fix}")
    counts = ", ".join(f"{sum(r.outcome == o for r in results)} {o}" for o in OUTCOMES)
    lines.append(f"{counts}")
    return "\n".join(lines) + "\n"


def render_json(results: Sequence[Result]) -> str:
    """``{"ok": bool, "checks": [{check, outcome, detail, fix}, ...]}``."""
    document = {"ok": exit_code(results) == 0, "checks": [asdict(r) for r in results]}
    return json.dumps(document, indent=2) + "\n"


SETTINGS = "settings"


def from_settings_error(text: str, *, env_prefix: str) -> list[Result]:
    """A FAIL per line of a settings error (``--flag: why``), each naming the flag and its
    environment variable."""
    out = []
    for line in text.splitlines():
        where, _, why = line.partition(": ")
        if where.startswith("--"):
            env = env_prefix + where[2:].replace("-", "_").upper()
            fix = f"give {where} (or {env}) a valid value"
        else:
            fix = "see `kamaji-broker doctor <hub|agent> --help` for the flags"
        out.append(failed(SETTINGS, line if not why else f"{where}: {why}", fix))
    return out
