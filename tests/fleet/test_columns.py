"""fleet.columns: lines and tables fitted to a width, never cut inside a word. Tables."""

from __future__ import annotations

import pytest

from fleet import columns

FIT = [
    pytest.param("short enough", 20, "short enough", id="fits"),
    pytest.param("site site-a not connected (last heartbeat 12s ago)", 30, "site site-a not connected...",
                 id="at-a-word"),
    pytest.param("site site-a not connected", 16, "site site-a...", id="a-word-across-the-edge-goes"),
    pytest.param("site site-a not connected", 15, "site site-a...", id="the-edge-after-a-word"),
    pytest.param("averyveryverylongword and more", 12, "averyvery...", id="no-word-boundary-to-keep"),
    pytest.param("anything at all", None, "anything at all", id="no-width"),
]  # fmt: skip


@pytest.mark.parametrize(("line", "width", "fitted"), FIT)
def test_fit(line: str, width: int | None, fitted: str) -> None:
    assert columns.fit(line, width) == fitted
    assert width is None or len(fitted) <= width


def test_wrap_continues_indented_between_words() -> None:
    assert columns.wrap("  site site-b: agent not connected: its last heartbeat is 12s old", 30) == [
        "  site site-b: agent not",
        "      connected: its last",
        "      heartbeat is 12s old",
    ]
    assert columns.wrap("  short", 30) == ["  short"]


ROWS = [("NAME", "CONNECTED", "KEYS", "WHY NOT READY"), ("a", "yes", "c9fde5bbf2011e3c", "it is fine")]


def test_columns_as_wide_as_their_content() -> None:
    assert columns.columns(ROWS) == [
        "  NAME  CONNECTED  KEYS              WHY NOT READY",
        "  a     yes        c9fde5bbf2011e3c  it is fine",
    ]


def test_a_narrow_width_drops_the_optional_columns_first_never_a_header_in_half() -> None:
    assert columns.columns(ROWS, width=40, optional=(2,)) == [
        "  NAME  CONNECTED  WHY NOT READY",
        "  a     yes        it is fine",
    ]
    assert columns.columns(ROWS, width=60, optional=(2,)) == columns.columns(ROWS)
