"""sandbox.kubeapi.patching: RFC 7386 merge patch and RFC 6902 JSON patch (pure)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from sandbox.kubeapi import patching

# RFC 7386 appendix A, plus nested cases.
MERGE_CASES = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "expected"), MERGE_CASES)
def test_merge_patch(target: Any, patch: Any, expected: Any) -> None:
    before = repr(target)
    assert patching.merge_patch(target, patch) == expected
    assert repr(target) == before  # never mutates its input


DOC = {"foo": "bar", "list": [1, 2, 3], "nested": {"a~b": 1, "c/d": 2}}

JSON_CASES = [
    ("add member", [{"op": "add", "path": "/baz", "value": "qux"}], {**DOC, "baz": "qux"}),
    ("add to end", [{"op": "add", "path": "/list/-", "value": 4}], {**DOC, "list": [1, 2, 3, 4]}),
    ("insert", [{"op": "add", "path": "/list/0", "value": 0}], {**DOC, "list": [0, 1, 2, 3]}),
    ("remove", [{"op": "remove", "path": "/foo"}], {"list": [1, 2, 3], "nested": DOC["nested"]}),
    ("remove item", [{"op": "remove", "path": "/list/1"}], {**DOC, "list": [1, 3]}),
    ("replace", [{"op": "replace", "path": "/foo", "value": 1}], {**DOC, "foo": 1}),
    (
        "escapes",
        [{"op": "replace", "path": "/nested/a~0b", "value": 9}],
        {**DOC, "nested": {"a~b": 9, "c/d": 2}},
    ),
    ("slash", [{"op": "remove", "path": "/nested/c~1d"}], {**DOC, "nested": {"a~b": 1}}),
    (
        "move",
        [{"op": "move", "from": "/foo", "path": "/moved"}],
        {"list": [1, 2, 3], "nested": DOC["nested"], "moved": "bar"},
    ),
    ("copy", [{"op": "copy", "from": "/list/0", "path": "/first"}], {**DOC, "first": 1}),
    ("test ok", [{"op": "test", "path": "/foo", "value": "bar"}], DOC),
    ("whole", [{"op": "replace", "path": "", "value": {"x": 1}}], {"x": 1}),
    (
        "sequence",
        [{"op": "add", "path": "/a", "value": {}}, {"op": "add", "path": "/a/b", "value": 1}],
        {**DOC, "a": {"b": 1}},
    ),
]


@pytest.mark.parametrize(("name", "ops", "expected"), JSON_CASES, ids=[c[0] for c in JSON_CASES])
def test_json_patch(name: str, ops: list[dict[str, Any]], expected: Any) -> None:
    assert patching.json_patch(DOC, ops) == expected


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "remove", "path": "/missing"}],
        [{"op": "replace", "path": "/missing", "value": 1}],
        [{"op": "add", "path": "/list/9", "value": 1}],
        [{"op": "add", "path": "/missing/child", "value": 1}],
        [{"op": "test", "path": "/foo", "value": "baz"}],
        [{"op": "test", "path": "/list/0", "value": True}],
        [{"op": "add", "path": "foo", "value": 1}],
        [{"op": "add", "path": "/list/01", "value": 1}],
        [{"op": "move", "from": "/nested", "path": "/nested/x"}],
        [{"op": "jump", "path": "/foo"}],
        [{"path": "/foo"}],
        [{"op": "add", "path": "/x"}],
        {"op": "add"},
    ],
)
def test_json_patch_errors(ops: Any) -> None:
    with pytest.raises(patching.PatchError):
        patching.json_patch(DOC, ops)


def test_json_patch_is_atomic() -> None:
    doc = {"a": 1}
    with pytest.raises(patching.PatchError):
        patching.json_patch(doc, [{"op": "add", "path": "/b", "value": 2}, {"op": "remove", "path": "/zzz"}])
    assert doc == {"a": 1}


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=12,
)
_objects = st.dictionaries(st.text(max_size=3), _json, max_size=4)


@given(target=_objects, patch=_objects)
def test_merge_patch_is_idempotent(target: dict[str, Any], patch: dict[str, Any]) -> None:
    once = patching.merge_patch(target, patch)
    assert patching.merge_patch(once, patch) == once


@given(doc=_objects, key=st.text(max_size=4), value=_json)
def test_json_patch_add_then_remove_restores(doc: dict[str, Any], key: str, value: Any) -> None:
    pointer = "/" + key.replace("~", "~0").replace("/", "~1")
    assume(key not in doc)
    added = patching.json_patch(doc, [{"op": "add", "path": pointer, "value": value}])
    assert added[key] == value
    assert patching.json_patch(added, [{"op": "remove", "path": pointer}]) == doc
