"""Helpers of the replay attacks (tests/security/test_replay.py, test_replace_owner.py): reading
a control plane's TCP, RKCP and status through a running ``site_support.World``, watching TCPs,
and tapping subjects with the test's wiretap."""

from __future__ import annotations

import asyncio
from typing import Any

from nats.aio.client import Client

from agent.tcp import managed
from common.kube import resources, watching
from protocol import messages, subjects
from tests import helpers
from tests.security import site_support as s


def condition(obj: dict[str, Any] | None, type_: str) -> tuple[str, str]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond["type"] == type_:
            return cond["status"], cond["reason"]
    return "", ""


def replicas(tcp: dict[str, Any] | None) -> int | None:
    spec = (tcp or {}).get("spec") or {}
    value = ((spec.get("controlPlane") or {}).get("deployment") or {}).get("replicas")
    return int(value) if value is not None else None


def annotation(tcp: dict[str, Any] | None, key: str) -> str:
    return str((((tcp or {}).get("metadata") or {}).get("annotations") or {}).get(key) or "")


async def rkcp_ready_at(w: s.World, name: str, *, seq: int) -> dict[str, Any]:
    """The RKCP once Ready for its current generation, the site having applied intent ``seq``."""
    found: list[dict[str, Any]] = []

    async def check() -> bool:
        obj = await w.mgmt.get_or_none(s.RKCP, name, namespace=s.NAMESPACE)
        status = (obj or {}).get("status") or {}
        tcp = await w.tcp(name)
        ok = (
            obj is not None
            and status.get("ready") is True
            and status.get("observedGeneration") == obj["metadata"]["generation"]
            and condition(obj, "Ready")[0] == "True"
            and condition(obj, "IntentDelivered") == ("True", "Acknowledged")
            and annotation(tcp, managed.INTENT_SEQ) == str(seq)
        )
        found[:] = [obj] if ok and obj is not None else []
        return ok

    await helpers.eventually(check, within=30, every=0.1)
    return found[0]


async def provisioned(
    w: s.World, name: str, *, replicas_: int
) -> tuple[dict[str, Any], messages.Intent, int]:
    """Create Cluster + RKCP; wait until the site runs it Ready. Returns (RKCP, its intent, seq)."""
    cl = await w.mgmt.create(resources.CLUSTER, s.cluster_obj(f"{name}-cluster"), namespace=s.NAMESPACE)
    await w.mgmt.create(s.RKCP, s.rkcp_obj(name, cl, replicas=replicas_), namespace=s.NAMESPACE)
    return await settled(w, name, replicas_=replicas_)


async def settled(w: s.World, name: str, *, replicas_: int) -> tuple[dict[str, Any], messages.Intent, int]:
    latest: list[tuple[messages.Intent, int]] = []

    async def published() -> bool:
        stored = await w.stored_intent(name)
        if stored is None:
            return False
        i = messages.decode_intent(stored.data)
        latest[:] = [(i, stored.seq)]
        return replicas({"spec": i.spec}) == replicas_

    await helpers.eventually(published, within=30, every=0.1)
    intent, seq = latest[0]
    return await rkcp_ready_at(w, name, seq=seq), intent, seq


class Watch:
    """Every version of one TCP the site's API server shows from now on (a watch, not polls)."""

    def __init__(self, w: s.World, name: str) -> None:
        self.name = name
        self.seen: list[dict[str, Any]] = []
        self.task = asyncio.create_task(self._run(w))

    async def _run(self, w: s.World) -> None:
        async for item in watching.stream(w.site, s.TCP, namespace=s.NAMESPACE):
            objs = item.items if isinstance(item, watching.Synced) else [item.object]
            self.seen += [o for o in objs if o["metadata"]["name"] == self.name]

    async def stop(self) -> list[dict[str, Any]]:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        return self.seen


class Tap:
    """Every message published on one subject from now on: a core subscription of the wiretap
    (``site_support.wiretap``), so a message its stream replaced at once is seen all the same."""

    def __init__(self) -> None:
        self.seen: list[bytes] = []
        self.sub: Any = None

    async def start(self, nc: Client, subject: str) -> Tap:
        async def got(msg: Any) -> None:
            self.seen.append(msg.data)

        self.sub = await nc.subscribe(subject, cb=got)
        await nc.flush()  # the server holds the subscription before anything is published
        return self

    def statuses(self) -> list[messages.Status]:
        return [messages.decode_status(data) for data in self.seen]

    def answering(self, intent_seq: int) -> messages.Status | None:
        return next((st for st in self.statuses() if st.intent_seq == intent_seq), None)

    async def stop(self) -> None:
        await self.sub.unsubscribe()


def status_subject(name: str) -> str:
    return subjects.status(s.SITE, s.NAMESPACE, name, prefix=s.PREFIX)


async def warning_events(w: s.World, reason: str) -> list[dict[str, Any]]:
    events = (await w.mgmt.list(resources.EVENT, namespace=s.NAMESPACE)).items
    return [e for e in events if e.get("reason") == reason and e.get("type") == "Warning"]
