"""fleet.view: the status table, its JSON, and the events between two looks."""

from __future__ import annotations

import json
from dataclasses import replace

from fleet import verdicts, view
from fleet.controlplanes import ControlPlane

OK = verdicts.SiteRow(
    name="site-a",
    connected=True,
    heartbeat_age=1.4,
    backlog=0,
    phases={"Ready": 2},
    agent_version="0.9.0",
    trusted_key_ids=("k1", "k2"),
    problems=(),
)
GONE = verdicts.Problem("HeartbeatMissing", "agent not connected: its last heartbeat is 95s old")
DOWN = verdicts.SiteRow(
    name="site-b",
    connected=False,
    heartbeat_age=95,
    backlog=3,
    phases={"Provisioning": 1},
    agent_version="0.9.0",
    trusted_key_ids=("k1",),
    problems=(GONE,),
)


def cp(name: str, site: str, phase: str, *, version: str = "v1.31.0", reason: str = "") -> ControlPlane:
    ready = phase == "Ready"
    return ControlPlane(
        namespace="default", name=name, cluster=name, site=site, phase=phase, ready=ready, kubeconfig=ready,
        version=version, reason=reason,
    )  # fmt: skip


SLOW = cp("b-1", "site-b", "Provisioning", reason="TenantControlPlaneNotReady: provisioning at site-b")
FLEET = verdicts.Fleet(
    sites=(OK, DOWN),
    control_planes=(cp("a-1", "site-a", "Ready"), cp("a-2", "site-a", "Ready"), SLOW),
    bus=True,
)


def test_the_table_shows_every_site_and_only_what_is_not_ready_then_the_problems() -> None:
    assert view.table(FLEET) == [
        "  SITE    CONNECTED  HEARTBEAT  BACKLOG  AGENT  KEYS   CONTROL PLANES",
        "  site-a  yes        1s         0        0.9.0  k1,k2  2 Ready",
        "  site-b  NO         95s        3        0.9.0  k1     1 Provisioning",
        "",
        "  CONTROL PLANE  SITE    PHASE         VERSION  WHY NOT READY",
        "  default/b-1    site-b  Provisioning  v1.31.0  TenantControlPlaneNotReady: provisioning at site-b",
        "",
        "Problems:",
        "  site site-b: agent not connected: its last heartbeat is 95s old",
        "  default/b-1 at site-b: not Ready (phase Provisioning): "
        "TenantControlPlaneNotReady: provisioning at site-b",
    ]


def test_the_problems_listed_are_all_of_them_and_as_many_as_counted() -> None:
    # Control planes still serving whose Ready condition says their site is gone: no site problem
    # (the bus not read yet says nothing of the site), two control planes not Ready.
    serving = [replace(cp(n, "site-b", "Ready"), reason="HeartbeatMissing: site-b") for n in ("b-1", "b-2")]
    f = verdicts.Fleet(sites=(replace(DOWN, problems=()),), control_planes=tuple(serving))
    lines = view.table(f)
    listed = lines[lines.index("Problems:") + 1 :]
    assert listed == [f"  {p}" for p in f.problems()] and len(listed) == 2
    cut = view.table(f, limit=1)
    assert cut[cut.index("Problems:") + 1 :] == [f"  {f.problems()[0]}", "  ... and 1 more"]


def test_all_ready_says_so_and_every_control_plane_can_be_listed_unfinished_first() -> None:
    healthy = verdicts.Fleet(sites=(OK,), control_planes=FLEET.control_planes[:2])
    assert view.table(healthy)[-1] == "  all 2 control planes are Ready"
    alone = verdicts.Fleet(sites=(OK,), control_planes=FLEET.control_planes[:1])
    assert view.table(alone)[-1] == "  the control plane is Ready"
    assert view.table(verdicts.Fleet(sites=(OK,), control_planes=()))[-1] == "  no control planes"
    rows = view.table(FLEET, all_control_planes=True, limit=2)
    header = rows.index(next(r for r in rows if r.startswith("  CONTROL PLANE ")))
    assert [r.split()[0] for r in rows[header + 1 : header + 3]] == ["default/b-1", "default/a-1"]
    assert "  ... and 1 more" in rows


def test_ages_read_as_people_do() -> None:
    assert [view._age(s) for s in (None, 0.4, 119, 600, 7300)] == ["-", "0s", "119s", "10m", "2h"]


def test_json_has_every_site_and_control_plane_and_the_verdict() -> None:
    doc = json.loads(json.dumps(view.to_json(FLEET)))
    assert doc["healthy"] is False and doc["busRead"] is True
    assert doc["sites"][1] == {
        "name": "site-b",
        "connected": False,
        "heartbeatAgeSeconds": 95,
        "backlog": 3,
        "hubPending": None,
        "heartbeatIntervalSeconds": None,
        "agentVersion": "0.9.0",
        "trustedKeyIds": ["k1"],
        "controlPlanes": {"Provisioning": 1},
        "problems": [
            {"reason": "HeartbeatMissing", "message": "agent not connected: its last heartbeat is 95s old"}
        ],
    }
    assert [c["name"] for c in doc["controlPlanes"]] == ["a-1", "a-2", "b-1"]
    assert doc["controlPlanes"][2]["reason"] == "TenantControlPlaneNotReady: provisioning at site-b"
    assert doc["problems"] == [
        "site site-b: agent not connected: its last heartbeat is 95s old",
        "default/b-1 at site-b: not Ready (phase Provisioning): "
        "TenantControlPlaneNotReady: provisioning at site-b",
    ]


