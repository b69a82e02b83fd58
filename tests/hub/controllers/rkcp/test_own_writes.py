"""hub.controllers.rkcp.own_writes: a reconcile waits while the cache shows the version the hub's
own write replaced, and never for a write that changed nothing."""

from __future__ import annotations

import pytest

from hub.controllers.rkcp.own_writes import OwnWrites

KEY = ("default", "cp1")


@pytest.mark.parametrize(
    ("before", "after", "looks", "behind"),
    [
        pytest.param("10", "11", ["10"], [True], id="the-cache-still-shows-the-old-version"),
        pytest.param("10", "11", ["11", "10"], [False, False], id="caught-up-then-nothing-to-wait-for"),
        pytest.param("10", "12", ["12"], [False], id="another-writer-moved-it-on"),
        pytest.param("10", "10", ["10"], [False], id="a-write-that-changed-nothing"),
        pytest.param("", "11", [""], [False], id="no-version-known"),
    ],
)
def test_behind(before: str, after: str, looks: list[str], behind: list[bool]) -> None:
    own = OwnWrites()
    own.wrote(KEY, before=before, after=after)
    assert [own.behind(KEY, cached) for cached in looks] == behind


def test_a_forgotten_rkcp_is_never_waited_for() -> None:
    own = OwnWrites()
    own.wrote(KEY, before="10", after="11")
    own.forget(KEY)
    assert not own.behind(KEY, "10")
    assert not own.behind(("default", "other"), "10")
