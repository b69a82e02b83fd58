"""The REST API over HTTP: one aiohttp catch-all route that dispatches a request.

Owns the dispatch of one request: non-resource paths (version, health, discovery, OpenAPI
stubs), the resolution of a resource path to a served resource and its subresources, and the
read verbs (get, list; watch streams are in ``streaming``). Writes are in ``writing``, deletes
in ``deleting``; what a request carries is read through ``calls.Call``; errors become Status
responses in ``responses``. Counts every resource request it receives (``requests``: which
calls a client made, for tests, and on ``/metrics`` for benchmarks). Talks to a ``store.Store``.
"""

from __future__ import annotations

import collections
import logging
from typing import Any, NamedTuple

from aiohttp import web

from sandbox.kubeapi import errors, options
from sandbox.kubeapi.kinds import discovery, resources
from sandbox.kubeapi.serving import (
    calls,
    deleting,
    rendering,
    responses,
    reviews,
    routing,
    streaming,
    writing,
)
from sandbox.kubeapi.state import store

log = logging.getLogger(__name__)


class Request(NamedTuple):
    """What one resource request asked for, as ``Handler.requests`` counts it."""

    method: str
    """The HTTP method: a list or a watch is a ``GET`` with ``name`` empty."""
    plural: str
    namespace: str
    """Empty for a cluster-scoped resource or every namespace."""
    name: str
    subresource: str = ""
    """``status``, ``scale``; empty for the object itself."""


