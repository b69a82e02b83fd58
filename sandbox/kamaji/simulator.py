"""The Kamaji simulator's I/O shell: watch TenantControlPlanes, run one worker per TCP.

Owns what it does with the TCP stream of :func:`common.kube.watching.stream` (which lists,
watches, resumes from the last seen version and relists on 410 Gone): after every (re)list it
drops the workers of TCPs that are gone and re-adopts endpoints, then dispatches each event to
one asyncio task per TCP key. Also owns the address pool and the per-TCP
:class:`~sandbox.kamaji.reconcile.Memory`. Every decision is made by the pure
:func:`sandbox.kamaji.reconcile.reconcile`; this module observes, executes the plan's actions
and writes the status. Talks to one cluster through :mod:`common.kube` only, so it runs
unchanged against the emulator or a real API server.

A worker never blocks the watch: the watch stores the newest object in the worker and wakes it;
delays are the worker's ``requeue_after`` timers. Transient failures (no answer, 409, 429, 5xx)
are retried with jittered exponential backoff; nothing but ``stop()`` ends the simulator.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from common import aiotasks, backoff, kube
from common.kube import errors, resources, watching
from sandbox.kamaji import addresses, pki, reconcile

__all__ = ["Simulator"]

log = logging.getLogger(__name__)

Key = tuple[str, str]
"""(namespace, name) of a TCP."""

TCP = resources.TENANT_CONTROL_PLANE


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, Mapping) else {}


def _key(obj: Mapping[str, Any]) -> Key:
    metadata = _metadata(obj)
    return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")


def _newer(candidate: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether ``candidate`` may replace ``current`` in a worker's cache.

    The worker caches the objects its own writes return, which are often newer than watch
    events still in flight; replaying those older events would only cause redundant writes.
    resourceVersions are opaque by contract, so this compares them only when both are integers
    (etcd's revisions and the emulator's counter are) and otherwise trusts the event.
    """
    new, old = _metadata(candidate).get("resourceVersion"), _metadata(current).get("resourceVersion")
    if _metadata(candidate).get("uid") != _metadata(current).get("uid"):
        return True
    try:
        return int(str(new)) >= int(str(old))
    except ValueError:
        return True


def _endpoint_host(status: Mapping[str, Any]) -> str | None:
    """The host part of ``status.controlPlaneEndpoint`` (``host:port`` or ``[v6]:port``)."""
    value = status.get("controlPlaneEndpoint")
    if not isinstance(value, str) or ":" not in value:
        return None
    return value.rpartition(":")[0].strip("[]") or None


def _owned_by(secret: Mapping[str, Any] | None, uid: str) -> bool:
    if secret is None:
        return False
    return any(ref.get("uid") == uid for ref in _metadata(secret).get("ownerReferences") or ())


def _secret_bytes(secret: Mapping[str, Any], key: str) -> bytes | None:
    value = (secret.get("data") or {}).get(key)
    return base64.b64decode(value) if isinstance(value, str) else None


@dataclass
class _Worker:
    key: Key
    obj: dict[str, Any]
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    memory: reconcile.Memory = field(default_factory=reconcile.Memory)
    stale: bool = False
    """Re-read the TCP before the next visit (a write of ours hit a stale resourceVersion)."""
    failures: int = 0
    task: asyncio.Task[None] | None = None


