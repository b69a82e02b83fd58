"""common.objects.slim: what a cache of ours drops from an object, by table."""

from __future__ import annotations

from typing import Any

import pytest

from common import objects
from hub.controllers.cache import ObjectCache

MANAGED = [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]
APPLIED = {objects.LAST_APPLIED: '{"spec":{"replicas":3}}', "team": "a"}


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        pytest.param({"spec": {"a": 1}}, {"spec": {"a": 1}}, id="no-metadata"),
        pytest.param({"metadata": {"name": "x"}}, {"metadata": {"name": "x"}}, id="nothing-to-drop"),
        pytest.param(
            {"metadata": {"name": "x", "managedFields": MANAGED}, "spec": {"a": 1}},
            {"metadata": {"name": "x"}, "spec": {"a": 1}},
            id="managed-fields",
        ),
        pytest.param(
            {"metadata": {"name": "x", "annotations": APPLIED}},
            {"metadata": {"name": "x", "annotations": {"team": "a"}}},
            id="last-applied",
        ),
        pytest.param(
            {"metadata": {"annotations": {objects.LAST_APPLIED: "{}"}, "managedFields": MANAGED}},
            {"metadata": {"annotations": {}}},
            id="both",
        ),
    ],
)
def test_slim(given: dict[str, Any], kept: dict[str, Any]) -> None:
    before = repr(given)
    assert objects.slim(given) == kept
    assert repr(given) == before  # the object given is left as it was


def test_the_hub_cache_keeps_the_slim_object() -> None:
    cache = ObjectCache()
    cache.put(("ns", "x"), {"metadata": {"name": "x", "managedFields": MANAGED, "annotations": APPLIED}})
    assert cache.get(("ns", "x")) == {"metadata": {"name": "x", "annotations": {"team": "a"}}}


def test_a_cache_drops_the_fields_its_readers_need_not() -> None:
    cache = ObjectCache(drop=("status",))
    given = {
        "metadata": {"name": "x", "managedFields": MANAGED},
        "spec": {"paused": True},
        "status": {"phase": "x"},
    }
    cache.put(("ns", "x"), given)
    assert cache.get(("ns", "x")) == {"metadata": {"name": "x"}, "spec": {"paused": True}}
    assert "status" in given  # the object given is left as it was
