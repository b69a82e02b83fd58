"""The write verbs over HTTP: POST (create), PUT (replace), PATCH, and the ``scale`` subresource.

Owns how a write request becomes a ``store`` call: the body, the write options, PATCH by
Content-Type (JSON merge patch and strategic merge read as merge patch, JSON patch,
server-side apply by ``managedfields``; 415 otherwise) and the ``autoscaling/v1`` Scale view
of a custom resource. Talks to a ``store.Store`` through ``calls.Call``; answers with ``responses``.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from aiohttp import web

from sandbox.kubeapi import errors, options
from sandbox.kubeapi.apply import managedfields, patching
from sandbox.kubeapi.serving import calls, rendering, responses
from sandbox.kubeapi.state import metadata, objects, store, watching

_MERGE_TYPES = (
    "application/merge-patch+json",
    # Documented deviation: strategic merge patch is applied as a JSON merge patch (lists are
    # replaced, not merged by their patchMergeKey; $patch directives are not interpreted).
    "application/strategic-merge-patch+json",
)
_APPLY = "application/apply-patch+yaml"


async def create(state: store.Store, call: calls.Call) -> web.Response:
    body = await call.body()
    entry = state.create(call.rtype, call.namespace, body, version=call.target.version, write=call.write())
    return responses.respond(rendering.object_bytes(call.view, entry), status=201)


async def put(state: store.Store, call: calls.Call) -> web.Response:
    entry = _replace(state, call, await call.body())
    return responses.respond(rendering.object_bytes(call.view, entry))


async def patch(state: store.Store, call: calls.Call) -> web.Response:
    return responses.respond(rendering.object_bytes(call.view, await _patched(state, call)))


async def _patched(state: store.Store, call: calls.Call) -> watching.Entry:
    content_type = call.request.content_type
    document = calls.decode(await call.request.read(), yaml_ok=content_type.endswith("yaml"))
    if content_type == _APPLY:
        return _apply(state, call, document)
    current = rendering.as_version(call.view, state.get(call.rtype, call.namespace, call.name))
    patched = apply_patch(content_type, current, document)
    metadata.check_patched(call.rtype, call.name, patched.get("metadata"), current)
    return _replace(state, call, patched)


def _apply(state: store.Store, call: calls.Call, config: Any) -> watching.Entry:
    """Server-side apply: ``config`` merged by ``managedfields.applied``, then stored (created
    when absent) with the managedFields it computed."""
    query, version = call.request.query, call.target.version
    manager = query.get("fieldManager")
    if not manager:
        cause = errors.Cause(
            "FieldValueRequired", "Required value: is required for apply patch", "fieldManager"
        )
        raise errors.invalid("PatchOptions", "", [cause], group="meta.k8s.io")
    if not isinstance(config, dict):
        raise _undecodable(config, "map[string]interface {}")
    try:
        live = rendering.as_version(call.view, state.get(call.rtype, call.namespace, call.name))
    except errors.ApiError:
        live = None
    metadata.check_patched(call.rtype, call.name, config.get("metadata"), live)
    body, managed = managedfields.applied(
        live,
        config,
        (live or {}).get("metadata", {}).get("managedFields"),
        manager=manager,
        force=options.flag(query.get("force")),
        schema=managedfields.with_meta(call.rtype.schemas.get(version) or {}),
        api_version=call.rtype.api_version(version),
        now=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    body.setdefault("metadata", {})["managedFields"] = managed
    write = dataclasses.replace(call.write(), manager=manager, operation="Apply")
    if live is None:
        return state.create(call.rtype, call.namespace, body, version=version, write=write)
    return state.update(call.rtype, call.namespace, call.name, body, version=version, write=write)


def _replace(state: store.Store, call: calls.Call, body: dict[str, Any]) -> watching.Entry:
    """PUT semantics for the URL's object (or its status), with the request's write options."""
    return state.update(
        call.rtype,
        call.namespace,
        call.name,
        body,
        version=call.target.version,
        subresource=call.target.subresource,
        write=call.write(),
    )


async def scale(state: store.Store, call: calls.Call) -> web.Response:
    """GET, PUT or PATCH ``/scale``: the Scale view of the object's replicas."""
    rtype, request = call.rtype, call.request
    assert rtype.scale is not None
    current = state.get(rtype, call.namespace, call.name)
    if request.method == "GET":
        return responses.respond_json(rendering.scale_of(rtype, current))
    if request.method == "PUT":
        wanted = await call.body()
    elif request.method == "PATCH":
        document = calls.decode(await request.read(), yaml_ok=request.content_type.endswith("yaml"))
        wanted = apply_patch(request.content_type, rendering.scale_of(rtype, current), document)
    else:
        raise errors.method_not_allowed()
    replicas = _replicas(wanted, call.name)
    obj = objects.copy_obj(current)
    wanted_rv = (wanted.get("metadata") or {}).get("resourceVersion")
    if wanted_rv:
        obj["metadata"]["resourceVersion"] = wanted_rv
    rendering.set_path(obj, rtype.scale.spec_replicas_path, replicas)
    entry = state.update(
        rtype, call.namespace, call.name, obj, version=rtype.storage_version, write=call.write()
    )
    return responses.respond_json(rendering.scale_of(rtype, entry))


def _replicas(scale: dict[str, Any], name: str) -> int:
    replicas = (scale.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        cause = errors.Cause(
            "FieldValueInvalid",
            f"Invalid value: {replicas}: must be greater than or equal to 0",
            "spec.replicas",
        )
        raise errors.invalid("Scale", name, [cause], group="autoscaling")
    return replicas


def _undecodable(patch: Any, go_type: str) -> errors.ApiError:
    """400 for a patch document of the wrong JSON type, as Go's decoder words it."""
    kinds = {dict: "object", list: "array", str: "string", bool: "bool", type(None): "null"}
    kind = kinds.get(type(patch), "number")
    return errors.bad_request(
        f"error decoding patch: json: cannot unmarshal {kind} into Go value of type {go_type}"
    )


def apply_patch(content_type: str, target: dict[str, Any], patch: Any) -> dict[str, Any]:
    """The patched object, by the algorithm the Content-Type names (415 for unknown types)."""
    try:
        if content_type in _MERGE_TYPES:
            if not isinstance(patch, dict):
                raise _undecodable(patch, "map[string]interface {}")
            result = patching.merge_patch(target, patch)
        elif content_type == "application/json-patch+json":
            if not isinstance(patch, list):
                raise _undecodable(patch, "[]handlers.jsonPatchOp")
            result = patching.json_patch(target, patch)
        else:
            raise errors.unsupported_media_type(
                f"the body of the request was in an unknown format - accepted media types include: "
                f"application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, "
                f"application/strategic-merge-patch+json (got {content_type or 'none'!r})"
            )
    except patching.PatchError as exc:
        # The real server's words, to the letter: what failed is not said.
        raise errors.ApiError(
            422, "Invalid", "the server rejected our request due to an error in our request"
        ) from exc
    if not isinstance(result, dict):
        raise errors.ApiError(422, "Invalid", "the patched object must be a JSON object")
    return result
