"""agent.tcp.managed: the body the agent applies, and drift: what that apply would change.

Tables of (desired spec before, the TCP at the site, desired spec now). The site's TCP is built
the way it happens: applied from the first intent, then changed by the CRD's defaulting (owned
by nobody) or a site admin (an Update: the fields it changes become the admin's). The apply is
checked with the emulator's server-side apply (``tests.agent.applying``).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from agent.tcp import fieldpaths, managed
from tests import helpers
from tests.agent import applying

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


def _changed(obj: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = out["spec"]
        for key in parents:
            node = node.setdefault(key, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return out


def site_tcp(
    applied: dict[str, Any], *, seq: int = 1, defaults: bool = False, **changes: Any
) -> dict[str, Any]:
    """The TCP the agent applied from ``applied``, then changed at the site (``changes`` as in
    ``spec``): by a site admin's ``kubectl edit``, or (``defaults``) by the CRD's defaulting,
    which no manager owns."""
    obj = applying.applied(managed.desired(helpers.intent(spec=applied), seq=seq))
    if defaults:
        return _changed(obj, changes)
    return applying.updated(obj, _changed(obj, changes), manager="kubectl-edit")


KAMAJI: dict[str, Any] = {  # what Kamaji's CRD defaulting adds beside our fields (nobody owns it)
    "networkProfile__port": 6443,
    "controlPlane__service__additionalMetadata__annotations": {"kamaji": "x"},
    "addons__coreDNS__dnsServiceIPs": ["10.96.0.10"],
}


def test_leaves_are_scalars_lists_and_empty_maps_and_the_fields_of_list_items() -> None:
    assert managed.leaves({"a": {"b": 1, "c": [1, {"x": 1}], "d": {}, "s": [1, 2]}, "e": "x"}) == [
        ("a", "b"),
        ("a", "c"),
        ("a", "c", 0),
        ("a", "c", 1, "x"),
        ("a", "d"),
        ("a", "s"),
        ("e",),
    ]


DRIFT: list[tuple[str, dict[str, Any], dict[str, Any], list[str]]] = [
    # id, desired spec, TCP at the site, drift paths
    ("as applied", BASE, site_tcp(BASE), []),
    ("Kamaji's defaults beside ours", BASE, site_tcp(BASE, defaults=True, **KAMAJI), []),
    (
        "version and replicas edited",
        BASE,
        site_tcp(BASE, kubernetes__version="v1.20.0", controlPlane__deployment__replicas=5),
        ["controlPlane.deployment.replicas", "kubernetes.version"],
    ),
    (
        "a service label edited",
        BASE,
        site_tcp(BASE, controlPlane__service__additionalMetadata__labels={**LABELS, "tier": "x"}),
        ["controlPlane.service.additionalMetadata.labels.tier"],
    ),
    (
        "an owned field removed at the site",
        BASE,
        site_tcp(BASE, dataStore=None),
        ["dataStore"],
    ),
    (
        "a list reordered (lists are atomic)",
        BASE,
        site_tcp(BASE, networkProfile__certSANs=["b.example.com", "a.example.com"]),
        ["networkProfile.certSANs"],
    ),
    (
        "an empty map we own is filled by Kamaji",
        BASE,
        site_tcp(BASE, defaults=True, addons__coreDNS={"dnsServiceIPs": ["10.96.0.10"]}),
        [],
    ),
    (
        "an empty map we own replaced by a scalar",
        BASE,
        site_tcp(BASE, addons__coreDNS="off"),
        ["addons.coreDNS"],
    ),
    (
        "certSANs no longer wanted, still at the site",
        spec(networkProfile__certSANs=None),
        site_tcp(BASE),
        ["networkProfile.certSANs"],
    ),
    (
        "service labels no longer wanted",
        spec(controlPlane__service__additionalMetadata=None),
        site_tcp(BASE, defaults=True, **KAMAJI),
        [
            "controlPlane.service.additionalMetadata.labels.team.example.com/owner",
            "controlPlane.service.additionalMetadata.labels.tier",
        ],
    ),
    (
        "a new field wanted",
        spec(kubernetes__admissionControllers=["LimitRanger"]),
        site_tcp(BASE),
        ["kubernetes.admissionControllers"],
    ),
]


@pytest.mark.parametrize(("want", "tcp", "paths"), [d[1:] for d in DRIFT], ids=[d[0] for d in DRIFT])
def test_drift(want: dict[str, Any], tcp: dict[str, Any], paths: list[str]) -> None:
    assert managed.drift(want, tcp) == paths
    assert managed.drifted(tcp, want) is bool(paths)
    assert managed.drifted(tcp, None) is False  # the spec applied is not known (yet)


def test_a_field_edited_back_to_our_value_is_not_ours_any_more() -> None:
    """kubectl edit to another value and back: the value is ours, the field a site admin's; the
    apply takes it back, or a later intent without it could not remove it."""
    edited = site_tcp(BASE, kubernetes__version="v1.20.0")
    back = applying.updated(
        edited, _changed(edited, {"kubernetes__version": "v1.31.0"}), manager="kubectl-edit"
    )
    assert managed.drift(BASE, back) == ["kubernetes.version"]
    assert (
        managed.drift(BASE, applying.applied(managed.desired(helpers.intent(spec=BASE), seq=1), back)) == []
    )


def test_numbers_compare_as_json_numbers_and_null_is_no_value() -> None:
    want = {"a": {"n": 2, "gone": None}, "b": 1}
    assert managed.leaves(want) == [("a", "n"), ("b",)]
    assert "gone" not in managed.desired(helpers.intent(spec=want), seq=1)["spec"]["a"]
    tcp = site_tcp(want)
    tcp["spec"]["a"]["n"] = 2.0  # what another JSON writer may send back
    assert managed.drift(want, tcp) == [] and managed.drifted(tcp, want) is False
    tcp["spec"]["a"]["n"] = 2.5
    assert managed.drift(want, tcp) == ["a.n"] and managed.drifted(tcp, want) is True


def test_an_older_agents_tcp_drifts_until_applied_and_its_annotations_are_ignored() -> None:
    """A TCP an older agent wrote by merge patch: no Apply of ours in its managedFields, and its
    ``applied-fields``/``applied-hash`` annotations. Every field we want is drift until the
    apply adopts it; the annotations are never read (whatever they say)."""
    tcp = applying.updated(
        {"metadata": {}}, managed.desired(helpers.intent(spec=BASE), seq=1), manager="OpenAPI-Generator"
    )
    notes = tcp["metadata"]["annotations"]
    notes["kamaji-broker.io/applied-fields"], notes["kamaji-broker.io/applied-hash"] = "not json", "x"
    assert managed.owned(tcp) is None
    assert managed.drift(BASE, tcp) == [managed._dotted(p) for p in fieldpaths.owned(managed.leaves(BASE))]
    adopted = applying.applied(managed.desired(helpers.intent(spec=BASE), seq=1), tcp)
    assert managed.drift(BASE, adopted) == [] and managed.drifted(adopted, BASE) is False


APPLIES: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    # id, TCP at the site, desired spec, the site's spec after the apply
    ("edits reverted, Kamaji's fields kept", _changed(site_tcp(BASE, kubernetes__version="v1"), KAMAJI), BASE,
     spec(**KAMAJI)),
    ("certSANs removed", site_tcp(BASE, defaults=True, **KAMAJI), spec(networkProfile__certSANs=None),
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
        site_tcp(BASE, defaults=True, **KAMAJI),
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
        site_tcp(BASE, defaults=True, addons__coreDNS={"dnsServiceIPs": ["10.96.0.10"]}),
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


@pytest.mark.parametrize(("tcp", "want", "after"), [p[1:] for p in APPLIES], ids=[p[0] for p in APPLIES])
def test_the_apply_sets_ours_and_the_server_removes_what_we_no_longer_apply(
    tcp: dict[str, Any], want: dict[str, Any], after: dict[str, Any]
) -> None:
    obj = applying.applied(managed.desired(helpers.intent(spec=want), seq=2, observed=tcp), tcp)
    assert obj["spec"] == after
    assert managed.drift(want, obj) == [] and managed.drifted(obj, want) is False
    assert obj["metadata"]["annotations"][managed.INTENT_SEQ] == "2"


def test_a_field_a_site_admin_owns_and_we_no_longer_want_stays() -> None:
    """kubectl edit set our certSANs to another value: theirs now; once the RKCP drops them, the
    apply leaves them (the server removes only what no other manager owns)."""
    tcp = site_tcp(BASE, networkProfile__certSANs=["theirs.example.com"])
    want = spec(networkProfile__certSANs=None)
    obj = applying.applied(managed.desired(helpers.intent(spec=want), seq=2, observed=tcp), tcp)
    assert obj["spec"]["networkProfile"]["certSANs"] == ["theirs.example.com"]
    assert managed.drift(want, obj) == []


def test_desired_is_a_copy_that_only_sets_what_we_own() -> None:
    intent = helpers.intent(spec=BASE)
    obj = managed.desired(intent, seq=1)
    obj["spec"]["kubernetes"]["version"] = "changed"
    assert intent.spec["kubernetes"]["version"] == "v1.31.0"
    assert not any("applied" in key for key in obj["metadata"]["annotations"])
    assert None not in obj["metadata"]["labels"].values()
