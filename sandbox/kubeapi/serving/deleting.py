"""The delete verbs over HTTP: DELETE of one object and of a collection.

Owns reading ``DeleteOptions`` into ``options.Deletion`` as the real server does (query
parameters and body: propagationPolicy or the old orphanDependents, uid and resourceVersion
preconditions, dryRun) and what a DELETE answers: the object while finalizers hold it (and
always for custom resources and namespaces), else a Success Status; a deletecollection answers
the list it deleted. Talks to a ``store.Store`` through ``calls.Call``; answers with
``responses``.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from sandbox.kubeapi import errors, options
from sandbox.kubeapi.serving import calls, rendering, responses
from sandbox.kubeapi.state import store


async def deletion(request: web.Request) -> options.Deletion:
    """DeleteOptions from the query and the (optional) JSON body; 400 for an unknown propagation."""
    query = request.query
    opts: dict[str, Any] = {}
    raw = await request.read()
    if raw.strip():
        decoded = calls.decode(raw)
        opts = decoded if isinstance(decoded, dict) else {}
    propagation = query.get("propagationPolicy") or opts.get("propagationPolicy") or "Background"
    if opts.get("orphanDependents") is True or options.flag(query.get("orphanDependents")):
        propagation = "Orphan"
    if propagation not in ("Background", "Foreground", "Orphan"):
        raise errors.bad_request(f'unsupported propagationPolicy "{propagation}"')
    preconditions = opts.get("preconditions") or {}
    return options.Deletion(
        propagation=propagation,
        uid=preconditions.get("uid"),
        resource_version=preconditions.get("resourceVersion"),
        dry_run=options.dry_run(query) or bool(opts.get("dryRun")),
    )


async def delete(state: store.Store, call: calls.Call) -> web.Response:
    entry, gone = state.delete(call.rtype, call.namespace, call.name, deletion=await deletion(call.request))
    if call.rtype.returns_deleted_object or not gone:
        return responses.respond(rendering.object_bytes(call.view, entry))
    meta = entry.obj["metadata"]
    details = {"name": meta["name"], "group": call.rtype.group, "kind": call.rtype.plural, "uid": meta["uid"]}
    return responses.respond_json(
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}
    )


async def delete_collection(state: store.Store, call: calls.Call) -> web.Response:
    opts = await deletion(call.request)
    page = state.list_page(call.rtype, call.filter())
    deleted = []
    each = options.Deletion(propagation=opts.propagation, dry_run=opts.dry_run)  # no preconditions
    for entry in page.entries:
        meta = entry.obj["metadata"]
        if state.objects(call.rtype.key).get((meta.get("namespace", ""), meta["name"])) is None:
            continue  # already collected by a cascade of an earlier item
        result, _ = state.delete(call.rtype, meta.get("namespace", ""), meta["name"], deletion=each)
        deleted.append(result)
    plain = rendering.View(call.rtype, call.view.version)
    return responses.respond(
        rendering.list_bytes(plain, deleted, rv=state.rv, continue_token="", remaining=None)
    )
