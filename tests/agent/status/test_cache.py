"""agent.status.cache: the TCP and Secret Sinks as ``common.kube.informer`` feeds them. No I/O."""

from __future__ import annotations

from typing import Any

from agent.status import cache
from common.kube import WatchEvent, informer

SITE = "site-a"


def obj(namespace: str, name: str, *, version: str = "1", uid: str = "") -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "resourceVersion": version, "uid": uid}}


def caches() -> tuple[cache.Tcps, cache.Secrets, list[cache.Key]]:
    changed: list[cache.Key] = []
    tcps = cache.Tcps(site=SITE, changed=changed.append)
    return tcps, cache.Secrets(tcps), changed


def test_a_relist_marks_what_vanished_in_its_namespace_gone_and_only_there() -> None:
    tcps, _, changed = caches()
    informer.relisted(tcps, [obj("a", "cp1"), obj("a", "cp2"), obj("b", "cp3")], None)
    assert sorted(changed) == [("a", "cp1"), ("a", "cp2"), ("b", "cp3")]
    changed.clear()
    informer.relisted(tcps, [obj("a", "cp1", version="2")], "a")
    assert sorted(changed) == [("a", "cp1"), ("a", "cp2")]
    assert tcps.entries[("a", "cp2")].gone and tcps.entries[("a", "cp2")].tcp is None
    assert tcps.entries[("b", "cp3")].tcp is not None
    assert tcps.count() == 2.0
    # Gone already: a Deleted is owed once, a second relist does not mark it again.
    changed.clear()
    informer.relisted(tcps, [obj("a", "cp1", version="2")], "a")
    assert changed == [("a", "cp1")]


def test_a_deleted_event_for_an_unknown_tcp_changes_nothing() -> None:
    tcps, _, changed = caches()
    informer.event(tcps, WatchEvent("DELETED", obj("a", "cp1")))
    assert changed == [] and tcps.entries == {}


def test_a_secret_change_reaches_its_known_tcp_only_when_its_version_changed() -> None:
    tcps, secrets, changed = caches()
    informer.relisted(secrets, [obj("a", "cp1-ca"), obj("a", "other")], None)
    assert changed == [] and list(secrets.known()) == [("a", "cp1-ca")]  # no TCP known yet
    informer.event(tcps, WatchEvent("ADDED", obj("a", "cp1", uid="u1")))
    changed.clear()
    informer.relisted(secrets, [obj("a", "cp1-ca"), obj("a", "cp1-admin-kubeconfig")], None)
    assert changed == [("a", "cp1")]  # the new kubeconfig; the CA is the same version
    changed.clear()
    informer.event(secrets, WatchEvent("MODIFIED", obj("a", "cp1-ca", version="2")))
    informer.event(secrets, WatchEvent("DELETED", obj("a", "cp1-admin-kubeconfig")))
    informer.event(secrets, WatchEvent("DELETED", obj("a", "other")))
    assert changed == [("a", "cp1"), ("a", "cp1")]
    assert list(secrets.known()) == [("a", "cp1-ca")]


def test_a_secret_owned_by_another_uid_is_not_reported() -> None:
    _, secrets, _ = caches()
    stale = obj("a", "cp1-ca")
    stale["metadata"]["ownerReferences"] = [{"uid": "old"}]
    informer.relisted(secrets, [stale], None)
    assert secrets.owned("a", "cp1-ca", obj("a", "cp1", uid="old")) == stale
    assert secrets.owned("a", "cp1-ca", obj("a", "cp1", uid="new")) is None
