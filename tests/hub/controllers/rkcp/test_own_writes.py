"""hub.controllers.rkcp.own_writes: a reconcile waits while the cache shows the version the hub's
own write replaced, never for a write that changed nothing, and not for ever."""

from __future__ import annotations

import pytest

from hub.controllers.rkcp.own_writes import OwnWrites

KEY = ("default", "cp1")


@pytest.mark.parametrize(
    ("before", "after", "looks", "behind"),
    [
        pytest.param("10", "11", [("10", 1.0)], [True], id="the-cache-still-shows-the-old-version"),
        pytest.param(
            "10", "11", [("11", 1.0), ("10", 1.0)], [False, False], id="caught-up-then-nothing-to-wait-for"
        ),
        pytest.param("10", "12", [("12", 1.0)], [False], id="another-writer-moved-it-on"),
        pytest.param("10", "10", [("10", 1.0)], [False], id="a-write-that-changed-nothing"),
        pytest.param("", "11", [("", 1.0)], [False], id="no-version-known"),
        pytest.param(
            "10", "11", [("10", 4.0), ("10", 6.0), ("10", 6.5)], [True, False, False], id="waited-long-enough"
        ),
    ],
)
def test_behind(before: str, after: str, looks: list[tuple[str, float]], behind: list[bool]) -> None:
    own = OwnWrites(patience=5.0)
    own.wrote(KEY, before=before, after=after, now=0.0)
    assert [own.behind(KEY, cached, now=now) for cached, now in looks] == behind


def test_a_forgotten_rkcp_is_never_waited_for() -> None:
    own = OwnWrites()
    own.wrote(KEY, before="10", after="11", now=0.0)
    own.forget(KEY)
    assert not own.behind(KEY, "10", now=0.0)
    assert not own.behind(("default", "other"), "10", now=0.0)
