"""protocol.text: what a peer's text becomes before anyone stores or prints it."""

from __future__ import annotations

import pytest

from protocol import text

HARMLESS = [
    # id, value, limit, expected
    ("plain text is kept", "TCP tenants/cp1 is Ready", 100, "TCP tenants/cp1 is Ready"),
    ("unicode letters are kept", "Zürich, 東京", 100, "Zürich, 東京"),
    ("CSI clear screen", "\x1b[2J\x1b[Hok", 100, "\\x1b[2J\\x1b[Hok"),
    ("OSC title with BEL", "\x1b]0;PWNED\x07", 100, "\\x1b]0;PWNED\\x07"),
    ("C1 CSI", "a\x9b31mb", 100, "a\\x9b31mb"),
    ("DEL and NUL", "a\x7fb\x00", 100, "a\\x7fb\\x00"),
    ("newline and tab", "line 1\nline 2\tend", 100, "line 1\\nline 2\\tend"),
    ("right-to-left override", "v1.31\u202e0", 100, "v1.31\\u202e0"),
    ("bidi isolate and zero-width space", "\u2066x\u2069\u200b", 100, "\\u2066x\\u2069\\u200b"),
    ("line separator", "a\u2028b", 100, "a\\u2028b"),
    ("an astral private-use point", "\U000f0000", 100, "\\U000f0000"),
    ("cut with an ellipsis", "abcdefghij", 5, "abcd…"),
    ("an escape is never cut in half", "abc\x1b", 6, "abc…"),
    ("escapes count toward the limit", "\x1b\x1b\x1b", 9, "\\x1b\\x1b…"),
    ("exactly at the limit", "abcde", 5, "abcde"),
]


@pytest.mark.parametrize(
    ("value", "limit", "expected"), [c[1:] for c in HARMLESS], ids=[c[0] for c in HARMLESS]
)
def test_harmless(value: str, limit: int, expected: str) -> None:
    got = text.harmless(value, limit=limit)
    assert got == expected
    assert len(got) <= limit and got.isprintable()
    assert text.harmless(got, limit=limit) == got  # idempotent: stored text read back is unchanged


REASONS = [
    ("Ready", True),
    ("ReplacingPreviousOwner", True),
    ("A_b,c:d", True),
    ("", False),
    ("1Ready", False),
    ("Ready:", False),
    ("Evil\x1b[2J", False),
    ("Has Space", False),
    ("Ready\n", False),
    ("R" * 1024, True),
    ("R" * 1025, False),
]


@pytest.mark.parametrize(("value", "expected"), REASONS, ids=[repr(r[0])[:30] for r in REASONS])
def test_is_reason(value: str, expected: bool) -> None:
    assert text.is_reason(value) is expected


HOSTS = [
    ("10.0.0.1", True),
    ("::1", True),
    ("fe80::1", True),
    ("cp1.tenants.svc.cluster.local", True),
    ("API.Example.COM", True),
    ("", False),
    ("evil\x1b[2J.example", False),
    ("a b", False),
    ("-leading.example", False),
    ("host:6443", False),
    ("https://host", False),
    ("a." * 130, False),
    ("x" * 64 + ".example", False),
    ("host.example\n", False),
    ("fe80::1%eth0", False),
    ("fe80::1%\x1b[2J\x1b[31mHACKED", False),
    ("::1%a b", False),
]


@pytest.mark.parametrize(("value", "expected"), HOSTS, ids=[repr(h[0])[:30] for h in HOSTS])
def test_is_host(value: str, expected: bool) -> None:
    assert text.is_host(value) is expected


def test_a_finding_shows_the_value_harmless_and_short() -> None:
    found = text.finding("reason", "Evil\x1b[2J" + "x" * 200, code="InvalidReason", why="is not a reason")
    assert found.shown.startswith("Evil\\x1b[2J") and len(found.shown) == text.SHOWN_MAX
    assert str(found).startswith('field reason "Evil\\x1b[2J') and str(found).isprintable()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain", "plain"),
        ("a\nb\x1b[2J\u202e", "a\\nb\\x1b[2J\\u202e"),
        ("\x1b" * 5000, "\\x1b" * 5000),
    ],
    ids=["plain", "escapes", "unbounded"],
)
def test_escaped(value: str, expected: str) -> None:
    assert text.escaped(value) == expected
    assert text.escaped(expected) == expected
