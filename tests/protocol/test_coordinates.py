"""protocol.coordinates.Coordinates.shared: equal coordinates whose strings are the shared ones."""

from __future__ import annotations

import pytest

from protocol.coordinates import Coordinates


def fresh(text: str) -> str:
    """An equal string that is another object (as a decoded message's is)."""
    return "".join(list(text))


@pytest.mark.parametrize(
    ("name", "kept_is_given"),
    [
        pytest.param(None, False, id="no-name-given"),
        pytest.param("cp-1", True, id="an-equal-name-given"),
        pytest.param("cp-2", False, id="another-name-given"),
    ],
)
def test_shared(name: str | None, kept_is_given: bool) -> None:
    a = Coordinates(fresh("site-a"), fresh("default"), fresh("cp-1"))
    b = Coordinates(fresh("site-a"), fresh("default"), fresh("cp-9"))
    assert a.site is not b.site
    shared_a, shared_b = a.shared(name), b.shared()
    assert shared_a == a and shared_b == b
    assert shared_a.site is shared_b.site and shared_a.namespace is shared_b.namespace
    assert (shared_a.name is name) is kept_is_given
    assert shared_a.name is a.name or kept_is_given