def test_events_name_each_change_once() -> None:
    before = verdicts.Fleet(
        sites=(OK,), control_planes=(cp("a-1", "site-a", "Ready"), cp("a-2", "site-a", "Ready"))
    )
    rejected = cp(
        "a-1", "site-a", "Rejected", version="v1.32.0", reason="Rejected: version v1.32.0 is not supported"
    )
    gone = replace(OK, name="site-a", connected=False, problems=(GONE,), phases={"Rejected": 1})
    after = verdicts.Fleet(sites=(gone,), control_planes=(rejected,))
    assert view.events(before, after) == [
        "default/a-1 (site-a): version v1.31.0 -> v1.32.0",
        "default/a-1 (site-a): Ready -> Rejected: Rejected: version v1.32.0 is not supported",
        "default/a-2 (site-a): deleted",
        "site site-a: agent not connected: its last heartbeat is 95s old",
        "site site-a: 1 Rejected",
    ]
    # The same problem a moment later (an older heartbeat) is not news; its end is.
    older = replace(gone, problems=(verdicts.Problem("HeartbeatMissing", "... 99s old"),))
    assert view.events(after, verdicts.Fleet(sites=(older,), control_planes=(rejected,))) == []
    back = verdicts.Fleet(sites=(replace(OK, phases={"Rejected": 1}),), control_planes=(rejected,))
    assert view.events(after, back) == ["site site-a: healthy again"]
    assert view.events(None, before) == [
        "default/a-1 (site-a): Ready",
        "default/a-2 (site-a): Ready",
        "site site-a: 2 Ready",
    ]


def test_a_serving_control_plane_losing_and_regaining_its_ready_condition_is_news() -> None:
    serving = cp("a-1", "site-a", "Ready")
    cause = "HeartbeatMissing: * SiteConnected: last heartbeat 2026-12-02T07:59:48+00:00"
    unready = replace(
        serving, phase="Serving", reason="site site-a not connected (last heartbeat 12s ago)", cause=cause
    )
    before = verdicts.Fleet(sites=(OK,), control_planes=(serving,))
    during = verdicts.Fleet(sites=(OK,), control_planes=(unready,))
    assert view.events(before, during) == [
        "default/a-1 (site-a): Ready -> Serving: site site-a not connected (last heartbeat 12s ago)"
    ]
    # The same cause a moment later (its age moved) is not news; another cause is.
    older = replace(unready, reason="site site-a not connected (last heartbeat 13s ago)")
    assert view.events(during, verdicts.Fleet(sites=(OK,), control_planes=(older,))) == []
    other = replace(
        unready, reason="site site-a: its credential was revoked", cause="CredentialsRevoked: ..."
    )
    assert view.events(during, verdicts.Fleet(sites=(OK,), control_planes=(other,))) == [
        "default/a-1 (site-a): still Serving, now: site site-a: its credential was revoked"
    ]
    assert view.events(during, before) == ["default/a-1 (site-a): Serving -> Ready"]
    assert view.table(during)[3:5] == [
        "  CONTROL PLANE  SITE    PHASE    VERSION  WHY NOT READY",
        "  default/a-1    site-a  Serving  v1.31.0  site site-a not connected (last heartbeat 12s ago)",
    ]
    doc = view.to_json(during)["controlPlanes"][0]
    assert (doc["ready"], doc["serving"], doc["phase"]) == (False, True, "Serving")


def test_a_site_that_goes_away_is_news() -> None:
    assert view.events(FLEET, verdicts.Fleet(sites=(OK,), control_planes=FLEET.control_planes[:2])) == [
        "default/b-1 (site-b): deleted",
        "site site-b: gone (its Site deleted, nothing placed there)",
    ]


def test_a_cluster_waiting_for_its_topology_shows_and_its_control_plane_is_no_deletion() -> None:
    waiting = replace(
        cp("c1", "site-a", "WaitingForTopology"), reason="ClusterClass default/nope not found", cause="x"
    )
    before = verdicts.Fleet(sites=(OK,), control_planes=(waiting,))
    assert view.events(None, before)[0] == (
        "default/c1 (site-a): WaitingForTopology: ClusterClass default/nope not found"
    )
    made = replace(cp("c1-x7k2p", "site-a", "Provisioning"), cluster="c1")
    after = verdicts.Fleet(sites=(OK,), control_planes=(made,))
    assert view.events(before, after) == ["default/c1-x7k2p (site-a): Provisioning"]


def test_what_is_printed_holds_nothing_a_terminal_acts_on_whatever_the_objects_held() -> None:
    # Written to the cluster before the hub cleaned what sites send, or by hand: still harmless.
    evil = replace(OK, agent_version="0.1.0\x1b[2J\x1b[31mHACKED", trusted_key_ids=("k\u202e1",))
    lying = cp("a-3", "site-a", "Failed", reason="Failed: \x1b[2J\x1b[H\x1b[32mhealthy\x1b]8;;x\x07")
    f = replace(FLEET, sites=(evil, DOWN), control_planes=(*FLEET.control_planes, lying))
    lines = view.printable(view.table(f))
    assert all(line.isprintable() for line in lines)
    assert any("0.1.0\\x1b[2J\\x1b[31mHACKED" in line for line in lines)
    assert any("\\x1b[H\\x1b[32mhealthy" in line for line in lines)
    assert all(e.isprintable() for e in view.printable(view.events(FLEET, f)))
