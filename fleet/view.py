"""A ``fleet.verdicts.Fleet`` for people and scripts: the table ``kamaji-broker status`` prints and the
sandbox redraws, the JSON of ``status -o json``, and the events between two looks (what the
sandbox's live view prints as they happen). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from fleet import columns, controlplanes, verdicts, wording
from fleet.controlplanes import ControlPlane
from protocol import text

__all__ = ["counted", "events", "printable", "problem_lines", "table", "to_json"]


LINE_MAX = 4096
"""Characters of one printed line, at most (a table line is fitted to the terminal before)."""


def printable(lines: Iterable[str]) -> list[str]:
    """``lines`` as a terminal may be given them: what a site sent is made harmless when the hub
    takes it in, and again here, for whatever reached the cluster objects another way (an
    object written before the hub cleaned, a hand edit)."""
    return [text.harmless(line, limit=LINE_MAX) for line in lines]


def counted(n: int, noun: str) -> str:
    """``1 site``, ``2 sites``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _age(seconds: float | None) -> str:
    return "-" if seconds is None else wording.age(seconds)


def _all_ready(n: int) -> str:
    if n == 0:
        return "no control planes"
    return "the control plane is Ready" if n == 1 else f"all {n} control planes are Ready"


def _connected(site: verdicts.SiteRow) -> str:
    return {True: "yes", False: "NO", None: "-"}[site.connected]


def _phases(site: verdicts.SiteRow) -> str:
    return ", ".join(f"{n} {phase}" for phase, n in site.phases.items()) or "none"


# The columns a narrow screen drops first: what the site's agent runs matters less than how it is.
_SITE_OPTIONAL = (5, 4, 3)  # KEYS, AGENT, BACKLOG
_CP_OPTIONAL = (3, 1)  # VERSION, SITE


def site_lines(f: verdicts.Fleet, *, width: int | None = None) -> list[str]:
    rows = [("SITE", "CONNECTED", "HEARTBEAT", "BACKLOG", "AGENT", "KEYS", "CONTROL PLANES")]
    for s in f.sites:
        backlog = "-" if s.backlog is None else str(s.backlog)
        keys = ",".join(s.trusted_key_ids) or "-"
        rows.append(
            (s.name, _connected(s), _age(s.heartbeat_age), backlog, s.agent_version or "-", keys, _phases(s))
        )
    return columns.columns(rows, width=width, optional=_SITE_OPTIONAL)


def control_plane_lines(cps: Sequence[ControlPlane], *, limit: int, width: int | None = None) -> list[str]:
    rows = [("CONTROL PLANE", "SITE", "PHASE", "VERSION", "WHY NOT READY")]
    # Those still on their way are the interesting ones: first, when rows are cut.
    ordered = sorted(cps, key=lambda cp: cp.healthy)
    for cp in ordered[:limit]:
        why = "" if cp.healthy else cp.reason or cp.missing().partition(": ")[2]
        rows.append((f"{cp.namespace}/{cp.name}", cp.site, cp.phase, cp.version or "-", why))
    lines = columns.columns(rows, width=width, optional=_CP_OPTIONAL)
    if len(ordered) > limit:
        lines.append(f"  ... and {len(ordered) - limit} more")
    return lines


def table(
    f: verdicts.Fleet, *, all_control_planes: bool = False, limit: int = 20, width: int | None = None
) -> list[str]:
    """Sites, then the control planes (only those not Ready unless ``all_control_planes``), then
    the problems, each naming what to look at; ``width``: no line is longer (``fleet.columns``)."""
    lines = site_lines(f, width=width) if f.sites else ["  no sites"]
    cps = f.control_planes if all_control_planes else tuple(cp for cp in f.control_planes if not cp.healthy)
    lines.append("")
    if cps:
        lines += control_plane_lines(cps, limit=limit, width=width)
    else:
        lines.append(f"  {_all_ready(len(f.control_planes))}")
    return lines + problem_lines(f, limit=limit, width=width)


