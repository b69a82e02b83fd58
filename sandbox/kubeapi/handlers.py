"""The REST verbs over HTTP: aiohttp requests in, Kubernetes responses out.

Owns the dispatch of one request (discovery, OpenAPI stubs, resource verbs), query-parameter
parsing, request-body decoding, PATCH content types, subresources (``status``, ``scale``) and
the translation of ``errors.ApiError`` into Status responses, the one place where errors meet
HTTP. Watch streams are in ``streaming``. Talks to a ``store.Store``.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
import yaml
from aiohttp import web

from sandbox.kubeapi import (
    discovery,
    errors,
    objects,
    options,
    patching,
    protobuf,
    rendering,
    resources,
    routing,
    selectors,
    store,
    streaming,
    watching,
)

log = logging.getLogger(__name__)
_WARNINGS = web.RequestKey("warnings", list[str])
JSON = "application/json"
_MERGE_TYPES = (
    "application/merge-patch+json",
    # Documented deviation: strategic merge patch is applied as a JSON merge patch (lists are
    # replaced, not merged by their patchMergeKey; $patch directives are not interpreted).
    "application/strategic-merge-patch+json",
    # Documented deviation: server-side apply is applied as a merge patch that may create.
    "application/apply-patch+yaml",
)


def respond(body: bytes, *, status: int = 200, content_type: str = JSON) -> web.Response:
    return web.Response(body=body, status=status, headers={"Content-Type": content_type})


def respond_json(obj: Any, *, status: int = 200) -> web.Response:
    return respond(msgspec.json.encode(obj), status=status)


def error_response(error: errors.ApiError) -> web.Response:
    return respond_json(error.status(), status=error.code)


def not_found_path() -> errors.ApiError:
    return errors.ApiError(404, "NotFound", "the server could not find the requested resource")


class Handler:
    """One cluster's HTTP front: ``handle`` is the aiohttp catch-all route."""

    def __init__(self, state: store.Store, settings: options.Settings) -> None:
        self.store = state
        self.settings = settings
        self.address = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            response = await self._dispatch(request)
            for warning in request.get(_WARNINGS, []):
                if not response.prepared:  # a watch stream has sent its headers already
                    response.headers.add("Warning", '299 - "' + warning.replace('"', '\\"') + '"')
            return response
        except errors.ApiError as exc:
            return error_response(exc)
        except Exception as exc:  # a bug of ours: answer a Status, as the real server does on a panic
            log.exception("%s %s failed", request.method, request.path_qs)
            return error_response(errors.internal(repr(exc)))

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        target = routing.parse(path)
        if target is None:
            return self._non_resource(request, path)
        rtype = self.store.resolve(target.group, target.version, target.plural)
        if rtype is None:
            raise not_found_path()
        if target.namespace is not None and not rtype.namespaced:
            raise not_found_path()
        if target.name == "" and target.subresource:
            raise not_found_path()
        if target.namespace is None and rtype.namespaced and target.name:
            raise not_found_path()
        return await self._resource(request, target, rtype)

    def _non_resource(self, request: web.Request, path: str) -> web.Response:
        if request.method != "GET":
            raise errors.method_not_allowed()
        types = list(self.store.types.values())
        if path == "/version":
            return respond_json(discovery.KUBE_VERSION)
        if path in ("/healthz", "/readyz", "/livez"):
            return respond(b"ok", content_type="text/plain")
        if path == "/api":
            return respond_json(discovery.api_versions(self.address))
        if path == "/apis":
            return respond_json(discovery.api_group_list(types))
        if path == "/openapi/v3":
            # An empty index: kubectl finds no schema for any group-version, so it treats
            # server-side field validation as unsupported and validates client-side with
            # OpenAPI v2 (below), which has no definitions either: validation is skipped.
            return respond_json({"paths": {}})
        if path == "/openapi/v2":
            # An empty protobuf openapi_v2.Document (zero bytes): no definitions, no validation.
            return respond(b"", content_type="application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
        segs = path.strip("/").split("/")
        doc: dict[str, Any] | None = None
        if segs == ["api", "v1"]:
            doc = discovery.api_resource_list(types, "", "v1")
        elif len(segs) == 2 and segs[0] == "apis":
            doc = discovery.api_group(types, segs[1])
        elif len(segs) == 3 and segs[0] == "apis":
            doc = discovery.api_resource_list(types, segs[1], segs[2])
        if doc is None:
            raise not_found_path()
        return respond_json(doc)

    # Resource verbs ---------------------------------------------------------------------------

    async def _resource(
        self, request: web.Request, target: routing.Target, rtype: resources.ResourceType
    ) -> web.StreamResponse:
        query = request.query
        view = rendering.View(
            rtype,
            target.version,
            table=rendering.wants_table(request.headers.get("Accept", "")),
            include=query.get("includeObject", "Metadata"),
        )
        method = request.method
        if target.subresource and target.subresource not in self._subresources(rtype):
            raise not_found_path()
        if not target.name:
            if method == "GET":
                if target.legacy_watch or options.flag(query.get("watch")):
                    return await streaming.watch(
                        request, self.store, view, self._filter(target, rtype, query), self.settings
                    )
                return self._list(view, target, rtype, query)
            if method == "POST":
                body = await _body(request)
                entry = self.store.create(
                    rtype,
                    target.namespace or "",
                    body,
                    version=target.version,
                    write=_write(request),
                )
                return respond(rendering.object_bytes(view, entry), status=201)
            if method == "DELETE":
                return await self._delete_collection(request, view, target, rtype)
            raise errors.method_not_allowed()
        if target.legacy_watch:
            return await streaming.watch(
                request, self.store, view, self._filter(target, rtype, query), self.settings
            )
        return await self._object(request, view, target, rtype)

    def _subresources(self, rtype: resources.ResourceType) -> set[str]:
        subs = {"status"} if rtype.has_status else set()
        if rtype.scale is not None:
            subs.add("scale")
        if rtype.key == ("", "namespaces"):
            subs.add("finalize")
        return subs

    def _filter(self, target: routing.Target, rtype: resources.ResourceType, query: Any) -> watching.Filter:
        labels = selectors.parse_labels(query.get("labelSelector", ""))
        fields = selectors.parse_fields(query.get("fieldSelector", ""), supported=rtype.field_selectors)
        if target.name:  # the legacy /watch/<resource>/<name> form
            fields = selectors.FieldSelector(
                (*fields.requirements, selectors.FieldRequirement(("metadata", "name"), target.name, False))
            )
        return watching.Filter(rtype.key, target.namespace, labels, fields)

    def _list(
        self, view: rendering.View, target: routing.Target, rtype: resources.ResourceType, query: Any
    ) -> web.Response:
        limit = options.integer(query.get("limit"), "limit")
        exact = None
        if query.get("resourceVersionMatch") == "Exact":
            exact = options.parse_rv(query.get("resourceVersion"))
        page = self.store.list_page(
            rtype,
            self._filter(target, rtype, query),
            limit=limit,
            continue_token=query.get("continue", ""),
            resource_version=exact,
        )
        body = rendering.list_bytes(
            view, page.entries, rv=page.rv, continue_token=page.continue_token, remaining=page.remaining
        )
        return respond(body)

    async def _object(
        self,
        request: web.Request,
        view: rendering.View,
        target: routing.Target,
        rtype: resources.ResourceType,
    ) -> web.Response:
        ns, name, sub = target.namespace or "", target.name, target.subresource
        method = request.method
        if sub == "scale":
            return await self._scale(request, target, rtype)
        if method == "GET":
            return respond(rendering.object_bytes(view, self.store.get(rtype, ns, name)))
        if method == "PUT":
            body = await _body(request)
            entry = self.store.update(
                rtype,
                ns,
                name,
                body,
                version=target.version,
                subresource=sub,
                write=_write(request),
            )
            return respond(rendering.object_bytes(view, entry))
        if method == "PATCH":
            entry = await self._patch(request, view, target, rtype)
            return respond(rendering.object_bytes(view, entry))
        if method == "DELETE" and not sub:
            return await self._delete(request, view, target, rtype)
        raise errors.method_not_allowed()

    async def _patch(
        self,
        request: web.Request,
        view: rendering.View,
        target: routing.Target,
        rtype: resources.ResourceType,
    ) -> watching.Entry:
        ns, name = target.namespace or "", target.name
        content_type = request.content_type
        raw = await request.read()
        patch = _decode(raw, yaml_ok=content_type.endswith("yaml"))
        try:
            current = self.store.get(rtype, ns, name)
        except errors.ApiError:
            if content_type != "application/apply-patch+yaml":
                raise
            return self.store.create(rtype, ns, patch, version=target.version, write=_write(request))
        patched = apply_patch(content_type, rendering.as_version(view, current), patch)
        return self.store.update(
            rtype,
            ns,
            name,
            patched,
            version=target.version,
            subresource=target.subresource,
            write=_write(request),
        )

    async def _scale(
        self, request: web.Request, target: routing.Target, rtype: resources.ResourceType
    ) -> web.Response:
        ns, name = target.namespace or "", target.name
        assert rtype.scale is not None
        current = self.store.get(rtype, ns, name)
        if request.method == "GET":
            return respond_json(rendering.scale_of(rtype, current))
        if request.method == "PUT":
            scale = await _body(request)
        elif request.method == "PATCH":
            patch = _decode(await request.read(), yaml_ok=request.content_type.endswith("yaml"))
            scale = apply_patch(request.content_type, rendering.scale_of(rtype, current), patch)
        else:
            raise errors.method_not_allowed()
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise errors.invalid(
                "Scale",
                name,
                [
                    errors.Cause(
                        "FieldValueInvalid",
                        f"Invalid value: {replicas}: must be greater than or equal to 0",
                        "spec.replicas",
                    )
                ],
                group="autoscaling",
            )
        obj = objects.copy_obj(current)
        wanted_rv = (scale.get("metadata") or {}).get("resourceVersion")
        if wanted_rv:
            obj["metadata"]["resourceVersion"] = wanted_rv
        rendering.set_path(obj, rtype.scale.spec_replicas_path, replicas)
        entry = self.store.update(rtype, ns, name, obj, version=rtype.storage_version, write=_write(request))
        return respond_json(rendering.scale_of(rtype, entry))

    async def _delete(
        self,
        request: web.Request,
        view: rendering.View,
        target: routing.Target,
        rtype: resources.ResourceType,
    ) -> web.Response:
        opts = await _delete_options(request)
        entry, gone = self.store.delete(
            rtype,
            target.namespace or "",
            target.name,
            propagation=opts["propagation"],
            uid=opts["uid"],
            resource_version=opts["rv"],
            dry_run=opts["dry_run"],
        )
        if rtype.returns_deleted_object or not gone:
            return respond(rendering.object_bytes(view, entry))
        meta = entry.obj["metadata"]
        return respond_json(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": {
                    "name": meta["name"],
                    "group": rtype.group,
                    "kind": rtype.plural,
                    "uid": meta["uid"],
                },
            }
        )

    async def _delete_collection(
        self,
        request: web.Request,
        view: rendering.View,
        target: routing.Target,
        rtype: resources.ResourceType,
    ) -> web.Response:
        opts = await _delete_options(request)
        page = self.store.list_page(rtype, self._filter(target, rtype, request.query))
        deleted = []
        for entry in page.entries:
            meta = entry.obj["metadata"]
            if self.store.objects(rtype.key).get((meta.get("namespace", ""), meta["name"])) is None:
                continue  # already collected by a cascade of an earlier item
            result, _ = self.store.delete(
                rtype,
                meta.get("namespace", ""),
                meta["name"],
                propagation=opts["propagation"],
                dry_run=opts["dry_run"],
            )
            deleted.append(result)
        plain = rendering.View(rtype, view.version)
        return respond(
            rendering.list_bytes(plain, deleted, rv=self.store.rv, continue_token="", remaining=None)
        )


