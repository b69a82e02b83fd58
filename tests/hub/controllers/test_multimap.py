"""hub.controllers.multimap: a lone value kept as itself, a set only for two or more, and nothing
left behind for a key emptied."""

from __future__ import annotations

import pytest

from hub.controllers.multimap import MultiMap

# (id, steps: ("add" | "discard", key, value), expected values per key, discard results)
CASES: list[tuple[str, list[tuple[str, str, int]], dict[str, set[int]], list[bool]]] = [
    ("one value", [("add", "k", 1)], {"k": {1}}, []),
    ("the same value twice is one", [("add", "k", 1), ("add", "k", 1)], {"k": {1}}, []),
    ("two values", [("add", "k", 1), ("add", "k", 2)], {"k": {1, 2}}, []),
    ("a lone value taken: the key goes", [("add", "k", 1), ("discard", "k", 1)], {}, [True]),
    ("another value taken: nothing changes", [("add", "k", 1), ("discard", "k", 2)], {"k": {1}}, [False]),
    ("a key never filed", [("discard", "k", 1)], {}, [True]),
    (
        "two, then one taken: the other stays",
        [("add", "k", 1), ("add", "k", 2), ("discard", "k", 1)],
        {"k": {2}},
        [False],
    ),
    (
        "three, two taken, then the last",
        [
            ("add", "k", 1),
            ("add", "k", 2),
            ("add", "k", 3),
            ("discard", "k", 1),
            ("discard", "k", 2),
            ("discard", "k", 3),
        ],
        {},
        [False, False, True],
    ),
    ("keys apart", [("add", "a", 1), ("add", "b", 1), ("discard", "a", 1)], {"b": {1}}, [True]),
]


@pytest.mark.parametrize(("steps", "expected", "emptied"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_multimap(
    steps: list[tuple[str, str, int]], expected: dict[str, set[int]], emptied: list[bool]
) -> None:
    m: MultiMap[str, int] = MultiMap()
    results = []
    for op, key, value in steps:
        if op == "add":
            m.add(key, value)
        else:
            results.append(m.discard(key, value))
    assert results == emptied
    assert {k: set(m.get(k)) for k in m} == expected
    assert len(m) == len(expected) and all(k in m for k in expected)
    assert m.get("never") == ()


def test_a_lone_value_is_kept_without_a_set() -> None:
    m: MultiMap[str, int] = MultiMap()
    m.add("k", 1)
    m.add("k", 2)
    m.discard("k", 2)
    assert m._d == {"k": 1}
