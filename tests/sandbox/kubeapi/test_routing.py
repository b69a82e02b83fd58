"""sandbox.kubeapi.serving.routing, discovery and tables: URL parsing, version order, printer columns (pure).

The emulator's own pieces, no server: run on the emulator only (its routing is tested against a
real server through the contract tests that use it: test_server, test_crud, test_watch)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from sandbox.kubeapi.kinds import discovery, tables
from sandbox.kubeapi.serving import routing
from sandbox.kubeapi.serving.routing import Target


@pytest.mark.parametrize(
    ("path", "target"),
    [
        ("/api/v1/namespaces", Target("", "v1", "namespaces")),
        ("/api/v1/namespaces/default", Target("", "v1", "namespaces", None, "default")),
        ("/api/v1/namespaces/default/status", Target("", "v1", "namespaces", None, "default", "status")),
        ("/api/v1/namespaces/default/secrets", Target("", "v1", "secrets", "default")),
        ("/api/v1/namespaces/default/secrets/s", Target("", "v1", "secrets", "default", "s")),
        ("/api/v1/secrets", Target("", "v1", "secrets")),
        ("/apis/k.io/v1/namespaces/ns/tcps/t/status", Target("k.io", "v1", "tcps", "ns", "t", "status")),
        ("/apis/k.io/v1/things/t/scale", Target("k.io", "v1", "things", None, "t", "scale")),
        ("/api/v1/watch/namespaces/ns/secrets", Target("", "v1", "secrets", "ns", legacy_watch=True)),
        ("/apis/k.io/v1/watch/things", Target("k.io", "v1", "things", legacy_watch=True)),
        ("/api/v1", None),
        ("/apis/k.io/v1", None),
        ("/apis/k.io/v1/namespaces/ns/a/b/c/d", None),
        ("/version", None),
    ],
)
def test_parse(path: str, target: Target | None) -> None:
    assert routing.parse(path) == target


def test_version_priority() -> None:
    versions = ["v1alpha1", "v2", "v1beta2", "foo", "v1", "v1beta1", "v10alpha1"]
    assert sorted(versions, key=discovery.version_priority) == [
        "v2",
        "v1",
        "v1beta2",
        "v1beta1",
        "v10alpha1",
        "v1alpha1",
        "foo",
    ]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (".spec.version", ["1.30"]),
        ('.status.conditions[?(@.type=="Ready")].status', ["True"]),
        (".status.conditions[*].type", ["Ready", "Synced"]),
        (".status.conditions[1].reason", ["Late"]),
        (".spec.missing", []),
        ("{.spec.version}", ["1.30"]),
        # CAPI's Cluster column: a label whose name has dots, escaped in a quoted key.
        (".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']", ["c1"]),
        (".metadata.labels['cluster.x-k8s.io/other']", []),
    ],
)
def test_jsonpath(path: str, expected: list[object]) -> None:
    obj = {
        "metadata": {"labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
        "spec": {"version": "1.30"},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "Synced", "status": "False", "reason": "Late"},
            ]
        },
    }
    assert tables.jsonpath(obj, path) == expected


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (5, "5s"),
        (119, "119s"),
        (150, "2m30s"),
        (600, "10m"),
        (3 * 3600 + 60, "3h1m"),
        (30 * 3600, "30h"),
        (3 * 86400, "3d"),
    ],
)
def test_human_age(seconds: int, shown: str) -> None:
    now = datetime(2024, 1, 10, tzinfo=UTC)
    stamp = datetime.fromtimestamp(now.timestamp() - seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert tables.human_age(stamp, now=now) == shown
