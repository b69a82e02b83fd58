"""sandbox.kubeapi.apply.patching: RFC 7386 merge patch and RFC 6902 JSON patch (pure), and the same
tables through the API of each backend: patches of ``spec.doc`` of a schemaless custom resource."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from sandbox.kubeapi.apply import patching
from tests.sandbox.kubeapi import backends

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
    # Where kube-apiserver's JSON patch is laxer than RFC 6902, it is what a client meets:
    ("replace sets a missing member", [{"op": "replace", "path": "/new", "value": 1}], {**DOC, "new": 1}),
    ("a missing value is null", [{"op": "add", "path": "/x"}], {**DOC, "x": None}),
    ("leading zeros", [{"op": "add", "path": "/list/01", "value": 0}], {**DOC, "list": [1, 0, 2, 3]}),
    ("a sign", [{"op": "add", "path": "/list/+1", "value": 0}], {**DOC, "list": [1, 0, 2, 3]}),
    ("negative from the end", [{"op": "add", "path": "/list/-1", "value": 4}], {**DOC, "list": [1, 2, 3, 4]}),
    ("copy of a missing member", [{"op": "copy", "from": "/nope", "path": "/x"}], {**DOC, "x": None}),
    ("test of a missing member", [{"op": "test", "path": "/nope", "value": None}], DOC),
    (
        "sequence",
        [{"op": "add", "path": "/a", "value": {}}, {"op": "add", "path": "/a/b", "value": 1}],
        {**DOC, "a": {"b": 1}},
    ),
]


@pytest.mark.parametrize(("name", "ops", "expected"), JSON_CASES, ids=[c[0] for c in JSON_CASES])
def test_json_patch(name: str, ops: list[dict[str, Any]], expected: Any) -> None:
    assert patching.json_patch(DOC, ops) == expected


BAD_JSON_PATCHES = [
    [{"op": "remove", "path": "/missing"}],
    [{"op": "replace", "path": "/list/3", "value": 1}],
    [{"op": "add", "path": "/list/9", "value": 1}],
    [{"op": "add", "path": "/list/007", "value": 1}],
    [{"op": "add", "path": "/missing/child", "value": 1}],
    [{"op": "test", "path": "/foo", "value": "baz"}],
    [{"op": "test", "path": "/list/0", "value": True}],
    [{"op": "test", "path": "/list/0", "value": 1.0}],
    [{"op": "test", "path": "/foo"}],
    [{"op": "add", "path": "foo", "value": 1}],
    [{"op": "remove", "path": "/list/-"}],
    [{"op": "move", "from": "/nested", "path": "/nested/x"}],
    [{"op": "move", "from": "/nope", "path": "/x"}],
    [{"op": "jump", "path": "/foo"}],
    [{"path": "/foo"}],
]


@pytest.mark.parametrize("ops", BAD_JSON_PATCHES)
def test_json_patch_errors(ops: Any) -> None:
    with pytest.raises(patching.PatchError):
        patching.json_patch(DOC, ops)


@pytest.mark.parametrize("ops", [{"op": "add"}, [{"op": "replace", "path": "", "value": {"x": 1}}]])
def test_json_patch_is_a_list_of_operations_below_the_root(ops: Any) -> None:
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


DOCUMENTS_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "documents.tests.example.com"},
    "spec": {
        "group": "tests.example.com",
        "names": {"plural": "documents", "singular": "document", "kind": "Document"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                        },
                    }
                },
            }
        ],
    },
}


class Documents:
    """Documents in a namespace of a backend: ``spec.doc`` holds the document a patch applies to."""

    def __init__(self, backend: backends.Backend, namespace: str, http: aiohttp.ClientSession) -> None:
        self.base = f"{backend.url}/apis/tests.example.com/v1/namespaces/{namespace}/documents"
        self.http = http

    async def create(self, name: str, doc: Any) -> None:
        body = {"apiVersion": "tests.example.com/v1", "kind": "Document", "metadata": {"name": name}}
        async with self.http.post(self.base, json={**body, "spec": {"doc": doc}}) as resp:
            assert resp.status == 201, await resp.text()

    async def patch(self, name: str, patch: Any, content_type: str) -> tuple[int, Any]:
        """The status and, when it applied, ``spec.doc`` (None: absent) after the patch."""
        headers = {"Content-Type": content_type}
        async with self.http.patch(f"{self.base}/{name}", data=json.dumps(patch), headers=headers) as resp:
            answer = await resp.json()
        return resp.status, (answer.get("spec") or {}).get("doc") if resp.status == 200 else answer


def _under_doc(ops: Any) -> Any:
    """JSON patch operations on ``spec.doc`` instead of the whole document (paths that are no
    JSON pointer, and what is no list of operations, are left as they are)."""
    if not isinstance(ops, list):
        return ops
    moved = []
    for op in ops:
        op = dict(op)
        for key in ("path", "from"):
            if isinstance(op.get(key), str) and (op[key] == "" or op[key].startswith("/")):
                op[key] = "/spec/doc" + op[key]
        moved.append(op)
    return moved


@pytest.fixture
async def documents(backend: backends.Backend, namespace: str) -> AsyncIterator[Documents]:
    await backend.apply_crd(DOCUMENTS_CRD)
    async with backend.http() as http:
        yield Documents(backend, namespace, http)


async def test_merge_patch_through_the_api(documents: Documents) -> None:
    for index, (target, patch, expected) in enumerate(MERGE_CASES):
        await documents.create(f"m{index}", target)
        got = await documents.patch(f"m{index}", {"spec": {"doc": patch}}, "application/merge-patch+json")
        assert got == (200, expected), (target, patch)


async def test_json_patch_through_the_api(documents: Documents) -> None:
    for index, (name, ops, expected) in enumerate(JSON_CASES):
        await documents.create(f"j{index}", DOC)
        assert await documents.patch(f"j{index}", _under_doc(ops), "application/json-patch+json") == (
            200,
            expected,
        ), name
    await documents.create("bad", DOC)
    for ops in BAD_JSON_PATCHES:
        status, answer = await documents.patch("bad", _under_doc(ops), "application/json-patch+json")
        assert (status, answer["reason"]) == (422, "Invalid"), (ops, answer)
        assert answer["message"] == "the server rejected our request due to an error in our request"
    status, answer = await documents.patch("bad", {"op": "add"}, "application/json-patch+json")
    assert (status, answer["message"]) == (
        400,
        "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp",
    )
