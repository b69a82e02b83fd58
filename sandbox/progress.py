"""The sandbox's live view: the fleet (``hub.fleet``) as it changes, until Ctrl-C.

On a terminal, a block redrawn in place: a header line, every site (connected, heartbeat age,
backlog, control planes by phase), every control plane with its phase and why it is not Ready
(``hub.fleetview.table``), and the latest events under it. Otherwise (logs, pipes, CI) one line
per event as it happens (``hub.fleetview.events``): a control plane's phase or version changing,
a deletion, a rejection with its reason, a site disconnecting or reconnecting.
``sandbox.launcher.controlplanes`` reads the fleet; ``sandbox.run`` decides when to look.
"""

from __future__ import annotations

import collections
import shutil
from typing import TextIO

from hub import fleet, fleetview

__all__ = ["Screen", "ready", "table"]

RECENT = 8
"""Events kept under the table on a terminal."""


def ready(f: fleet.Fleet, *, expected: int) -> bool:
    """Whether the sandbox is Ready: ``expected`` control planes at least (with ``--topology``
    the RKCPs appear a moment after their Clusters), each Ready by the one meaning the view's
    PHASE and header use: serving, its kubeconfig written, its ``Ready`` condition True."""
    return len(f.control_planes) >= expected and f.ready == len(f.control_planes)


def table(f: fleet.Fleet, *, elapsed: float, recent: list[str], limit: int = 20) -> list[str]:
    # Ready: what the PHASE of a control plane says (hub.fleet_rkcp), nothing looser.
    ready = f"{f.ready}/{len(f.control_planes)} control planes Ready"
    lines = [f"kamaji-broker sandbox  {elapsed:6.1f}s  {ready}", ""]
    lines += fleetview.table(f, all_control_planes=True, limit=limit)
    if recent:
        lines += ["", "Recent:", *(f"  {line}" for line in recent)]
    return lines


class Screen:
    """The view: a block redrawn in place on a terminal, one line per event otherwise."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.live = out.isatty()
        self._drawn = 0
        self._last: fleet.Fleet | None = None
        self._recent: collections.deque[str] = collections.deque(maxlen=RECENT)

    def show(self, f: fleet.Fleet, *, elapsed: float) -> None:
        happened = [f"[{elapsed:6.1f}s] {line}" for line in fleetview.events(self._last, f)]
        self._last = f
        if not self.live:
            for line in happened:
                self.out.write(line + "\n")
            self.out.flush()
            return
        self._recent.extend(happened)
        size = shutil.get_terminal_size()
        width, height = max(20, size.columns - 1), max(5, size.lines - 1)
        # Cut to the width and the height: a wrapped or scrolled-off line would break the count
        # of lines to move up.
        lines = [line[:width] for line in table(f, elapsed=elapsed, recent=list(self._recent))]
        if len(lines) > height:
            lines = [
                *lines[: height - 1],
                f"... {len(lines) - height + 1} more lines (a taller terminal shows them)",
            ]
        # Up to the first line drawn last time, clear to the end of the screen, draw again.
        prefix = f"\x1b[{self._drawn}F\x1b[J" if self._drawn else ""
        self.out.write(prefix + "\n".join(lines) + "\n")
        self._drawn = len(lines)
        self.out.flush()

    def freeze(self) -> None:
        """Leave the last table as it is: what follows is printed below it (and the next view
        draws below that)."""
        self._drawn = 0

    def say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()