class Handler:
    """One cluster's HTTP front: ``handle`` is the aiohttp catch-all route."""

    def __init__(self, state: store.Store, settings: options.Settings) -> None:
        self.store = state
        self.settings = settings
        self.address = ""
        self.requests: collections.Counter[Request] = collections.Counter()
        """Resource requests received, by what they asked for (served or refused): for tests
        that check which calls a client makes, by watching the server rather than the client."""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            response = await self._dispatch(request)
            for warning in request.get(calls.WARNINGS, []):
                if not response.prepared:  # a watch stream has sent its headers already
                    response.headers.add("Warning", '299 - "' + warning.replace('"', '\\"') + '"')
            return response
        except errors.ApiError as exc:
            return responses.error_response(exc)
        except Exception as exc:  # a bug of ours: answer a Status, as the real server does on a panic
            log.exception("%s %s failed", request.method, request.path_qs)
            return responses.error_response(errors.internal(repr(exc)))

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        target = routing.parse(path)
        if target is None and path == "/metrics" and request.method == "GET":
            return responses.respond(self._metrics().encode(), content_type="text/plain; version=0.0.4")
        if target is None:
            return self._non_resource(request, path)
        rtype = self.store.resolve(target.group, target.version, target.plural)
        if rtype is None:
            raise responses.not_found_path()
        if target.namespace is not None and not rtype.namespaced:
            raise responses.not_found_path()
        if target.name == "" and target.subresource:
            raise responses.not_found_path()
        if target.namespace is None and rtype.namespaced and target.name:
            raise responses.not_found_path()
        if rtype.key == reviews.KEY:
            if request.method != "POST" or target.name:
                raise errors.method_not_allowed()
            return await reviews.create(request, self.store, self.settings.users)
        return await self._resource(request, target, rtype)

    def _non_resource(self, request: web.Request, path: str) -> web.Response:
        if request.method != "GET":
            raise errors.method_not_allowed()
        types = list(self.store.types.values())
        if path == "/version":
            return responses.respond_json(discovery.KUBE_VERSION)
        if path in ("/healthz", "/readyz", "/livez"):
            return responses.respond(b"ok", content_type="text/plain")
        if path == "/api":
            return responses.respond_json(discovery.api_versions(self.address))
        if path == "/apis":
            return responses.respond_json(discovery.api_group_list(types))
        if path == "/openapi/v3":
            # An empty index: kubectl finds no schema for any group-version, so it treats
            # server-side field validation as unsupported and validates client-side with
            # OpenAPI v2 (below), which has no definitions either: validation is skipped.
            return responses.respond_json({"paths": {}})
        if path == "/openapi/v2":
            # An empty protobuf openapi_v2.Document (zero bytes): no definitions, no validation.
            return responses.respond(
                b"", content_type="application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
            )
        segs = path.strip("/").split("/")
        doc: dict[str, Any] | None = None
        if segs == ["api", "v1"]:
            doc = discovery.api_resource_list(types, "", "v1")
        elif len(segs) == 2 and segs[0] == "apis":
            doc = discovery.api_group(types, segs[1])
        elif len(segs) == 3 and segs[0] == "apis":
            doc = discovery.api_resource_list(types, segs[1], segs[2])
        if doc is None:
            raise responses.not_found_path()
        return responses.respond_json(doc)

    def _metrics(self) -> str:
        """``requests`` in Prometheus' text format, by method and resource (``plural/status``
        for a subresource; a list and a watch are both a ``GET`` with no name): what benchmarks
        read to count a client's calls."""
        totals: collections.Counter[tuple[str, str]] = collections.Counter()
        for r, n in self.requests.items():
            totals[(r.method, f"{r.plural}/{r.subresource}" if r.subresource else r.plural)] += n
        lines = [
            "# HELP kubeapi_requests_total Resource requests received, by HTTP method and resource.",
            "# TYPE kubeapi_requests_total counter",
            *(
                f'kubeapi_requests_total{{method="{m}",resource="{plural}"}} {n}'
                for (m, plural), n in sorted(totals.items())
            ),
        ]
        return "\n".join(lines) + "\n"

    # Resource verbs ---------------------------------------------------------------------------

    async def _resource(
        self, request: web.Request, target: routing.Target, rtype: resources.ResourceType
    ) -> web.StreamResponse:
        view = rendering.View(
            rtype,
            target.version,
            table=rendering.wants_table(request.headers.get("Accept", "")),
            include=request.query.get("includeObject", "Metadata"),
        )
        if target.subresource and target.subresource not in _subresources(rtype):
            raise responses.not_found_path()
        where = (target.plural, target.namespace or "", target.name, target.subresource)
        self.requests[Request(request.method, *where)] += 1
        call = calls.Call(request, target, rtype, view)
        if not target.name:
            return await self._collection(call)
        if target.legacy_watch:
            return await self._watch(call)
        return await self._object(call)

    async def _collection(self, call: calls.Call) -> web.StreamResponse:
        method = call.request.method
        if method == "GET":
            if call.target.legacy_watch or options.flag(call.request.query.get("watch")):
                return await self._watch(call)
            return self._list(call)
        if method == "POST":
            return await writing.create(self.store, call)
        if method == "DELETE":
            return await deleting.delete_collection(self.store, call)
        raise errors.method_not_allowed()

    async def _object(self, call: calls.Call) -> web.Response:
        method, sub = call.request.method, call.target.subresource
        if sub == "scale":
            return await writing.scale(self.store, call)
        if method == "GET":
            entry = self.store.get(call.rtype, call.namespace, call.name)
            return responses.respond(rendering.object_bytes(call.view, entry))
        if method == "PUT":
            return await writing.put(self.store, call)
        if method == "PATCH":
            return await writing.patch(self.store, call)
        if method == "DELETE" and not sub:
            return await deleting.delete(self.store, call)
        raise errors.method_not_allowed()

    async def _watch(self, call: calls.Call) -> web.StreamResponse:
        return await streaming.watch(call.request, self.store, call.view, call.filter(), self.settings)

    def _list(self, call: calls.Call) -> web.Response:
        query = call.request.query
        limit = options.integer(query.get("limit"), "limit")
        exact = None
        if query.get("resourceVersionMatch") == "Exact":
            exact = options.parse_rv(query.get("resourceVersion"))
        page = self.store.list_page(
            call.rtype,
            call.filter(),
            limit=limit,
            continue_token=query.get("continue", ""),
            resource_version=exact,
        )
        body = rendering.list_bytes(
            call.view, page.entries, rv=page.rv, continue_token=page.continue_token, remaining=page.remaining
        )
        return responses.respond(body)


def _subresources(rtype: resources.ResourceType) -> set[str]:
    subs = {"status"} if rtype.has_status else set()
    if rtype.scale is not None:
        subs.add("scale")
    if rtype.key == ("", "namespaces"):
        subs.add("finalize")
    return subs
