"""fleet.verdicts and fleet.controlplanes: each control plane's phase and why it is not Ready, each site's
verdict from the hub's Site status and the bus, and the fleet's problems. Tables, no I/O."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest

from fleet import controlplanes, verdicts
from hub.api import site as site_api

NOW = dt.datetime(2026, 12, 2, 8, 0, 0, tzinfo=dt.UTC)


def ago(seconds: float) -> dt.datetime:
    return NOW - dt.timedelta(seconds=seconds)


def rkcp(
    name: str = "site-a-1",
    *,
    site: str = "site-a",
    ready: bool | None = None,
    deleting: bool = False,
    conditions: dict[str, tuple[str, str]] | None = None,
    message: str = "",
) -> dict[str, Any]:
    conditions = conditions or {}
    obj: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": "default",
            "ownerReferences": [{"kind": "Cluster", "name": f"{name}-cluster"}],
        },
        "spec": {"site": site, "version": "v1.31.0"},
    }
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2026-11-30T12:00:00Z"
    if ready is not None or conditions:
        obj["status"] = {
            "ready": bool(ready),
            "conditions": [
                {"type": t, "status": s, "reason": r, "message": message} for t, (s, r) in conditions.items()
            ],
        }
    return obj


def site(
    name: str = "site-a",
    *,
    connected: bool | None = True,
    heartbeat: float | None = 5,
    conditions: dict[str, tuple[str, str, str]] | None = None,
    expires: dt.datetime | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {"agentVersion": "0.9.0", "trustedKeyIds": ["k1"], "backlog": 0}
    if connected is not None:
        status["connected"] = connected
    if heartbeat is not None:
        status["lastHeartbeatTime"] = ago(heartbeat).isoformat()
    status["conditions"] = [
        {"type": t, "status": s, "reason": r, "message": m, "lastTransitionTime": NOW.isoformat()}
        for t, (s, r, m) in (conditions or {}).items()
    ]
    if expires is not None:
        status["credential"] = {"publicKey": "UABC", "expiresAt": expires.isoformat()}
    return {
        "apiVersion": "kamaji-broker.io/v1alpha1",
        "kind": "Site",
        "metadata": {"name": name},
        "status": status,
    }


KUBECONFIG = {("default", "site-a-1-cluster-kubeconfig")}
NONE: set[tuple[str, str]] = set()
TCP_READY = "TenantControlPlaneReady"
DELIVERED = "IntentDelivered"


def waiting(type_: str, status: str, reason: str) -> dict[str, Any]:
    return rkcp(ready=False, conditions={type_: (status, reason)})


PHASES = [
    pytest.param(rkcp(), NONE, "Requested", False, id="new"),
    pytest.param(waiting(DELIVERED, "Unknown", "NotPublished"), NONE, "Requested", False, id="unpublished"),
    pytest.param(waiting(DELIVERED, "False", "Pending"), NONE, "Delivering", False, id="unanswered"),
    pytest.param(waiting(TCP_READY, "False", "Provisioning"), NONE, "Provisioning", False, id="provisioning"),
    pytest.param(waiting(TCP_READY, "False", "Rejected"), NONE, "Rejected", False, id="site-refused"),
    pytest.param(waiting("Ready", "False", "Conflict"), NONE, "Conflict", False, id="conflict"),
    pytest.param(rkcp(ready=True), NONE, "WaitingForKubeconfig", False, id="ready-without-secret"),
    pytest.param(rkcp(ready=True), KUBECONFIG, "Ready", True, id="ready-with-secret"),
    pytest.param(rkcp(ready=True, deleting=True), KUBECONFIG, "Deleting", True, id="deleting"),
]  # fmt: skip


@pytest.mark.parametrize(("obj", "secrets", "phase", "done"), PHASES)
def test_phase(obj: dict[str, Any], secrets: set[tuple[str, str]], phase: str, done: bool) -> None:
    cp = controlplanes.new_control_plane(obj, secrets=secrets)
    assert (cp.phase, cp.done) == (phase, done)
    assert cp.cluster == "site-a-1-cluster"
    assert (cp.missing() == "") == done


def test_without_secrets_the_secrets_synced_condition_says_whether_the_kubeconfig_is_there() -> None:
    synced = rkcp(ready=True, conditions={"Ready": ("True", "Ready"), "SecretsSynced": ("True", "Synced")})
    unsynced = rkcp(ready=True, conditions={"SecretsSynced": ("False", "WaitingForSecrets")})
    assert controlplanes.new_control_plane(synced).done
    assert controlplanes.new_control_plane(unsynced).phase == "WaitingForKubeconfig"


def test_a_control_plane_not_ready_says_why_from_its_ready_condition() -> None:
    obj = rkcp(
        ready=False, conditions={"Ready": ("False", "SiteDisconnected")}, message="site-b is not connected"
    )
    cp = controlplanes.new_control_plane(obj, secrets=NONE)
    assert (cp.reason, cp.cause) == ("site-b is not connected", "SiteDisconnected: site-b is not connected")
    assert cp.missing() == "default/site-a-1 at site-a: not Ready (phase Requested): site-b is not connected"


B = verdicts.BusSite
BUS_ALIVE = B(heartbeat_at=ago(1), backlog=0, hub_pending=0)
NEVER: dict[str, Any] = {"connected": None, "heartbeat": None}
GONE = {"Connected": ("False", "HeartbeatMissing", "last heartbeat at 07:00")}

# (site object, bus view, connected, problem reasons)
SITES = [
    pytest.param(site(), None, True, [], id="hub-says-connected"),
    pytest.param(site(), BUS_ALIVE, True, [], id="bus-alive"),
    pytest.param(site(heartbeat=290), BUS_ALIVE, True, [], id="hub-copy-within-its-write-interval-is-fine"),
    pytest.param(site(), B(heartbeat_at=ago(45), backlog=3), False, ["HeartbeatMissing"], id="bus-stale"),
    pytest.param(site(heartbeat=700), BUS_ALIVE, True, ["HubNotUpdating"], id="hub-not-updating"),
    pytest.param(site(**NEVER), BUS_ALIVE, True, ["HubNotUpdating"], id="hub-never-wrote"),
    pytest.param(site(**NEVER), B(heartbeat_at=ago(1), backlog=0, agent_started_at=ago(700)), True,
                 ["HubNotUpdating"], id="hub-never-wrote-for-a-long-running-agent"),
    pytest.param(site(**NEVER), B(heartbeat_at=ago(1), backlog=0, agent_started_at=ago(5)), True, [],
                 id="agent-just-started-hub-not-yet-caught-up"),
    pytest.param(site(heartbeat=6 * 3600), None, None, ["StatusStale"], id="no-bus-and-the-hubs-copy-is-old"),
    pytest.param(site(heartbeat=400), None, True, [], id="no-bus-hubs-copy-within-its-write-interval"),
    pytest.param(site(**NEVER), None, None, ["NoHeartbeat"], id="never-beat"),
    pytest.param(site(connected=False, conditions=GONE), None, False, ["HeartbeatMissing"], id="gone"),
    pytest.param(
        site(conditions={"SigningKeyTrusted": ("False", "NotTrusted", "the hub signs with key k2")}),
        BUS_ALIVE, True, ["NotTrusted"], id="key-not-trusted",
    ),
    pytest.param(site(expires=ago(1)), BUS_ALIVE, True, ["CredentialExpired"], id="credential-expired"),
    pytest.param(site(expires=NOW + dt.timedelta(hours=1)), BUS_ALIVE, True, [], id="credential-valid"),
    pytest.param(site(), B(error="permission denied"), True, ["BusUnreadable"], id="bus-unreadable"),
    pytest.param(site(), B(heartbeat_at=ago(1)), True, [], id="no-consumer-nothing-placed"),
    # stale_after (30 s) is the reader's guess; an agent that says its interval is judged by it.
    pytest.param(site(), B(heartbeat_at=ago(7), backlog=0, heartbeat_interval=2), False, ["HeartbeatMissing"],
                 id="late-by-the-interval-its-heartbeat-says"),
    pytest.param(site(), B(heartbeat_at=ago(45), backlog=0, heartbeat_interval=20), True, [],
                 id="a-slow-agent-on-time-by-its-own-interval"),
]  # fmt: skip


def test_a_late_heartbeat_says_the_interval_it_was_judged_by() -> None:
    bus = {"site-a": B(heartbeat_at=ago(7), backlog=0, heartbeat_interval=2)}
    (row,) = verdicts.new_fleet([site()], [], now=NOW, bus=bus, stale_after=30).sites
    assert [p.message for p in row.problems] == [
        "agent not connected: its last heartbeat is 7s old (it beats every 2s)"
    ]
    assert row.heartbeat_interval == 2
    (hubs,) = verdicts.new_fleet([site()], [], now=NOW).sites
    assert hubs.heartbeat_interval is None


def test_no_consumer_for_a_site_with_control_planes_is_a_problem() -> None:
    bus = {"site-a": B(heartbeat_at=ago(1))}
    (row,) = verdicts.new_fleet([site()], [rkcp()], now=NOW, bus=bus).sites
    assert [p.reason for p in row.problems] == ["NoConsumer"]


@pytest.mark.parametrize(("obj", "bus", "connected", "reasons"), SITES)
def test_site_verdict(
    obj: dict[str, Any], bus: verdicts.BusSite | None, connected: bool | None, reasons: list[str]
) -> None:
    f = verdicts.new_fleet([obj], [], now=NOW, bus=None if bus is None else {"site-a": bus}, stale_after=30)
    (row,) = f.sites
    assert row.connected is connected
    assert [p.reason for p in row.problems] == reasons
    assert f.healthy is (not reasons)
    assert all(str(p) for p in row.problems)


def test_ages_and_backlog_come_from_the_bus_when_it_was_read() -> None:
    bus = verdicts.BusSite(heartbeat_at=ago(2), backlog=7, hub_pending=1)
    (row,) = verdicts.new_fleet([site(heartbeat=25)], [], now=NOW, bus={"site-a": bus}).sites
    assert (row.heartbeat_age, row.backlog, row.hub_pending) == (2.0, 7, 1)
    (hubs,) = verdicts.new_fleet([site(heartbeat=25)], [], now=NOW).sites
    assert (hubs.heartbeat_age, hubs.backlog, hubs.hub_pending) == (25.0, 0, None)
    assert (hubs.agent_version, hubs.trusted_key_ids) == ("0.9.0", ("k1",))


def test_a_site_named_only_by_control_planes_is_a_problem_and_the_fleet_lists_everything() -> None:
    f = verdicts.new_fleet(
        [site("site-a")],
        [
            rkcp(
                "site-a-1",
                ready=True,
                conditions={"Ready": ("True", "Ready"), "SecretsSynced": ("True", "S")},
            ),
            rkcp("site-a-2", conditions={TCP_READY: ("False", "Provisioning")}),
            rkcp("lost-1", site="site-c"),
        ],
        now=NOW,
        notes=["the bus: cannot connect"],
    )
    assert [s.name for s in f.sites] == ["site-a", "site-c"]
    a, c = f.sites
    assert a.phases == {"Provisioning": 1, "Ready": 1} and a.requested == 2 and a.problems == ()
    assert [p.reason for p in c.problems] == ["NoSite"]
    assert (f.ready, f.done, f.healthy) == (1, False, False)
    assert f.problems() == [
        "site site-c: no Site object: the hub refuses control planes placed here (kubectl apply the Site)",
        "the bus: cannot connect",
        "default/site-a-2 at site-a: not Ready (phase Provisioning)",
        "default/lost-1 at site-c: not Ready (phase Requested)",
    ]


def test_an_empty_fleet_is_healthy() -> None:
    f = verdicts.new_fleet([], [], now=NOW, bus={})
    assert (f.sites, f.control_planes, f.healthy, f.done, f.bus) == ((), (), True, True, True)


def serving_with_its_site_gone(beat: dt.datetime) -> dict[str, Any]:
    """An RKCP as the hub writes it once its site stopped beating: still serving, not Ready."""
    obj = rkcp(ready=True)
    obj["status"]["conditions"] = [
        {"type": "Ready", "status": "False", "reason": "HeartbeatMissing",
         "message": f"* SiteConnected: last heartbeat {beat.isoformat()}"},
        {"type": "SiteConnected", "status": "False", "reason": "HeartbeatMissing",
         "message": f"last heartbeat {beat.isoformat()}"},
        {"type": "Available", "status": "True", "reason": "Available", "message": ""},
    ]  # fmt: skip
    return obj


def test_a_control_plane_serving_while_its_ready_condition_is_false_is_serving_not_ready() -> None:
    """Ready means one thing: the PHASE says Ready only when the count of Ready ones counts it."""
    obj = serving_with_its_site_gone(ago(40.5))
    cp = controlplanes.new_control_plane(obj, secrets=KUBECONFIG, now=NOW)
    assert (cp.done, cp.healthy, cp.phase) == (True, False, "Serving")
    assert cp.missing() == ""
    assert cp.problem() == "default/site-a-1 at site-a: serving, but not Ready: site site-a not connected " \
        "(last heartbeat 40s ago)"  # fmt: skip
    f = verdicts.new_fleet([site()], [obj], now=NOW, secrets=KUBECONFIG)
    assert (f.done, f.ready, f.healthy) == (True, 0, False)
    assert f.problems() == [cp.problem()]
    # The age moves from one look to the next; what events compare does not.
    later = controlplanes.new_control_plane(obj, secrets=KUBECONFIG, now=NOW + dt.timedelta(seconds=30))
    assert later.reason.endswith("(last heartbeat 70s ago)") and later.cause == cp.cause
    good = rkcp(ready=True, conditions={"Ready": ("True", "Ready")})
    assert controlplanes.new_control_plane(good, secrets=KUBECONFIG).phase == "Ready"


def test_a_multi_line_ready_message_is_one_line() -> None:
    obj = rkcp(ready=False, conditions={"Ready": ("False", "MultipleNotReady")}, message="* A: x\n* B: y\n")
    cp = controlplanes.new_control_plane(obj, secrets=NONE)
    assert (cp.reason, cp.cause) == ("x; y", "MultipleNotReady: * A: x * B: y")


def test_without_the_bus_the_hubs_word_for_a_gone_agent_has_an_age_not_a_timestamp() -> None:
    gone = {"Connected": ("False", "HeartbeatMissing", f"last heartbeat {ago(90).isoformat()}")}
    (row,) = verdicts.new_fleet([site(connected=False, conditions=gone)], [], now=NOW).sites
    assert [p.message for p in row.problems] == ["agent not connected (last heartbeat 90s ago)"]


def topology_cluster(name: str, *, ref: bool = False, failed: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "topology": {"class": "kamaji-broker", "version": "v1.31.0",
                     "variables": [{"name": "site", "value": "site-a"}]},
    }  # fmt: skip
    if ref:
        spec["controlPlaneRef"] = {"kind": "RemoteKamajiControlPlane", "name": f"{name}-x7k2p"}
    conditions = [
        {"type": "TopologyReconciled", "status": "False", "severity": "Error",
         "reason": "TopologyReconcileFailed", "message": failed}
    ] if failed else []  # fmt: skip
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
        "status": {"conditions": conditions},
    }


def test_a_cluster_of_a_class_without_its_control_plane_yet_stands_in_for_it_saying_why() -> None:
    plain = {"metadata": {"name": "plain", "namespace": "default"}, "spec": {}}
    clusters = [
        topology_cluster("lost", failed="ClusterClass default/kamaji-brokr not found"),
        topology_cluster("new"),
        topology_cluster("made", ref=True),
        topology_cluster("site-a-1"),  # its RKCP exists already, the Cluster not yet pointed at it
        plain,
    ]
    made = [controlplanes.new_control_plane(rkcp("site-a-1-x7k2p"))]
    made = [dataclasses.replace(made[0], cluster="site-a-1")]
    waiting = controlplanes.waiting_clusters(clusters, made, now=NOW)
    assert [(cp.name, cp.site, cp.phase, cp.version, cp.healthy) for cp in waiting] == [
        ("lost", "site-a", "WaitingForTopology", "v1.31.0", False),
        ("new", "site-a", "WaitingForTopology", "v1.31.0", False),
    ]
    lost, new = waiting
    assert lost.problem() == (
        "default/lost at site-a: not Ready (phase WaitingForTopology): "
        "ClusterClass default/kamaji-brokr not found"
    )
    assert new.reason == "waiting for the topology controller to make its control plane"


WHY_WITH_A_TIME = rkcp(
    ready=True,
    conditions={"Ready": ("False", "HeartbeatMissing"), "SiteConnected": ("False", "HeartbeatMissing")},
    message=f"* SiteConnected: last heartbeat {ago(300).isoformat()}",
)


@pytest.mark.parametrize("secrets", [None, NONE, KUBECONFIG], ids=["conditions", "no-secret", "secret"])
@pytest.mark.parametrize(
    "obj", [*(p.values[0] for p in PHASES), WHY_WITH_A_TIME], ids=[*(str(p.id) for p in PHASES), "why-aged"]
)
def test_made_from_what_a_watcher_keeps_a_control_plane_is_what_its_object_makes(
    obj: dict[str, Any], secrets: set[tuple[str, str]] | None
) -> None:
    # A watcher observes once, without a clock, and ages at each look.
    kept = controlplanes.from_observed(controlplanes.observe(obj), secrets=secrets)
    assert controlplanes.aged(kept, NOW) == controlplanes.new_control_plane(obj, secrets=secrets, now=NOW)


def test_a_kept_reason_keeps_its_timestamps_until_a_look_ages_them() -> None:
    kept = controlplanes.from_observed(controlplanes.observe(WHY_WITH_A_TIME))
    assert ago(300).isoformat() in kept.reason
    assert controlplanes.aged(kept, NOW).reason == "site site-a not connected (last heartbeat 5m ago)"


def test_assembled_from_control_planes_made_before_the_fleet_is_new_fleets() -> None:
    objs = [rkcp("b-1", site="site-b", ready=True), rkcp("a-2", ready=True), rkcp("a-1", ready=False)]
    sites = [site("site-a"), site("site-c")]
    bus = {"site-a": BUS_ALIVE}
    made = verdicts.new_fleet(sites, objs, now=NOW, bus=bus, secrets=KUBECONFIG)
    cps = [controlplanes.new_control_plane(o, secrets=KUBECONFIG, now=NOW) for o in objs]
    by_name = {s["metadata"]["name"]: site_api.Site.model_validate(s) for s in sites}
    assert verdicts.assemble(by_name, cps, now=NOW, bus=bus) == made
    assert [s.name for s in made.sites] == ["site-a", "site-b", "site-c"]
