"""hub.controllers.cache.ObjectCache: every object comes back as it was put (slimmed), whichever
sample it was deflated against, and objects of one kind cost a fraction of their JSON."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from hub.controllers import cache


def rkcp(i: int, *, ready: bool) -> dict[str, Any]:
    """An RKCP-like object: a Ready one carries conditions, a new one none."""
    obj: dict[str, Any] = {
        "apiVersion": "controlplane.cluster.x-k8s.io/v1alpha1",
        "kind": "RemoteKamajiControlPlane",
        "metadata": {"name": f"cp-{i}", "namespace": "default", "uid": f"uid-{i:08d}", "generation": 1},
        "spec": {"site": f"site-{i % 7}", "version": "v1.31.0", "replicas": 2},
    }
    if ready:
        kinds = ("SiteConnected", "IntentDelivered", "StatusFresh", "Available", "Ready")
        obj["status"] = {
            "ready": True,
            "conditions": [
                {"type": t, "status": "True", "reason": "AsExpected", "observedGeneration": 1,
                 "lastTransitionTime": f"2026-12-07T18:{i % 60:02d}:04Z", "message": ""}
                for t in kinds
            ],
        }  # fmt: skip
    return obj


@pytest.mark.parametrize("count", [1, 2, 15, 16, 17, 300])
def test_every_object_comes_back_as_it_was_put(count: int) -> None:
    c = cache.ObjectCache()
    put = {("default", f"cp-{i}"): rkcp(i, ready=i % 3 == 0) for i in range(count)}
    for key, obj in put.items():
        c.put(key, obj)
    assert len(c) == count
    assert {key: c.get(key) for key in c} == put


def test_an_object_put_again_and_popped() -> None:
    c = cache.ObjectCache()
    for i in range(20):
        c.put(("default", f"cp-{i}"), rkcp(i, ready=False))
    c.put(("default", "cp-3"), rkcp(3, ready=True))
    c.pop(("default", "cp-4"))
    c.pop(("default", "absent"))
    assert c.get(("default", "cp-3")) == rkcp(3, ready=True)
    assert c.get(("default", "cp-4")) is None and ("default", "cp-4") not in c
    assert len(c) == 19


def test_a_ready_object_costs_a_fraction_of_its_json_once_the_sample_is_one() -> None:
    c = cache.ObjectCache()
    for i in range(16):  # the cache's sixteenth object: it chooses its sample again
        c.put(("default", f"cp-{i}"), rkcp(i, ready=i == 5))
    c.put(("default", "cp-99"), rkcp(99, ready=True))
    size = len(msgspec.json.encode(rkcp(99, ready=True)))
    assert len(c._raw[("default", "cp-99")]) * 4 < size
    assert c.get(("default", "cp-99")) == rkcp(99, ready=True)


def test_an_object_too_large_to_be_the_sample_is_kept_all_the_same() -> None:
    c = cache.ObjectCache()
    big = rkcp(1, ready=True)
    big["metadata"]["annotations"] = {"note": "x" * (cache._SAMPLE_MAX + 1)}
    c.put(("default", "big"), big)
    for i in range(2, 40):
        c.put(("default", f"cp-{i}"), rkcp(i, ready=True))
    assert c.get(("default", "big")) == big
    assert len(c._sample) <= cache._SAMPLE_MAX