def apply_patch(content_type: str, target: dict[str, Any], patch: Any) -> dict[str, Any]:
    """The patched object, by the algorithm the Content-Type names (415 for unknown types)."""
    try:
        if content_type in _MERGE_TYPES:
            if not isinstance(patch, dict):
                raise errors.bad_request("a merge patch must be a JSON object")
            result = patching.merge_patch(target, patch)
        elif content_type == "application/json-patch+json":
            result = patching.json_patch(target, patch)
        else:
            raise errors.unsupported_media_type(
                f"the body of the request was in an unknown format - accepted media types include: "
                f"application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, "
                f"application/strategic-merge-patch+json (got {content_type or 'none'!r})"
            )
    except patching.PatchError as exc:
        raise errors.ApiError(
            422, "Invalid", f"the server rejected our request due to an error in our request: {exc}"
        ) from exc
    if not isinstance(result, dict):
        raise errors.ApiError(422, "Invalid", "the patched object must be a JSON object")
    return result


def _write(request: web.Request) -> options.Write:
    """dryRun and fieldValidation of a write, and the request's list that collects its warnings."""
    return options.write(request.query, request.setdefault(_WARNINGS, []))


def _decode(raw: bytes, *, yaml_ok: bool = False) -> Any:
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        if (
            not yaml_ok
        ):  # YAML bodies are mostly JSON (kubectl sends JSON as apply-patch+yaml): try that first
            raise errors.bad_request(f"the request body could not be decoded: {exc}") from exc
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise errors.bad_request(f"the request body could not be decoded: {exc}") from exc


async def _body(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    if request.content_type == protobuf.CONTENT_TYPE:
        return protobuf.decode(raw)
    body = _decode(raw, yaml_ok=request.content_type in ("application/yaml", "application/x-yaml"))
    if not isinstance(body, dict):
        raise errors.bad_request("the request body must be a JSON object")
    return body


async def _delete_options(request: web.Request) -> dict[str, Any]:
    query = request.query
    opts: dict[str, Any] = {}
    raw = await request.read()
    if raw.strip():
        decoded = _decode(raw)
        opts = decoded if isinstance(decoded, dict) else {}
    propagation = query.get("propagationPolicy") or opts.get("propagationPolicy") or "Background"
    if opts.get("orphanDependents") is True or options.flag(query.get("orphanDependents")):
        propagation = "Orphan"
    if propagation not in ("Background", "Foreground", "Orphan"):
        raise errors.bad_request(f'unsupported propagationPolicy "{propagation}"')
    preconditions = opts.get("preconditions") or {}
    return {
        "propagation": propagation,
        "uid": preconditions.get("uid"),
        "rv": preconditions.get("resourceVersion"),
        "dry_run": options.dry_run(query) or bool(opts.get("dryRun")),
    }
