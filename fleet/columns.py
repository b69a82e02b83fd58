"""Text laid out for a screen of a given width (``fleet.view``'s tables, ``sandbox.progress``'s
lines). Pure.

A table's columns are as wide as their content; when the screen is narrower, the columns a
reader can best do without go first, and the last column (free text: why, phases) is cut at a
word. A line is cut at a word, never inside one, and says it was cut; a paragraph (a problem)
wraps instead, with its continuation indented. A header is never cut: its column goes whole.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Final

__all__ = ["CUT", "columns", "fit", "wrap"]

CUT: Final = "..."
"""What ends a line that was cut (ASCII: whatever the terminal's encoding)."""
LAST_AT_LEAST: Final = 30
"""Columns the last (free-text) column keeps before an optional column is dropped for it."""


def fit(line: str, width: int | None) -> str:
    """``line`` cut to ``width`` at a word (then ``...``); as it is when it fits or ``width`` is None."""
    if width is None or len(line) <= width:
        return line
    room = max(0, width - len(CUT))
    cut = line[:room]
    if line[room] != " " and " " in cut.strip():
        # A word runs across the edge: end before it, unless that leaves almost nothing.
        before = cut.rstrip().rsplit(" ", 1)[0]
        if len(before) > room // 2:
            cut = before
    return cut.rstrip() + CUT


def wrap(line: str, width: int | None, *, indent: str = "    ") -> list[str]:
    """``line`` on as many lines as ``width`` needs, broken between words, continued at ``indent``."""
    if width is None or len(line) <= width:
        return [line]
    lead = line[: len(line) - len(line.lstrip())]
    return textwrap.wrap(
        line, width, initial_indent="", subsequent_indent=lead + indent, break_on_hyphens=False
    ) or [line]


def _width(widths: Sequence[int], last: int) -> int:
    return 2 + sum(w + 2 for w in widths) + last


def columns(
    rows: Sequence[Sequence[str]], *, width: int | None = None, optional: Sequence[int] = ()
) -> list[str]:
    """Rows (the first is the header) as left-aligned columns, indented by two, the last column
    unpadded. With ``width``: the columns in ``optional`` (indices, the least needed first) are
    dropped while the others leave the last column less than ``LAST_AT_LEAST`` (or its header)
    within it, and each line is cut at a word to fit."""
    keep = list(range(len(rows[0])))
    last = max(len(rows[0][-1]), min(LAST_AT_LEAST, max(len(row[-1]) for row in rows)))
    dropping = list(optional)
    while width is not None and dropping:
        widths = [max(len(row[i]) for row in rows) for i in keep[:-1]]
        if _width(widths, last) <= width:
            break
        keep.remove(dropping.pop(0))
    widths = [max(len(row[i]) for row in rows) for i in keep[:-1]]
    lines = []
    for row in rows:
        cells = [row[i].ljust(w) for i, w in zip(keep[:-1], widths, strict=True)]
        lines.append(fit(("  " + "  ".join([*cells, row[keep[-1]]])).rstrip(), width))
    return lines
