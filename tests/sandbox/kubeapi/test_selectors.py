"""sandbox.kubeapi.state.selectors: label and field selector parsing and matching (pure), and the same
tables through the API of each backend."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.kubeapi import errors
from sandbox.kubeapi.state import selectors
from tests.sandbox.kubeapi import backends

LABELS = {"app": "web", "tier": "front", "rank": "3"}


LABEL_CASES = [
    ("", True),
    ("app=web", True),
    ("app==web", True),
    ("app = web", True),
    ("app=db", False),
    ("app!=db", True),
    ("app!=web", False),
    ("missing!=x", True),
    ("app in (web,db)", True),
    ("app in (db)", False),
    ("app notin (db)", True),
    ("missing notin (db)", True),
    ("app notin (web)", False),
    ("app", True),
    ("missing", False),
    ("!missing", True),
    ("!app", False),
    ("app=web,tier=front", True),
    ("app=web,tier=back", False),
    ("rank>2", True),
    ("rank<2", False),
    ("example.com/key", False),
    ("app in (web, db),!missing", True),
    ("app=", False),
    ("missing=", False),
    ("missing!=", True),
]


@pytest.mark.parametrize(("selector", "matches"), LABEL_CASES)
def test_label_selector_matching(selector: str, matches: bool) -> None:
    assert selectors.parse_labels(selector).matches(LABELS) is matches


BAD_LABEL_SELECTORS = [
    "app=web,",
    "app in web",
    "app in (web",
    "=web",
    "app=we b",
    "app=web tier=front",
    "-bad-=x",
    "rank>x",
]


@pytest.mark.parametrize("selector", BAD_LABEL_SELECTORS)
def test_bad_label_selectors_are_400(selector: str) -> None:
    with pytest.raises(errors.ApiError) as info:
        selectors.parse_labels(selector)
    assert info.value.code == 400 and info.value.reason == "BadRequest"


FIELD_CASES = [
    ("metadata.name=a", True),
    ("metadata.name==a", True),
    ("metadata.name!=a", False),
    ("metadata.namespace=default", True),
    ("metadata.name=a,metadata.namespace=other", False),
    ("type=Opaque", True),
    ("", True),
]


@pytest.mark.parametrize(("selector", "matches"), FIELD_CASES)
def test_field_selectors(selector: str, matches: bool) -> None:
    parsed = selectors.parse_fields(selector, supported=frozenset({"type"}))
    obj = {"metadata": {"name": "a", "namespace": "default"}, "type": "Opaque"}
    assert parsed.matches(obj) is matches


def test_unsupported_field_is_400() -> None:
    with pytest.raises(errors.ApiError) as info:
        selectors.parse_fields("spec.x=1", supported=frozenset())
    assert info.value.code == 400
    assert info.value.message == "field label not supported: spec.x"


def test_exact_name_fast_path() -> None:
    assert selectors.parse_fields("metadata.name=a", supported=frozenset()).exact_name() == "a"
    assert selectors.parse_fields("metadata.name!=a", supported=frozenset()).exact_name() is None


# Through the API: the same tables, as list requests for one labelled Secret on each backend.


async def _listed(backend: backends.Backend, namespace: str, **query: str) -> tuple[int, Any]:
    async with (
        backend.http() as http,
        http.get(f"{backend.url}/api/v1/namespaces/{namespace}/secrets", params=query) as resp,
    ):
        return resp.status, await resp.json()


@pytest.fixture
async def labelled(backend: backends.Backend, namespace: str) -> str:
    """Secret ``a`` of type Opaque with ``LABELS``, alone in its namespace (which it returns)."""
    async with backend.http() as http:
        body = {"metadata": {"name": "a", "labels": LABELS}, "type": "Opaque"}
        async with http.post(f"{backend.url}/api/v1/namespaces/{namespace}/secrets", json=body) as resp:
            assert resp.status == 201
    return namespace


async def test_label_selectors_through_the_api(backend: backends.Backend, labelled: str) -> None:
    for selector, matches in LABEL_CASES:
        status, listing = await _listed(backend, labelled, labelSelector=selector)
        assert status == 200, (selector, listing)
        assert [i["metadata"]["name"] for i in listing["items"]] == (["a"] if matches else []), selector
    for selector in BAD_LABEL_SELECTORS:
        status, answer = await _listed(backend, labelled, labelSelector=selector)
        assert (status, answer["reason"]) == (400, "BadRequest"), selector


async def test_field_selectors_through_the_api(backend: backends.Backend, labelled: str) -> None:
    for selector, matches in FIELD_CASES:
        status, listing = await _listed(
            backend, labelled, fieldSelector=selector.replace("default", labelled)
        )
        assert status == 200, (selector, listing)
        assert [i["metadata"]["name"] for i in listing["items"]] == (["a"] if matches else []), selector
    status, answer = await _listed(backend, labelled, fieldSelector="spec.x=1")
    assert (status, answer["reason"]) == (400, "BadRequest")
    assert answer["message"] == "field label not supported: spec.x"