def problem_lines(f: verdicts.Fleet, *, limit: int, width: int | None = None) -> list[str]:
    """Every problem of the fleet, the control planes' too: a count given elsewhere (the header
    of ``status``) is the number of these, never of a part. Wrapped to ``width``, not cut: a
    problem is read whole."""
    problems = f.problems()
    if not problems:
        return []
    lines = ["", "Problems:", *(w for p in problems[:limit] for w in columns.wrap(f"  {p}", width))]
    if len(problems) > limit:
        lines.append(f"  ... and {len(problems) - limit} more")
    return lines


def to_json(f: verdicts.Fleet) -> dict[str, Any]:
    return {
        "healthy": f.healthy,
        "busRead": f.bus,
        "sites": [
            {
                "name": s.name,
                "connected": s.connected,
                "heartbeatAgeSeconds": s.heartbeat_age,
                "backlog": s.backlog,
                "hubPending": s.hub_pending,
                "heartbeatIntervalSeconds": s.heartbeat_interval,
                "agentVersion": s.agent_version or None,
                "trustedKeyIds": list(s.trusted_key_ids),
                "controlPlanes": dict(s.phases),
                "problems": [{"reason": p.reason, "message": p.message} for p in s.problems],
            }
            for s in f.sites
        ],
        "controlPlanes": [
            {
                "namespace": cp.namespace,
                "name": cp.name,
                "site": cp.site,
                "phase": cp.phase,
                "ready": cp.healthy,
                "serving": cp.done,
                "version": cp.version or None,
                "reason": cp.reason or None,
            }
            for cp in f.control_planes
        ],
        "problems": f.problems(),
        "notes": list(f.notes),
    }


def _why(cp: ControlPlane) -> str:
    """Why it is not Ready, as it stays from one look to the next (``reason`` holds ages)."""
    return cp.cause or cp.reason


def _cp_events(before: verdicts.Fleet | None, after: verdicts.Fleet) -> Iterable[str]:
    old = {(cp.namespace, cp.name): cp for cp in (before.control_planes if before else ())}
    for cp in after.control_planes:
        was = old.pop((cp.namespace, cp.name), None)
        where = f"{cp.namespace}/{cp.name} ({cp.site})"
        if was is not None and was.version and cp.version and was.version != cp.version:
            yield f"{where}: version {was.version} -> {cp.version}"
        if was is None or was.phase != cp.phase:
            change = f"{was.phase} -> {cp.phase}" if was is not None else cp.phase
            yield f"{where}: {change}" + (f": {cp.reason}" if cp.reason else "")
        elif cp.done and not cp.healthy and _why(was) != _why(cp):  # serving, for another reason
            yield f"{where}: still {cp.phase}, now: {cp.reason}"
    made = {(cp.namespace, cp.cluster) for cp in after.control_planes}
    for cp in old.values():
        # A Cluster that was waiting for its topology now has its RKCP (another name): not gone.
        if not (cp.phase == controlplanes.WAITING_FOR_TOPOLOGY and (cp.namespace, cp.cluster) in made):
            yield f"{cp.namespace}/{cp.name} ({cp.site}): deleted"


def _site_events(before: verdicts.Fleet | None, after: verdicts.Fleet) -> Iterable[str]:
    old = {s.name: s for s in (before.sites if before else ())}
    for s in after.sites:
        was = old.get(s.name)
        # By reason: the message of a lasting problem changes (ages) from one look to the next.
        known = {p.reason for p in was.problems} if was is not None else set()
        for problem in s.problems:
            if problem.reason not in known:
                yield f"site {s.name}: {problem}"
        if was is not None and was.problems and not s.problems:
            yield f"site {s.name}: healthy again"
        if was is None or was.phases != s.phases:
            yield f"site {s.name}: {_phases(s)}"
    for gone in sorted(old.keys() - {s.name for s in after.sites}):
        yield f"site {gone}: gone (its Site deleted, nothing placed there)"


def events(before: verdicts.Fleet | None, after: verdicts.Fleet) -> list[str]:
    """What changed from ``before`` to ``after``, one line each: a control plane's phase (with why,
    when it is not Ready) or version, a deletion, a site's problems appearing or clearing, its
    control planes by phase."""
    return [*_cp_events(before, after), *_site_events(before, after)]
