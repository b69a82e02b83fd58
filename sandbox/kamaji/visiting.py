"""One visit of one TenantControlPlane: observe it, decide (``reconcile``), execute, write status.

Owns the I/O of a visit, which the simulator's per-TCP worker runs each time it wakes: re-reading
the TCP when a write of ours found it stale, reading its two Secrets, the plan's actions
(finalizer patches; the ``<tcp>-ca`` and ``<tcp>-admin-kubeconfig`` Secrets, from ``pki``), the
status patch, and turning failures into a retry delay. Every decision is the pure
:func:`sandbox.kamaji.reconcile.reconcile`'s. Talks to one cluster through :mod:`common.kube`;
endpoints come from the simulator's :class:`~sandbox.kamaji.addresses.AddressPool`.

Transient failures (no answer, 409, 429, 5xx) are retried with jittered exponential backoff
(``common.backoff``); nothing ends a worker but its cancellation.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from common import backoff, kube, objects
from common.kube import errors, resources
from protocol import names
from sandbox.kamaji import addresses, pki, reconcile

__all__ = ["Context", "Worker", "endpoint_host", "visit_guarded"]

log = logging.getLogger(__name__)

TCP = resources.TENANT_CONTROL_PLANE


@dataclass
class Worker:
    """One TCP's worker: the newest object seen (by the watch or from our own writes) and what
    the previous visit's plan asked to remember."""

    key: objects.Key
    obj: dict[str, Any]
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    memory: reconcile.Memory = field(default_factory=reconcile.Memory)
    stale: bool = False
    """Re-read the TCP before the next visit (a write of ours hit a stale resourceVersion)."""
    failures: int = 0
    task: asyncio.Task[None] | None = None


@dataclass(frozen=True)
class Context:
    """What every visit uses: the cluster, the simulator's address pool, its timings."""

    kube: kube.Kube
    pool: addresses.AddressPool
    timings: reconcile.Timings


def uid(obj: Mapping[str, Any]) -> str:
    return str(objects.dig(obj, "metadata", "uid") or "")


def endpoint_host(status: Mapping[str, Any]) -> str | None:
    """The host part of ``status.controlPlaneEndpoint`` (``host:port`` or ``[v6]:port``)."""
    value = status.get("controlPlaneEndpoint")
    if not isinstance(value, str) or ":" not in value:
        return None
    return value.rpartition(":")[0].strip("[]") or None


def _owned_by(secret: Mapping[str, Any] | None, owner: str) -> bool:
    if secret is None:
        return False
    return any(ref.get("uid") == owner for ref in objects.dig(secret, "metadata", "ownerReferences") or ())


def _secret_bytes(secret: Mapping[str, Any], key: str) -> bytes | None:
    value = (secret.get("data") or {}).get(key)
    return base64.b64decode(value) if isinstance(value, str) else None


def _retry(worker: Worker, *, at_least: float = 0.0) -> float:
    worker.failures += 1
    return max(at_least, backoff.delay(worker.failures, base=0.4, cap=30.0))


async def visit_guarded(worker: Worker, ctx: Context) -> float | None:
    """One visit; failures become a retry delay, never an exception that ends the worker."""
    namespace, name = worker.key
    try:
        delay = await _visit(worker, ctx)
    except errors.NotFound:
        return None  # the TCP is gone: its DELETED event ends this worker
    except (errors.Unavailable, errors.Conflict) as exc:
        worker.stale = worker.stale or isinstance(exc, errors.Conflict)
        log.info("tcp %s/%s: %s; retrying", namespace, name, exc)
        return _retry(worker)
    except errors.KubeError as exc:
        # Invalid, Forbidden, ...: retrying soon will not help, but a fixed schema or RBAC will.
        log.error("tcp %s/%s: %s", namespace, name, exc)
        return _retry(worker, at_least=5.0)
    except Exception:
        log.exception("tcp %s/%s: unexpected error", namespace, name)
        return _retry(worker, at_least=5.0)
    worker.failures = 0
    return delay


