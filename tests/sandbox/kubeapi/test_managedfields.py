"""sandbox.kubeapi.apply.managedfields: field sets, Update and Apply as tables (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.kubeapi import errors
from sandbox.kubeapi.apply import fieldsets, managedfields

SET = {"properties": {"spec": {"properties": {"tags": {"x-kubernetes-list-type": "set"}}}}}
NOW = "2026-01-01T00:00:00Z"


def entry(manager: str, operation: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {"manager": manager, "operation": operation, "apiVersion": "v1", "time": NOW, "fieldsV1": fields}


@pytest.mark.parametrize(
    ("value", "leaves_only", "expected"),
    [
        ({"spec": {"a": 1, "b": {}}}, True, {"f:spec": {"f:a": {}, "f:b": {}}}),
        (
            {"spec": {"a": 1, "b": {"c": 2}}},
            False,
            {"f:spec": {".": {}, "f:a": {}, "f:b": {".": {}, "f:c": {}}}},
        ),
        ({"spec": {"list": [1, 2]}}, True, {"f:spec": {"f:list": {}}}),
        ({"spec": {"tags": ["x", "y"]}}, True, {"f:spec": {"f:tags": {'v:"x"': {}, 'v:"y"': {}}}}),
        ({"spec": {"tags": ["x"]}}, False, {"f:spec": {".": {}, "f:tags": {".": {}, 'v:"x"': {}}}}),
        ({"metadata": {"labels": {"k": "v"}}}, False, {"f:metadata": {"f:labels": {".": {}, "f:k": {}}}}),
    ],
    ids=["leaves", "nodes", "atomic list", "set", "set nodes", "metadata is no member"],
)
def test_members_as_fields_v1(value: dict[str, Any], leaves_only: bool, expected: dict[str, Any]) -> None:
    found = managedfields.members(value, managedfields.with_meta(SET), leaves_only=leaves_only)
    assert fieldsets.fields_v1(found) == expected
    assert fieldsets.paths_of(expected) == set(found)


def test_an_update_takes_what_it_changes_and_drops_what_it_removes() -> None:
    old = {"spec": {"a": 1, "b": 2, "c": 3}}
    new = {"spec": {"a": 9, "b": 2, "d": 4}}
    managed = [entry("agent", "Apply", {"f:spec": {"f:a": {}, "f:b": {}, "f:c": {}}})]
    after = managedfields.updated(old, new, managed, manager="kubectl", schema={}, api_version="v1", now=NOW)
    assert [(e["manager"], e["fieldsV1"]) for e in after] == [
        ("agent", {"f:spec": {"f:b": {}}}),
        ("kubectl", {"f:spec": {"f:a": {}, "f:d": {}}}),
    ]


@pytest.mark.parametrize(
    ("live", "config", "force", "expected_spec", "expected_mine"),
    [
        ({"spec": {"a": 1, "b": {"c": 2}}}, {"spec": {"a": 1}}, False, {"a": 1}, {"f:spec": {"f:a": {}}}),
        ({"spec": {"a": 1, "o": 5}}, {"spec": {"a": 2}}, True, {"a": 2, "o": 5}, {"f:spec": {"f:a": {}}}),
        ({"spec": {"tags": ["x", "z"]}}, {"spec": {"tags": ["y"]}}, False, {"tags": ["z", "y"]}, None),
    ],
    ids=["removes what it no longer applies", "force takes a field", "a set keeps others' items"],
)
def test_apply(
    live: dict[str, Any], config: dict[str, Any], force: bool, expected_spec: Any, expected_mine: Any
) -> None:
    managed = [
        entry("agent", "Apply", {"f:spec": {"f:a": {}, "f:b": {"f:c": {}}, "f:tags": {'v:"x"': {}}}}),
        entry("admin", "Update", {"f:spec": {"f:o": {}, "f:tags": {'v:"z"': {}}}}),
    ]
    if force:
        managed[1]["fieldsV1"]["f:spec"]["f:a"] = {}
    obj, after = managedfields.applied(
        live, config, managed, manager="agent", force=force, schema=SET, api_version="v1", now=NOW
    )
    assert obj["spec"] == expected_spec
    mine = next(e["fieldsV1"] for e in after if e["manager"] == "agent")
    assert mine == (expected_mine or fieldsets.fields_v1(fieldsets.paths_of(mine)))
    if force:
        assert next(e for e in after if e["manager"] == "admin")["fieldsV1"] == {
            "f:spec": {"f:o": {}, "f:tags": {'v:"z"': {}}}
        }


def test_an_unforced_apply_of_another_managers_field_conflicts() -> None:
    managed = [entry("admin", "Update", {"f:spec": {"f:a": {}}})]
    with pytest.raises(errors.ApiError) as info:
        managedfields.applied(
            {"spec": {"a": 1}}, {"spec": {"a": 2}}, managed,
            manager="agent", force=False, schema={}, api_version="v1", now=NOW,
        )  # fmt: skip
    assert (info.value.code, info.value.message) == (
        409, 'Apply failed with 1 conflict: conflict with "admin" using v1: .spec.a'
    )  # fmt: skip
