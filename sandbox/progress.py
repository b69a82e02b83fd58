"""The sandbox's live view: ``fleet.screen``'s, titled ``kamaji-broker sandbox``, and when the
sandbox counts as Ready (or why not). ``fleet.watching`` keeps the fleet (``sandbox.launcher.
controlplanes.watch``); ``sandbox.run`` decides what to do with each look.
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from fleet import screen, verdicts, view

__all__ = ["RECENT", "Screen", "not_ready", "ready", "table"]

TITLE = "kamaji-broker sandbox"
RECENT = screen.RECENT


def ready(f: verdicts.Fleet, *, expected: int) -> bool:
    """Whether the sandbox is Ready: ``expected`` control planes at least (with ``--topology``
    the RKCPs appear a moment after their Clusters), each Ready by the one meaning the view's
    PHASE and header use: serving, its kubeconfig written, its ``Ready`` condition True."""
    return len(f.control_planes) >= expected and f.ready == len(f.control_planes)


def not_ready(f: verdicts.Fleet, *, timeout: float, errors: list[str], logs_dir: Path) -> str:
    """Why the sandbox is not Ready after ``timeout``: the control planes missing, the latest
    errors in the logs, where the logs are. A problem may quote what a site sent and an error
    what a log line held: each line is made harmless."""
    missing = view.printable(cp.problem() for cp in f.control_planes if not cp.healthy)
    lines = [
        f"not ready after {timeout:g}s: {len(missing)} of {len(f.control_planes)} control planes missing:",
        *(f"  {m}" for m in missing),
    ]
    if errors:
        lines += ["last errors in the logs:", *(f"  {e}" for e in view.printable(errors))]
    return "\n".join([*lines, f"logs of every process: {logs_dir}/"])


def table(
    f: verdicts.Fleet, *, elapsed: float, recent: list[str], limit: int = 20, width: int | None = None
) -> list[str]:
    """The view's lines (``fleet.screen.table``), titled for the sandbox."""
    return screen.table(f, title=TITLE, elapsed=elapsed, recent=recent, limit=limit, width=width)


class Screen(screen.Screen):
    """``fleet.screen.Screen``, titled for the sandbox."""

    def __init__(self, out: TextIO, *, err: TextIO | None = None) -> None:
        super().__init__(out, title=TITLE, err=err)
