"""agent.tcps: which spec fields we own, drift, and the patch that sets them and removes the rest.

Tables of (desired spec before, the TCP at the site, desired spec now). The site's TCP is built
the way it happens: created from the first intent, then changed by Kamaji (defaults) or a site
admin (edits). The patch is checked by applying it with the emulator's merge-patch algorithm.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from agent import tcps
from sandbox.kubeapi import patching
from tests import helpers

LABELS = {"team.example.com/owner": "a", "tier": "gold"}
BASE: dict[str, Any] = {
    "controlPlane": {
        "deployment": {"replicas": 2},
        "service": {"serviceType": "LoadBalancer", "additionalMetadata": {"labels": LABELS}},
    },
    "kubernetes": {"version": "v1.31.0", "kubelet": {"cgroupfs": "systemd"}},
    "networkProfile": {"certSANs": ["a.example.com", "b.example.com"], "address": "10.0.0.9"},
    "dataStore": "etcd-1",
    "addons": {"coreDNS": {}},
}


def spec(**changes: Any) -> dict[str, Any]:
    """BASE with dotted-path changes; a value of None removes the field."""
    out = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = out
        for key in parents:
            node = node.setdefault(key, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return out


def site_tcp(applied: dict[str, Any], *, seq: int = 1, **changes: Any) -> dict[str, Any]:
    """The TCP created from ``applied``, then changed at the site (``changes`` as in ``spec``)."""
    obj = tcps.desired(helpers.intent(spec=applied), seq=seq)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = obj["spec"]
        for key in parents:
            node = node.setdefault(key, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return obj


KAMAJI: dict[str, Any] = {  # what Kamaji's CRD defaulting and controller add beside our fields
    "networkProfile__port": 6443,
    "controlPlane__service__additionalMetadata__annotations": {"kamaji": "x"},
    "addons__coreDNS__dnsServiceIPs": ["10.96.0.10"],
}


def test_leaves_are_scalars_lists_and_empty_maps_and_the_fields_of_list_items() -> None:
    assert tcps.leaves({"a": {"b": 1, "c": [1, {"x": 1}], "d": {}, "s": [1, 2]}, "e": "x"}) == [
        ("a", "b"),
        ("a", "c"),
        ("a", "c", 0),
        ("a", "c", 1, "x"),
        ("a", "d"),
        ("a", "s"),
        ("e",),
    ]


DRIFT: list[tuple[str, dict[str, Any], dict[str, Any], list[str], bool]] = [
    # id, desired spec, TCP at the site, drift paths, drifted (from the annotations alone)
    ("as applied", BASE, site_tcp(BASE), [], False),
    ("Kamaji's defaults beside ours", BASE, site_tcp(BASE, **KAMAJI), [], False),
    (
        "version and replicas edited",
        BASE,
        site_tcp(BASE, kubernetes__version="v1.20.0", controlPlane__deployment__replicas=5),
        ["controlPlane.deployment.replicas", "kubernetes.version"],
        True,
    ),
    (
        "a service label edited",
        BASE,
        site_tcp(BASE, controlPlane__service__additionalMetadata__labels={**LABELS, "tier": "x"}),
        ["controlPlane.service.additionalMetadata.labels.tier"],
        True,
    ),
    (
        "an owned field removed at the site",
        BASE,
        site_tcp(BASE, dataStore=None),
        ["dataStore"],
        True,
    ),
    (
        "a list reordered (lists are atomic)",
        BASE,
        site_tcp(BASE, networkProfile__certSANs=["b.example.com", "a.example.com"]),
        ["networkProfile.certSANs"],
        True,
    ),
    (
        "an empty map we own is filled by Kamaji",
        BASE,
        site_tcp(BASE, addons__coreDNS={"dnsServiceIPs": ["10.96.0.10"]}),
        [],
        False,
    ),
    (
        "an empty map we own replaced by a scalar",
        BASE,
        site_tcp(BASE, addons__coreDNS="off"),
        ["addons.coreDNS"],
        True,
    ),
    (
        "certSANs no longer wanted, still at the site",
        spec(networkProfile__certSANs=None),
        site_tcp(BASE),
        ["networkProfile.certSANs"],
        False,
    ),
    (
        "service labels no longer wanted",
        spec(controlPlane__service__additionalMetadata=None),
        site_tcp(BASE, **KAMAJI),
        [
            "controlPlane.service.additionalMetadata.labels.team.example.com/owner",
            "controlPlane.service.additionalMetadata.labels.tier",
        ],
        False,
    ),
    (
        "a new field wanted",
        spec(kubernetes__admissionControllers=["LimitRanger"]),
        site_tcp(BASE),
        ["kubernetes.admissionControllers"],
        False,
    ),
]


@pytest.mark.parametrize(
    ("want", "tcp", "paths", "drifted"), [d[1:] for d in DRIFT], ids=[d[0] for d in DRIFT]
)
def test_drift(want: dict[str, Any], tcp: dict[str, Any], paths: list[str], drifted: bool) -> None:
    assert tcps.drift(want, tcp) == paths
    assert tcps.drifted(tcp) is drifted


def test_numbers_compare_as_json_numbers_and_null_is_no_value() -> None:
    want = {"a": {"n": 2, "gone": None}, "b": 1}
    assert tcps.leaves(want) == [("a", "n"), ("b",)]
    tcp = site_tcp(want)
    tcp["spec"]["a"]["n"] = 2.0  # what another JSON writer may send back
    assert tcps.drift(want, tcp) == [] and tcps.drifted(tcp) is False
    tcp["spec"]["a"]["n"] = 2.5
    assert tcps.drift(want, tcp) == ["a.n"] and tcps.drifted(tcp) is True


def test_drift_without_the_record_compares_the_desired_fields_only() -> None:
    # A TCP an older agent applied (no applied-fields): what we want is still compared;
    # what we may have set before cannot be known, and drifted() cannot tell.
    tcp = site_tcp(BASE, kubernetes__version="v1.20.0")
    for key in (tcps.APPLIED_FIELDS, tcps.APPLIED_HASH):
        del tcp["metadata"]["annotations"][key]
    assert tcps.drift(spec(dataStore=None), tcp) == ["kubernetes.version"]
    assert tcps.drifted(tcp) is False
    tcp["metadata"]["annotations"][tcps.APPLIED_FIELDS] = "not json"
    tcp["metadata"]["annotations"][tcps.APPLIED_HASH] = "x"
    assert tcps.owned_fields(tcp) is None and tcps.drifted(tcp) is False


PATCHES: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    # id, TCP at the site, desired spec, the site's spec after the patch
    ("edits reverted, Kamaji's fields kept", site_tcp(BASE, kubernetes__version="v1", **KAMAJI), BASE,
     spec(**KAMAJI)),
    ("certSANs removed", site_tcp(BASE, **KAMAJI), spec(networkProfile__certSANs=None),
     spec(networkProfile__certSANs=None, **KAMAJI)),
    ("address removed", site_tcp(BASE), spec(networkProfile__address=None),
     spec(networkProfile__address=None)),
    ("dataStore removed", site_tcp(BASE), spec(dataStore=None), spec(dataStore=None)),
    (
        "service labels removed: the map goes with them",
        site_tcp(BASE),
        spec(controlPlane__service__additionalMetadata=None),
        spec(controlPlane__service__additionalMetadata=None),
    ),
    (
        "service labels removed, Kamaji's annotations beside them stay",
        site_tcp(BASE, **KAMAJI),
        spec(controlPlane__service__additionalMetadata=None),
        spec(controlPlane__service__additionalMetadata={"annotations": {"kamaji": "x"}}, **{
            k: v for k, v in KAMAJI.items() if "additionalMetadata" not in k
        }),
    ),
    (
        "one label removed, the other kept",
        site_tcp(BASE),
        spec(controlPlane__service__additionalMetadata={"labels": {"tier": "gold"}}),
        spec(controlPlane__service__additionalMetadata={"labels": {"tier": "gold"}}),
    ),
    (
        "an addon removed: Kamaji's defaults inside it go with it",
        site_tcp(BASE, addons__coreDNS={"dnsServiceIPs": ["10.96.0.10"]}),
        spec(addons=None),
        spec(addons=None),
    ),
    (
        "a field removed by a site admin before we stop wanting it",
        site_tcp(BASE, dataStore=None),
        spec(dataStore=None),
        spec(dataStore=None),
    ),
    (
        "a map we owned becomes a scalar",
        site_tcp(BASE),
        spec(addons="none"),
        spec(addons="none"),
    ),
]  # fmt: skip


@pytest.mark.parametrize(("tcp", "want", "after"), [p[1:] for p in PATCHES], ids=[p[0] for p in PATCHES])
def test_patch_sets_ours_and_removes_what_we_no_longer_want(
    tcp: dict[str, Any], want: dict[str, Any], after: dict[str, Any]
) -> None:
    patch = tcps.patch_for(helpers.intent(spec=want), seq=2, observed=tcp)
    patched = patching.merge_patch(tcp, patch)
    assert patched["spec"] == after
    assert tcps.drift(want, patched) == [] and tcps.drifted(patched) is False
    assert patched["metadata"]["annotations"][tcps.INTENT_SEQ] == "2"


def test_patch_without_the_record_removes_nothing() -> None:
    tcp = site_tcp(BASE)
    del tcp["metadata"]["annotations"][tcps.APPLIED_FIELDS]
    patch = tcps.patch_for(helpers.intent(spec=spec(dataStore=None)), seq=2, observed=tcp)
    assert patch["spec"] == spec(dataStore=None)
    assert patching.merge_patch(tcp, patch)["spec"]["dataStore"] == "etcd-1"


def test_desired_is_a_copy_and_the_record_names_paths_never_values() -> None:
    intent = helpers.intent(spec=BASE)
    obj = tcps.desired(intent, seq=1)
    obj["spec"]["kubernetes"]["version"] = "changed"
    assert intent.spec["kubernetes"]["version"] == "v1.31.0"
    notes = obj["metadata"]["annotations"]
    assert "etcd-1" not in notes[tcps.APPLIED_FIELDS] and "10.0.0.9" not in notes[tcps.APPLIED_FIELDS]
    label = ["controlPlane", "service", "additionalMetadata", "labels", "team.example.com/owner"]
    assert label in json.loads(notes[tcps.APPLIED_FIELDS])