class Simulator:
    """A Kamaji stand-in for one cluster.

    ``api`` is a kubernetes_asyncio ``ApiClient`` (the caller keeps owning it) or a kubeconfig
    path (the simulator creates the client at ``start()`` and closes it at ``stop()``).
    """

    def __init__(
        self,
        api: Any,
        *,
        ready_delay: float = 3.0,
        delete_delay: float = 0.0,
        address_pool: str = "10.240.0.0/16",
        watch_timeout: int = 300,
    ) -> None:
        self._api = api
        self._timings = reconcile.Timings(ready_delay=ready_delay, delete_delay=delete_delay)
        self._pool = addresses.AddressPool(address_pool)
        self._watch_timeout = watch_timeout
        self._api_client: Any = None
        self._owns_client = False
        self._kube: kube.Kube | None = None
        self._watch_task: asyncio.Task[None] | None = None
        self._workers: dict[Key, _Worker] = {}
        self._synced = asyncio.Event()

    async def __aenter__(self) -> Simulator:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def start(self) -> None:
        if self._watch_task is not None:
            raise RuntimeError("the simulator is already running")
        if isinstance(self._api, str | os.PathLike):
            self._api_client = await kube.api_client_from_kubeconfig(os.fspath(self._api))
            self._owns_client = True
        else:
            self._api_client = self._api
        self._kube = kube.Kube(self._api_client)
        self._watch_task = asyncio.create_task(self._watch_forever(), name="kamaji-simulator-watch")

    async def stop(self) -> None:
        """Cancel the watch and every worker, wait for them, close the client if ours."""
        tasks = [t for t in (self._watch_task, *(w.task for w in self._workers.values())) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._workers.clear()
        self._watch_task = None
        if self._owns_client and self._api_client is not None:
            await self._api_client.close()
        self._api_client, self._kube, self._owns_client = None, None, False

    async def wait_synced(self) -> None:
        """Wait until the first list has been dispatched (every existing TCP has a worker)."""
        await self._synced.wait()

    # Watching

    async def _watch_forever(self) -> None:
        assert self._kube is not None
        failures = 0
        while True:
            # The stream retries API failures itself, forever; what ends it is an error of ours
            # (a bug, a malformed object). That must not silently end the only watch: log it and
            # start a new stream, which relists.
            items = watching.stream(self._kube, TCP, watch_timeout=self._watch_timeout)
            try:
                async with contextlib.aclosing(items):
                    async for item in items:
                        if isinstance(item, watching.Synced):
                            self._relisted(item.items)
                            self._synced.set()
                        else:
                            self._dispatch(item)
                            failures = 0
            except Exception:
                failures += 1
                log.exception("watching tenantcontrolplanes failed unexpectedly; relisting")
                await asyncio.sleep(backoff.delay(failures, base=0.4, cap=30.0))

    def _relisted(self, items: list[dict[str, Any]]) -> None:
        present = {_key(obj) for obj in items}
        for key in [k for k in self._workers if k not in present]:
            self._forget(key)
        # Re-adopt every endpoint already in a status before any worker allocates a new one:
        # otherwise a restarted simulator could hand a new TCP the address of an existing one.
        for obj in items:
            self._claim_address(obj)
        for obj in items:
            self._dispatch(kube.WatchEvent(type="ADDED", object=obj))

    def _claim_address(self, obj: Mapping[str, Any]) -> None:
        if ((obj.get("spec") or {}).get("networkProfile") or {}).get("address"):
            return
        host = _endpoint_host(obj.get("status") or {})
        if host is not None:
            self._pool.address_for(str(_metadata(obj).get("uid") or ""), hint=host)

    def _dispatch(self, event: kube.WatchEvent) -> None:
        if event.type not in ("ADDED", "MODIFIED", "DELETED"):
            return  # BOOKMARK only moves the resourceVersion on
        key = _key(event.object)
        worker = self._workers.get(key)
        if event.type == "DELETED":
            if worker is not None and _metadata(worker.obj).get("uid") == _metadata(event.object).get("uid"):
                self._forget(key)
            return
        if worker is None:
            self._claim_address(event.object)
            worker = _Worker(key=key, obj=event.object)
            worker.task = asyncio.create_task(self._work(worker), name=f"kamaji-simulator {key[0]}/{key[1]}")
            self._workers[key] = worker
        elif _newer(event.object, worker.obj):
            if _metadata(event.object).get("uid") != _metadata(worker.obj).get("uid"):
                self._pool.release(str(_metadata(worker.obj).get("uid") or ""))
            worker.obj = event.object
            worker.stale = False
        worker.wake.set()

    def _forget(self, key: Key) -> None:
        worker = self._workers.pop(key, None)
        if worker is None:
            return
        if worker.task is not None:
            worker.task.cancel()
        self._pool.release(str(_metadata(worker.obj).get("uid") or ""))

    # Working

    async def _work(self, worker: _Worker) -> None:
        delay: float | None = 0.0
        while True:
            if delay is None:
                await worker.wake.wait()
            elif delay > 0:
                await aiotasks.wait_event(worker.wake, delay)
            worker.wake.clear()
            delay = await self._visit_guarded(worker)

    async def _visit_guarded(self, worker: _Worker) -> float | None:
        """One visit; failures become a retry delay, never an exception that ends the worker."""
        namespace, name = worker.key
        try:
            delay = await self._visit(worker)
        except errors.NotFound:
            return None  # the TCP is gone: its DELETED event ends this worker
        except (errors.Unavailable, errors.Conflict) as exc:
            worker.failures += 1
            worker.stale = worker.stale or isinstance(exc, errors.Conflict)
            log.info("tcp %s/%s: %s; retrying", namespace, name, exc)
            return backoff.delay(worker.failures, base=0.4, cap=30.0)
        except errors.KubeError as exc:
            # Invalid, Forbidden, ...: retrying soon will not help, but a fixed schema or RBAC will.
            worker.failures += 1
            log.error("tcp %s/%s: %s", namespace, name, exc)
            return max(5.0, backoff.delay(worker.failures, base=0.4, cap=30.0))
        except Exception:
            worker.failures += 1
            log.exception("tcp %s/%s: unexpected error", namespace, name)
            return max(5.0, backoff.delay(worker.failures, base=0.4, cap=30.0))
        worker.failures = 0
        return delay

    async def _visit(self, worker: _Worker) -> float | None:
        assert self._kube is not None
        namespace, name = worker.key
        if worker.stale:
            worker.obj = await self._kube.get(TCP, name, namespace=namespace)
            worker.stale = False
        tcp = worker.obj
        uid = str(_metadata(tcp).get("uid") or "")
        deleting = bool(_metadata(tcp).get("deletionTimestamp"))
        secrets = (
            reconcile.SecretsObserved() if deleting else await self._observe_secrets(namespace, name, uid)
        )
        allocated = ""
        address = ((tcp.get("spec") or {}).get("networkProfile") or {}).get("address")
        if not address and not deleting:
            allocated = self._pool.address_for(uid, hint=_endpoint_host(tcp.get("status") or {}))
        observed = reconcile.new_observed(tcp, secrets=secrets, allocated_address=allocated)
        plan = reconcile.reconcile(
            observed, worker.memory, now=asyncio.get_running_loop().time(), timings=self._timings
        )
        await self._execute(worker, observed, plan.actions)
        if plan.status is not None:
            worker.obj = await self._kube.patch(
                TCP, name, {"status": plan.status}, namespace=namespace, subresource="status"
            )
            before = observed.status.get("kubernetesResources", {}).get("version", {}).get("status")
            after = plan.status["kubernetesResources"]["version"]["status"]
            if before != after:
                log.info("tcp %s/%s: %s", namespace, name, after)
        worker.memory = plan.memory
        return plan.requeue_after

    async def _observe_secrets(self, namespace: str, name: str, uid: str) -> reconcile.SecretsObserved:
        assert self._kube is not None
        ca, admin = await asyncio.gather(
            self._kube.get_or_none(resources.SECRET, reconcile.ca_secret_name(name), namespace=namespace),
            self._kube.get_or_none(
                resources.SECRET, reconcile.admin_kubeconfig_secret_name(name), namespace=namespace
            ),
        )
        server = None
        if admin is not None and _owned_by(admin, uid):
            conf = _secret_bytes(admin, "admin.conf")
            server = pki.kubeconfig_server(conf) if conf is not None else None
        ca_ok = (
            ca is not None and _owned_by(ca, uid) and all(_secret_bytes(ca, k) for k in ("ca.crt", "ca.key"))
        )
        return reconcile.SecretsObserved(ca=ca_ok, admin_kubeconfig_server=server)

    async def _execute(
        self, worker: _Worker, observed: reconcile.Observed, actions: tuple[reconcile.Action, ...]
    ) -> None:
        assert self._kube is not None
        now = datetime.datetime.now(datetime.UTC)
        ca: pki.CertificateAuthority | None = None
        for action in actions:
            match action:
                case reconcile.AddFinalizer():
                    await self._set_finalizers(worker, [*observed.finalizers, reconcile.FINALIZER])
                case reconcile.RemoveFinalizer():
                    await self._set_finalizers(
                        worker, [f for f in observed.finalizers if f != reconcile.FINALIZER]
                    )
                case reconcile.WriteCA():
                    ca = pki.new_ca(now=now)
                    await self._write_secret(observed, "ca", pki.ca_secret_data(ca))
                case reconcile.WriteAdminKubeconfig(server=server, svc_server=svc_server):
                    if ca is None:
                        ca = await self._read_ca(observed)
                    data = pki.admin_kubeconfig_data(
                        ca, cluster=observed.name, server=server, svc_server=svc_server, now=now
                    )
                    await self._write_secret(observed, "admin-kubeconfig", data)

    async def _set_finalizers(self, worker: _Worker, finalizers: list[str]) -> None:
        assert self._kube is not None
        namespace, name = worker.key
        # The resourceVersion makes the merge patch conditional: a list in a merge patch replaces
        # the whole list, so writing over someone else's concurrent finalizer change must fail.
        patch = {
            "metadata": {
                "finalizers": finalizers,
                "resourceVersion": _metadata(worker.obj)["resourceVersion"],
            }
        }
        worker.obj = await self._kube.patch(TCP, name, patch, namespace=namespace)

    async def _read_ca(self, observed: reconcile.Observed) -> pki.CertificateAuthority:
        assert self._kube is not None
        secret = await self._kube.get_or_none(
            resources.SECRET, reconcile.ca_secret_name(observed.name), namespace=observed.namespace
        )
        cert = _secret_bytes(secret, "ca.crt") if secret is not None else None
        key = _secret_bytes(secret, "ca.key") if secret is not None else None
        if cert is None or key is None:
            # It vanished since we observed it: the next visit sees that and writes a new one.
            raise errors.Conflict(409, "CAChanged", f"{reconcile.ca_secret_name(observed.name)} changed")
        return pki.load_ca(cert, key)

    async def _write_secret(
        self, observed: reconcile.Observed, component: str, data: Mapping[str, bytes]
    ) -> None:
        """Create ``<name>-<component>``, or replace what is there (it is stale or not ours)."""
        assert self._kube is not None
        name = f"{observed.name}-{component}"
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": name,
                "namespace": observed.namespace,
                "labels": {
                    "kamaji.clastix.io/project": "kamaji",
                    "kamaji.clastix.io/name": observed.name,
                    "kamaji.clastix.io/component": component,
                },
                "ownerReferences": [
                    {
                        "apiVersion": TCP.api_version,
                        "kind": TCP.kind,
                        "name": observed.name,
                        "uid": observed.uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "data": {k: base64.b64encode(v).decode("ascii") for k, v in data.items()},
        }
        # One attempt: a Conflict goes back to the worker, whose retry re-reads the TCP first.
        await self._kube.create_or_replace(resources.SECRET, body, namespace=observed.namespace)
