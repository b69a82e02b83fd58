"""agent.tcp.propagation: which propagated labels and annotations a TCP may carry, and how they merge
with what others set there, as tables."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.tcp import managed, propagation

PROBLEMS: list[tuple[str, dict[str, str], dict[str, str], str | None]] = [
    # id, labels, annotations, the words of the refusal (None: accepted)
    ("nothing", {}, {}, None),
    (
        "CAPI's and a user's keys",
        {"cluster.x-k8s.io/cluster-name": "c1", "team": "blue", "empty": ""},
        {"example.com/note": "any text: at all\n", "cluster.x-k8s.io/paused": ""},
        None,
    ),
    ("a name with dots, dashes and underscores", {"a.b-c_d": "x.y-z_0"}, {}, None),
    (
        "our own label",
        {managed.MANAGED_BY: "someone"},
        {},
        "label key 'kamaji-broker.io/managed-by': the kamaji-broker.io/",
    ),
    (
        "our own annotation",
        {},
        {managed.OWNER_UID: "u-2"},
        "annotation key 'kamaji-broker.io/owner-uid': the kamaji-broker.io/",
    ),
    ("our record itself", {}, {propagation.PROPAGATED: "{}"}, "annotation key 'kamaji-broker.io/propagated'"),
    ("a subdomain of ours", {"x.kamaji-broker.io/site": "a"}, {}, "the kamaji-broker.io/ keys"),
    ("two slashes", {"a/b/c": "v"}, {}, "label key 'a/b/c': must be a qualified name"),
    ("an empty prefix", {"/name": "v"}, {}, "its prefix must be a DNS-1123 subdomain"),
    ("an upper-case prefix", {"Example.com/name": "v"}, {}, "its prefix must be a DNS-1123 subdomain"),
    ("a prefix over 253", {"a" * 254 + "/n": "v"}, {}, "at most 253"),
    ("an empty name", {}, {"example.com/": "v"}, "annotation key 'example.com/': its name must be 1 to 63"),
    ("a name over 63", {"n" * 64: "v"}, {}, "its name must be 1 to 63"),
    ("a name ending in a dash", {"team-": "v"}, {}, "its name must be 1 to 63"),
    ("a space in a key", {}, {"a b": "v"}, "annotation key 'a b'"),
    ("a label value with a space", {"team": "a b"}, {}, "label 'team': its value must be empty or 1 to 63"),
    ("a label value ending in a dot", {"team": "blue."}, {}, "label 'team': its value"),
    ("annotations over 256 KiB", {}, {"a": "x" * 200_000, "b": "y" * 70_000}, "annotations: 270002 bytes"),
]


@pytest.mark.parametrize(
    ("labels", "annotations", "words"), [c[1:] for c in PROBLEMS], ids=[c[0] for c in PROBLEMS]
)
def test_problem(labels: dict[str, str], annotations: dict[str, str], words: str | None) -> None:
    why = propagation.problem(labels, annotations)
    if words is None:
        assert why is None
    else:
        assert why is not None and words in why


def tcp(labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"labels": labels, "annotations": annotations}}


def record(labels: list[str], annotations: list[str]) -> str:
    return json.dumps({"labels": labels, "annotations": annotations}, separators=(",", ":"))


MERGES: list[tuple[str, dict[str, str], dict[str, str], dict[str, Any] | None, Any, Any]] = [
    # id, wanted labels, wanted annotations, observed TCP, labels out, annotations out
    ("nothing to propagate, a TCP to create", {}, {}, None, {}, {}),
    (
        "created with its record",
        {"team": "blue"},
        {"note": "n"},
        None,
        {"team": "blue"},
        {"note": "n", propagation.PROPAGATED: record(["team"], ["note"])},
    ),
    (
        "a removed label goes, one somebody else set stays untouched",
        {"team": "red"},
        {},
        tcp(
            {"team": "blue", "env": "prod", "kamaji.clastix.io/x": "k"},
            {propagation.PROPAGATED: record(["env", "team"], [])},
        ),
        {"env": None, "team": "red"},
        {propagation.PROPAGATED: record(["team"], [])},
    ),
    (
        "a key we never set is not removed even when the RKCP lacks it",
        {},
        {"note": "n"},
        tcp({"theirs": "x"}, {"their-note": "y"}),
        {},
        {"note": "n", propagation.PROPAGATED: record([], ["note"])},
    ),
    (
        "the last propagated key goes with the record",
        {},
        {},
        tcp({"team": "blue"}, {"note": "n", propagation.PROPAGATED: record(["team"], ["note"])}),
        {"team": None},
        {"note": None, propagation.PROPAGATED: None},
    ),
    (
        "a record naming our own keys never removes them",
        {},
        {},
        tcp({managed.SITE: "site-a"}, {propagation.PROPAGATED: record([managed.SITE], [managed.OWNER_UID])}),
        {},
        {propagation.PROPAGATED: None},
    ),
    (
        "an unreadable record removes nothing",
        {"team": "blue"},
        {},
        tcp({"old": "x"}, {propagation.PROPAGATED: "not json"}),
        {"team": "blue"},
        {propagation.PROPAGATED: record(["team"], [])},
    ),
]


@pytest.mark.parametrize(
    ("labels", "annotations", "observed", "labels_out", "annotations_out"),
    [c[1:] for c in MERGES],
    ids=[c[0] for c in MERGES],
)
def test_merged(
    labels: dict[str, str],
    annotations: dict[str, str],
    observed: dict[str, Any] | None,
    labels_out: dict[str, Any],
    annotations_out: dict[str, Any],
) -> None:
    assert propagation.merged(labels, annotations, observed) == (labels_out, annotations_out)


DIFFERS: list[tuple[str, dict[str, str], dict[str, Any], bool]] = [
    (
        "as wanted",
        {"team": "blue"},
        tcp({"team": "blue", "x": "y"}, {propagation.PROPAGATED: record(["team"], [])}),
        False,
    ),
    (
        "a value changed",
        {"team": "red"},
        tcp({"team": "blue"}, {propagation.PROPAGATED: record(["team"], [])}),
        True,
    ),
    ("the record missing", {"team": "blue"}, tcp({"team": "blue"}, {}), True),
    (
        "a removed key still there",
        {},
        tcp({"team": "blue"}, {propagation.PROPAGATED: record(["team"], [])}),
        True,
    ),
    ("nothing wanted, nothing recorded", {}, tcp({"team": "blue"}, {}), False),
]


@pytest.mark.parametrize(
    ("labels", "observed", "expected"), [c[1:] for c in DIFFERS], ids=[c[0] for c in DIFFERS]
)
def test_differs(labels: dict[str, str], observed: dict[str, Any], expected: bool) -> None:
    assert propagation.differs(labels, {}, observed) is expected
