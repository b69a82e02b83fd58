"""sandbox.kubeapi.selectors: label and field selector parsing and matching (pure)."""

from __future__ import annotations

import pytest

from sandbox.kubeapi import errors, selectors

LABELS = {"app": "web", "tier": "front", "rank": "3"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
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
    ],
)
def test_label_selector_matching(selector: str, matches: bool) -> None:
    assert selectors.parse_labels(selector).matches(LABELS) is matches


@pytest.mark.parametrize(
    "selector",
    [
        "app=web,",
        "app in web",
        "app in (web",
        "=web",
        "app=we b",
        "app=web tier=front",
        "-bad-=x",
        "rank>x",
    ],
)
def test_bad_label_selectors_are_400(selector: str) -> None:
    with pytest.raises(errors.ApiError) as info:
        selectors.parse_labels(selector)
    assert info.value.code == 400 and info.value.reason == "BadRequest"


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("metadata.name=a", True),
        ("metadata.name==a", True),
        ("metadata.name!=a", False),
        ("metadata.namespace=default", True),
        ("metadata.name=a,metadata.namespace=other", False),
        ("type=Opaque", True),
        ("", True),
    ],
)
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
