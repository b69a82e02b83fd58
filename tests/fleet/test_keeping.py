"""fleet.keeping: what a watcher keeps of each object, whether a change shows, and the look it
makes (the same as ``new_fleet`` from the objects). Tables, no I/O."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from fleet import keeping, verdicts
from tests.fleet.test_verdicts import BUS_ALIVE, KUBECONFIG, NOW, ago, rkcp, site

KEY = ("default", "site-a-1")
SECRET = ("default", "site-a-1-cluster-kubeconfig")


class Counted:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> None:
        self.n += 1


def kept(*, secrets: bool = False) -> tuple[keeping.Kept, Counted]:
    changed = Counted()
    k = keeping.Kept(changed=changed, secrets=secrets)
    k.put_site(site())
    k.put_rkcp(KEY, rkcp(ready=True, conditions={"Ready": ("True", "Ready"), "SecretsSynced": ("True", "S")}))
    changed.n = 0
    return k, changed


def _status(obj: dict[str, Any], **fields: Any) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["status"].update(fields)
    return obj


def written(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as a write returns it: with a new resourceVersion."""
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": "2"}}


READY = rkcp(ready=True, conditions={"Ready": ("True", "Ready"), "SecretsSynced": ("True", "S")})

# (what happens to the kept Site and RKCP, whether a look would show it)
CHANGES: list[Any] = [
    pytest.param(lambda k: k.put_site(written(site(heartbeat=1))), False, id="site-heartbeat-time-only"),
    pytest.param(lambda k: k.put_site(written(site(connected=False))), True, id="site-disconnected"),
    pytest.param(lambda k: k.put_site(site("site-b")), True, id="site-added"),
    pytest.param(lambda k: k.drop_site("site-a"), True, id="site-deleted"),
    pytest.param(lambda k: k.drop_site("site-z"), False, id="unknown-site-deleted"),
    pytest.param(
        lambda k: k.put_rkcp(KEY, written(_status(READY, replicas=3))), False, id="rkcp-unshown-field"
    ),
    pytest.param(lambda k: k.put_rkcp(KEY, _status(READY, version="v1.32.0")), True, id="rkcp-upgraded"),
    pytest.param(lambda k: k.put_rkcp(KEY, rkcp(ready=False)), True, id="rkcp-not-ready"),
    pytest.param(lambda k: k.put_rkcp(("default", "x"), rkcp("x")), True, id="rkcp-added"),
    pytest.param(lambda k: k.drop_rkcp(KEY), True, id="rkcp-deleted"),
    pytest.param(lambda k: k.drop_rkcp(("default", "x")), False, id="unknown-rkcp-deleted"),
]


@pytest.mark.parametrize(("change", "shows"), CHANGES)
def test_a_change_is_news_only_when_a_look_shows_it(
    change: Callable[[keeping.Kept], None], shows: bool
) -> None:
    k, changed = kept()
    change(k)
    assert (changed.n > 0) == shows


def test_a_kubeconfig_secret_makes_its_control_plane_ready_and_its_loss_unready() -> None:
    k, changed = kept(secrets=True)
    assert k.fleet(now=NOW).control_planes[0].phase == "WaitingForKubeconfig"
    k.put_secret(("default", "another-kubeconfig"))
    assert changed.n == 0  # no control plane's: no news
    k.put_secret(SECRET)
    assert k.fleet(now=NOW).control_planes[0].phase == "Ready"
    k.put_secret(SECRET)
    assert changed.n == 1  # the same again is no news
    k.drop_secret(SECRET)
    assert k.fleet(now=NOW).control_planes[0].phase == "WaitingForKubeconfig"


def test_the_look_is_what_new_fleet_makes_of_the_objects() -> None:
    k, _ = kept(secrets=True)
    objs = [READY, rkcp("b-1", site="site-b", ready=False)]
    k.put_rkcp(("default", "b-1"), objs[1])
    k.put_secret(SECRET)
    bus = {"site-a": BUS_ALIVE}
    want = verdicts.new_fleet([site()], objs, now=NOW, bus=bus, secrets=KUBECONFIG, stale_after=20)
    assert k.fleet(now=NOW, bus=bus, stale_after=20) == want
    assert k.site_names() == {"site-a", "site-b"}


TOPOLOGY = {
    "class": "kamaji-broker",
    "version": "v1.31.0",
    "variables": [{"name": "site", "value": "site-a"}],
}


def cluster(name: str, *, ref: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"topology": TOPOLOGY}
    if ref:
        spec["controlPlaneRef"] = {"kind": "RemoteKamajiControlPlane", "name": name}
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec}


def test_a_cluster_waits_for_its_control_plane_until_one_is_made_for_it() -> None:
    k, changed = kept()
    k.put_cluster(("default", "new"), cluster("new"))
    assert changed.n == 1
    assert [cp.phase for cp in k.fleet(now=NOW).control_planes] == ["Ready", "WaitingForTopology"]
    k.put_cluster(("default", "new"), cluster("new", ref=True))
    assert changed.n == 2
    assert [cp.name for cp in k.fleet(now=NOW).control_planes] == ["site-a-1"]
    # One whose RKCP is there already does not stand in for it twice.
    k.put_cluster(("default", "site-a-1-cluster"), cluster("site-a-1-cluster"))
    assert [cp.name for cp in k.fleet(now=NOW).control_planes] == ["site-a-1"]


BUS_CHANGES = [
    pytest.param(dataclasses.replace(BUS_ALIVE, heartbeat_at=ago(0)), False, id="a-new-heartbeat"),
    pytest.param(dataclasses.replace(BUS_ALIVE, backlog=4), True, id="a-backlog"),
    pytest.param(verdicts.BusSite(error="timeout"), True, id="unreadable"),
]


@pytest.mark.parametrize(("after", "news"), BUS_CHANGES)
def test_a_read_of_the_bus_is_news_but_for_when_the_heartbeat_arrived(
    after: verdicts.BusSite, news: bool
) -> None:
    before = {"site-a": BUS_ALIVE}
    assert (keeping.shown(before) != keeping.shown({"site-a": after})) == news
    assert keeping.shown(None) is None
