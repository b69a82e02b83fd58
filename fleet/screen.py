"""The fleet on a screen that keeps it current (``fleet.verdicts``, as ``fleet.watching`` hands out
each look), until Ctrl-C: ``kamaji-broker status --watch`` and the sandbox's live view.

On a terminal, a block redrawn in place: a header line (the title, the seconds since it began,
the control planes Ready), every site (connected, heartbeat age, backlog, control planes by
phase), the control planes with their phase and why they are not Ready (``fleet.view.table``),
and the latest events under it, fitted to the terminal's width and height. Otherwise (logs,
pipes, CI) one line per event as it happens (``fleet.view.events``): a control plane's phase or
version changing, a deletion, a rejection with its reason, a site disconnecting or reconnecting.

The view owns the terminal while it is drawn: a line written behind its back would move the
block down, and the next redraw would start that much too low. So what the process writes
meanwhile (its own messages, library warnings, log records: ``Screen.owning``) goes through the
screen, which prints it above the block, for good, and draws the block again under it.
"""

from __future__ import annotations

import collections
import contextlib
import io
import logging
import shutil
import sys
from collections.abc import Callable, Iterator
from typing import TextIO

from fleet import columns, verdicts, view

__all__ = ["RECENT", "Screen", "table"]

RECENT = 8
"""Events kept under the table on a terminal."""


def table(
    f: verdicts.Fleet,
    *,
    title: str,
    elapsed: float,
    recent: list[str],
    limit: int = 20,
    width: int | None = None,
) -> list[str]:
    """The view's lines under ``title``, none longer than ``width``: the tables drop columns,
    free text is cut at a word (``fleet.columns``)."""
    # Ready: what the PHASE of a control plane says (fleet.controlplanes), nothing looser.
    count = f"{f.ready}/{len(f.control_planes)} control planes Ready"
    lines = [columns.fit(f"{title}  {elapsed:6.1f}s  {count}", width), ""]
    lines += view.table(f, all_control_planes=True, limit=limit, width=width)
    if recent:
        lines += ["", "Recent:", *(columns.fit(f"  {line}", width) for line in recent)]
    return lines


class _Lines(io.TextIOBase):
    """A text stream that hands each complete line to ``say``: the process's stdout and stderr
    while the view owns the terminal."""

    def __init__(self, say: Callable[[str], None]) -> None:
        super().__init__()
        self._say = say
        self._partial = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str, /) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            self._say(line)
        return len(text)

    def rest(self) -> None:
        """Hand on a last line without its newline."""
        if self._partial:
            self._say(self._partial)
            self._partial = ""


class Screen:
    """The view: a block redrawn in place on a terminal, one line per event otherwise."""

    def __init__(self, out: TextIO, *, title: str, err: TextIO | None = None) -> None:
        self.out = out
        self.title = title
        self.err = err if err is not None else sys.stderr
        self.live = out.isatty()
        self._frame: list[str] = []
        """The lines of the block on the terminal now (none: not drawn yet, or frozen)."""
        self._size: tuple[int, int] | None = None
        self._last: verdicts.Fleet | None = None
        self._recent: collections.deque[str] = collections.deque(maxlen=RECENT)

    def show(self, f: verdicts.Fleet, *, elapsed: float) -> None:
        happened = view.printable(f"[{elapsed:6.1f}s] {line}" for line in view.events(self._last, f))
        self._last = f
        if not self.live:
            for line in happened:
                self.out.write(line + "\n")
            self.out.flush()
            return
        self._recent.extend(happened)
        size = shutil.get_terminal_size()
        width, height = max(20, size.columns - 1), max(5, size.lines - 1)
        # Fitted to the width and the height: a wrapped or scrolled-off line would break the
        # count of lines to move up.
        recent = list(self._recent)
        lines = view.printable(table(f, title=self.title, elapsed=elapsed, recent=recent, width=width))
        if len(lines) > height:
            more = f"... {len(lines) - height + 1} more lines (a taller terminal shows them)"
            lines = [*lines[: height - 1], columns.fit(more, width)]
        resized = self._size is not None and self._size != (width, height)
        self._size = (width, height)
        self._draw(lines, resized=resized)

    def _draw(self, lines: list[str], *, resized: bool = False) -> None:
        # Resized, the terminal may have rewrapped the old block and no count of its lines holds:
        # then clear from the top of the screen (lines said above it go too, off a resize only).
        erase = "\x1b[H\x1b[J" if resized and self._frame else self._erase()
        self.out.write(erase + "".join(f"{line}\n" for line in lines))
        self._frame = lines
        self.out.flush()

    def _erase(self) -> str:
        """Up to the first line of the block, and clear to the end of the screen."""
        return f"\x1b[{len(self._frame)}F\x1b[J" if self._frame else ""

    def say(self, text: str) -> None:
        """Lines for the reader to keep: on a terminal above the block, which goes on under them."""
        frame = self._frame
        self.out.write(self._erase() + text + "\n")
        self._frame = []
        if frame:
            self._draw(frame)
        self.out.flush()

    def warn(self, text: str) -> None:
        """A line that is news of trouble: on stderr, or above the block while it is drawn."""
        if self.live:
            self.say(text)
        else:
            self.err.write(text + "\n")
            self.err.flush()

    def freeze(self) -> None:
        """Leave the last table as it is: what follows is printed below it (and the next view
        draws below that)."""
        self._frame = []

    @contextlib.contextmanager
    def owning(self) -> Iterator[None]:
        """While the view is live, what the process writes to stdout or stderr, or logs, goes
        through the screen (above the block) instead of into it."""
        if not self.live:
            yield
            return
        out, err = _Lines(self.say), _Lines(self.warn)
        # The handlers logging was configured with hold the stream they were given, not sys.stderr.
        handlers = [
            h for h in logging.getLogger().handlers
            if type(h) is logging.StreamHandler and h.stream in (sys.stderr, sys.__stderr__, self.out)
        ]  # fmt: skip
        streams = [h.stream for h in handlers]
        for handler in handlers:
            handler.setStream(err)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                yield
        finally:
            for handler, stream in zip(handlers, streams, strict=True):
                handler.setStream(stream)
            out.rest()
            err.rest()
