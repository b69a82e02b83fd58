"""agent.tcp.fieldpaths: a list of maps compares item by item, the fields we set only, so what the
CRD's defaulting adds inside an item is not drift and a real change is."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from agent.tcp import fieldpaths, managed
from tests import helpers
from tests.agent import applying

CONTAINERS: list[dict[str, Any]] = [
    {"name": "sidecar", "image": "busybox", "ports": [{"containerPort": 80}], "args": ["a", "b"]},
    {"name": "logger", "image": "fluent-bit"},
]
WANT: dict[str, Any] = {
    "controlPlane": {"deployment": {"replicas": 2, "additionalContainers": CONTAINERS}},
    "kubernetes": {"version": "v1.31.0"},
}


def at_site(**edit: Any) -> dict[str, Any]:
    """The TCP applied from WANT, then one container changed (``edit``: index → item) in place,
    as the CRD's defaulting does (owned by nobody): only the values differ, not who owns them."""
    obj = applying.applied(managed.desired(helpers.intent(spec=WANT), seq=1))
    containers = obj["spec"]["controlPlane"]["deployment"]["additionalContainers"]
    for key, item in edit.items():
        if key == "extra":
            containers.append(item)
        elif item is None:
            del containers[int(key[1:])]
        else:
            containers[int(key[1:])] = item
    return obj


def defaulted(item: dict[str, Any], **more: Any) -> dict[str, Any]:
    out = copy.deepcopy(item)
    for port in out.get("ports", []):
        port.setdefault("protocol", "TCP")
    out.setdefault("imagePullPolicy", "IfNotPresent")
    out.setdefault("terminationMessagePath", "/dev/termination-log")
    return {**out, **more}


PREFIX = "controlPlane.deployment.additionalContainers"
CASES: list[tuple[str, dict[str, Any], list[str], bool]] = [
    # id, the TCP at the site, drift paths (against WANT), drifted
    ("as applied", at_site(), [], False),
    (
        "the CRD's defaults inside the items (port protocol, pull policy)",
        at_site(i0=defaulted(CONTAINERS[0]), i1=defaulted(CONTAINERS[1])),
        [],
        False,
    ),
    (
        "an image changed",
        at_site(i1={**CONTAINERS[1], "image": "evil"}),
        [f"{PREFIX}[1].image"],
        True,
    ),
    (
        "a port changed, beside a default",
        at_site(i0=defaulted(CONTAINERS[0], ports=[{"containerPort": 81, "protocol": "TCP"}])),
        [f"{PREFIX}[0].ports[0].containerPort"],
        True,
    ),
    (
        "a field we set removed from an item",
        at_site(i0={k: v for k, v in CONTAINERS[0].items() if k != "args"}),
        [f"{PREFIX}[0].args"],
        True,
    ),
    (
        "a list of scalars inside an item reordered",
        at_site(i0={**CONTAINERS[0], "args": ["b", "a"]}),
        [f"{PREFIX}[0].args"],
        True,
    ),
    (
        "an item removed",
        at_site(i1=None),
        [PREFIX, f"{PREFIX}[1].image", f"{PREFIX}[1].name"],
        True,
    ),
    ("an item added at the site", at_site(extra={"name": "miner", "image": "x"}), [PREFIX], True),
    (
        "items swapped",
        at_site(i0=CONTAINERS[1], i1=CONTAINERS[0]),
        [
            *(f"{PREFIX}[0].{f}" for f in ("args", "image", "name", "ports", "ports[0].containerPort")),
            f"{PREFIX}[1].image",
            f"{PREFIX}[1].name",
        ],
        True,
    ),
]


@pytest.mark.parametrize(("tcp", "paths", "drifted"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_list_items_compare_by_the_fields_we_set(
    tcp: dict[str, Any], paths: list[str], drifted: bool
) -> None:
    assert managed.drift(WANT, tcp) == paths
    assert managed.drifted(tcp, WANT) is drifted


def test_a_list_of_maps_reads_whole_as_its_length_by_items() -> None:
    spec = {"a": [{"x": 1}], "b": {"c": ["s"]}}
    assert fieldpaths.value_at(spec, ("a",)) == [{"x": 1}]
    assert fieldpaths.value_at(spec, ("a",), by_items=True) == {"$items": 1}


@pytest.mark.parametrize(
    ("paths", "owned"),
    [
        ([("a", "b"), ("a", "c"), ("a", "c", 0, "x"), ("a", "c", 1)], [("a", "b"), ("a", "c")]),
        ([("l", 0, "m", 2, "n")], [("l",)]),
        ([], []),
    ],
)
def test_ownership_stays_by_list(paths: list[fieldpaths.Path], owned: list[fieldpaths.Owned]) -> None:
    assert fieldpaths.owned(paths) == owned


def test_sort_is_total_over_a_mixed_record() -> None:
    """A record edited at the site may mix a key and an index at one depth: no TypeError."""
    assert fieldpaths.sort([("a", "x"), ("a", 0), ("a",)]) == [("a",), ("a", "x"), ("a", 0)]


@pytest.mark.parametrize(
    ("want", "removed"),
    [(WANT, False), ({**WANT, "controlPlane": {"deployment": {"replicas": 2}}}, True)],
    ids=["a changed item: the list is applied whole", "the list no longer wanted: removed whole"],
)
def test_the_apply_writes_and_removes_a_list_whole(want: dict[str, Any], removed: bool) -> None:
    """Ownership stays by list: the apply replaces it (atomic) or the server removes it (the
    site then defaults the items again, which is not drift)."""
    tcp = at_site(i0=defaulted(CONTAINERS[0], image="evil"), i1=defaulted(CONTAINERS[1]))
    obj = applying.applied(managed.desired(helpers.intent(spec=want), seq=2, observed=tcp), tcp)
    containers = obj["spec"]["controlPlane"]["deployment"].get("additionalContainers")
    if removed:
        assert containers is None
    else:
        assert containers == want["controlPlane"]["deployment"]["additionalContainers"]
        containers[:] = [defaulted(c) for c in containers]  # what the site's defaulting does
    assert managed.drift(want, obj) == [] and managed.drifted(obj, want) is False