async def _visit(worker: Worker, ctx: Context) -> float | None:
    namespace, name = worker.key
    if worker.stale:
        worker.obj = await ctx.kube.get(TCP, name, namespace=namespace)
        worker.stale = False
    tcp = worker.obj
    deleting = bool(objects.dig(tcp, "metadata", "deletionTimestamp"))
    secrets = reconcile.SecretsObserved() if deleting else await _observe_secrets(ctx.kube, tcp)
    allocated = ""
    if not objects.dig(tcp, "spec", "networkProfile", "address") and not deleting:
        allocated = ctx.pool.address_for(uid(tcp), hint=endpoint_host(tcp.get("status") or {}))
    observed = reconcile.new_observed(tcp, secrets=secrets, allocated_address=allocated)
    plan = reconcile.reconcile(
        observed, worker.memory, now=asyncio.get_running_loop().time(), timings=ctx.timings
    )
    await _execute(ctx.kube, worker, observed, plan.actions)
    if plan.status is not None:
        worker.obj = await ctx.kube.patch(
            TCP, name, {"status": plan.status}, namespace=namespace, subresource="status"
        )
        before = objects.dig(observed.status, "kubernetesResources", "version", "status")
        after = plan.status["kubernetesResources"]["version"]["status"]
        if before != after:
            log.info("tcp %s/%s: %s", namespace, name, after)
    worker.memory = plan.memory
    return plan.requeue_after


async def _observe_secrets(api: kube.Kube, tcp: Mapping[str, Any]) -> reconcile.SecretsObserved:
    (namespace, name), owner = objects.key(tcp), uid(tcp)
    ca, admin = await asyncio.gather(
        api.get_or_none(resources.SECRET, names.kamaji_ca(name), namespace=namespace),
        api.get_or_none(resources.SECRET, names.kamaji_kubeconfig(name), namespace=namespace),
    )
    server = None
    if admin is not None and _owned_by(admin, owner):
        conf = _secret_bytes(admin, names.ADMIN_KUBECONFIG_KEY)
        server = pki.kubeconfig_server(conf) if conf is not None else None
    ca_ok = (
        ca is not None and _owned_by(ca, owner) and all(_secret_bytes(ca, k) for k in ("ca.crt", "ca.key"))
    )
    return reconcile.SecretsObserved(ca=ca_ok, admin_kubeconfig_server=server)


async def _execute(
    api: kube.Kube, worker: Worker, observed: reconcile.Observed, actions: tuple[reconcile.Action, ...]
) -> None:
    now = datetime.datetime.now(datetime.UTC)
    ca: pki.CertificateAuthority | None = None
    for action in actions:
        match action:
            case reconcile.AddFinalizer():
                await _set_finalizers(api, worker, [*observed.finalizers, reconcile.FINALIZER])
            case reconcile.RemoveFinalizer():
                await _set_finalizers(
                    api, worker, [f for f in observed.finalizers if f != reconcile.FINALIZER]
                )
            case reconcile.WriteCA():
                ca = pki.new_ca(now=now)
                await _write_secret(api, observed, names.kamaji_ca(observed.name), pki.ca_secret_data(ca))
            case reconcile.WriteAdminKubeconfig(server=server, svc_server=svc_server):
                if ca is None:
                    ca = await _read_ca(api, observed)
                data = pki.admin_kubeconfig_data(
                    ca, cluster=observed.name, server=server, svc_server=svc_server, now=now
                )
                await _write_secret(api, observed, names.kamaji_kubeconfig(observed.name), data)


async def _set_finalizers(api: kube.Kube, worker: Worker, finalizers: list[str]) -> None:
    namespace, name = worker.key
    # The resourceVersion makes the merge patch conditional: a list in a merge patch replaces
    # the whole list, so writing over someone else's concurrent finalizer change must fail.
    version = worker.obj["metadata"]["resourceVersion"]
    patch = {"metadata": {"finalizers": finalizers, "resourceVersion": version}}
    worker.obj = await api.patch(TCP, name, patch, namespace=namespace)


async def _read_ca(api: kube.Kube, observed: reconcile.Observed) -> pki.CertificateAuthority:
    name = names.kamaji_ca(observed.name)
    secret = await api.get_or_none(resources.SECRET, name, namespace=observed.namespace)
    cert = _secret_bytes(secret, "ca.crt") if secret is not None else None
    key = _secret_bytes(secret, "ca.key") if secret is not None else None
    if cert is None or key is None:
        # It vanished since we observed it: the next visit sees that and writes a new one.
        raise errors.Conflict(409, "CAChanged", f"{name} changed")
    return pki.load_ca(cert, key)


async def _write_secret(
    api: kube.Kube, observed: reconcile.Observed, name: str, data: Mapping[str, bytes]
) -> None:
    """Create Secret ``name`` (``<tcp>-<component>``), or replace what is there (it is stale or
    not ours)."""
    component = name.removeprefix(f"{observed.name}-")
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
    await api.create_or_replace(resources.SECRET, body, namespace=observed.namespace)
