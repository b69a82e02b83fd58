"""One generic Kubernetes client over kubernetes_asyncio: plain dicts in and out.

With ``common.kube.connecting`` (which makes its ApiClient), the only place of ``common`` that
imports kubernetes_asyncio. Every call goes through ``ApiClient.call_api`` with a path from
``resources.Resource``, so built-ins and custom resources share one code path (get, list, watch,
create, replace, merge/JSON patch, delete, subresources, create-or-replace, whether a resource
is served yet, discovery: a group's versions, a group version's resources, server-side apply).
Library and transport errors become ``common.kube.errors`` in ``translated``.
Works the same against a real API server and the sandbox's emulator.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from typing import Any, Final

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from common.kube import errors
from common.kube.answers import Listing, WatchEvent, event_of
from common.kube.resources import Resource

MERGE_PATCH: Final = "application/merge-patch+json"
JSON_PATCH: Final = "application/json-patch+json"
APPLY_PATCH: Final = "application/apply-patch+yaml"
_AUTH: Final = ["BearerToken"]


@contextlib.contextmanager
def translated() -> Iterator[None]:
    try:
        yield
    except ApiException as exc:
        raise errors.from_status(int(exc.status or 0), exc.body, str(exc.reason or "")) from None
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise errors.Unavailable(0, type(exc).__name__, str(exc)) from None


def _selectors(label_selector: str | None, field_selector: str | None = None) -> list[tuple[str, Any]]:
    query: list[tuple[str, Any]] = []
    if label_selector:
        query.append(("labelSelector", label_selector))
    if field_selector:
        query.append(("fieldSelector", field_selector))
    return query


class Kube:
    """Calls on one cluster through a kubernetes_asyncio ``ApiClient``: the caller's, or one of
    its own from ``common.kube.connecting.connect``. ``close`` closes it."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client

    async def close(self) -> None:
        await self.api_client.close()

    async def _call(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, Any]] = (),
        body: Any = None,
        content_type: str = "application/json",
        preload: bool = True,
        timeout: Any = None,
    ) -> Any:
        with translated():
            return await self.api_client.call_api(
                path,
                method,
                query_params=list(query),
                header_params={"Accept": "application/json", "Content-Type": content_type},
                body=body,
                response_types_map={200: "object", 201: "object", 202: "object"},
                auth_settings=_AUTH,
                _return_http_data_only=True,
                _preload_content=preload,
                _request_timeout=timeout,
            )

    async def get(self, r: Resource, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        found: dict[str, Any] = await self._call("GET", r.path(namespace, name))
        return found

    async def get_or_none(
        self, r: Resource, name: str, *, namespace: str | None = None
    ) -> dict[str, Any] | None:
        try:
            return await self.get(r, name, namespace=namespace)
        except errors.NotFound:
            return None

    async def list(
        self,
        r: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Listing:
        """All objects (following ``continue`` pages) and the list's resourceVersion."""
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            query: list[tuple[str, Any]] = [("limit", 500), *_selectors(label_selector, field_selector)]
            if token:
                query.append(("continue", token))
            page = await self._call("GET", r.path(namespace), query=query)
            items.extend(page.get("items") or ())
            meta = page.get("metadata") or {}
            token = str(meta.get("continue") or "")
            if not token:
                return Listing(items=items, resource_version=str(meta.get("resourceVersion") or ""))

    async def watch(
        self,
        r: Resource,
        *,
        resource_version: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Events after ``resource_version`` until the server ends the watch.

        Raises ``errors.Gone`` when that version has expired, whether the server answers 410 at
        once or sends an ERROR event mid-stream: the caller relists.
        """
        query: list[tuple[str, Any]] = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", timeout_seconds),
            *_selectors(label_selector),
        ]
        response = await self._call(
            "GET",
            r.path(namespace),
            query=query,
            preload=False,
            # The server ends the watch after timeout_seconds; the client allows it some slack.
            timeout=aiohttp.ClientTimeout(sock_connect=10, sock_read=timeout_seconds + 30),
        )
        try:
            if response.status != 200:
                raise errors.from_status(response.status, await response.read(), str(response.reason or ""))
            while True:
                with translated():
                    line = await response.content.readline()
                if not line:
                    return
                if line.strip():
                    yield event_of(line)
        finally:
            response.release()

    async def create(
        self, r: Resource, body: Mapping[str, Any], *, namespace: str | None = None, dry_run: bool = False
    ) -> dict[str, Any]:
        """POST; ``dry_run``: only ask whether the server would (AlreadyExists, Invalid), write nothing."""
        query = [("dryRun", "All")] if dry_run else []
        created: dict[str, Any] = await self._call("POST", r.path(namespace), query=query, body=dict(body))
        return created

    async def replace(
        self, r: Resource, name: str, body: Mapping[str, Any], *, namespace: str | None = None
    ) -> dict[str, Any]:
        """PUT; with ``metadata.resourceVersion`` in ``body`` it fails with Conflict when stale."""
        replaced: dict[str, Any] = await self._call("PUT", r.path(namespace, name), body=dict(body))
        return replaced

    async def patch(
        self,
        r: Resource,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        content_type: str = MERGE_PATCH,
        field_validation: str | None = None,
    ) -> dict[str, Any]:
        """A merge patch (or a JSON patch with ``content_type=JSON_PATCH``); ``field_validation``
        ``"Strict"`` makes the server refuse (400) a field the schema does not declare."""
        body: Any = dict(patch) if isinstance(patch, Mapping) else [dict(p) for p in patch]
        query = [("fieldValidation", field_validation)] if field_validation else []
        patched: dict[str, Any] = await self._call(
            "PATCH", r.path(namespace, name, subresource), query=query, body=body, content_type=content_type
        )
        return patched

    async def apply(
        self,
        r: Resource,
        body: Mapping[str, Any],
        *,
        manager: str,
        namespace: str | None = None,
        force: bool = True,
    ) -> dict[str, Any]:
        """Server-side apply of ``body`` as field manager ``manager``: creates the object when
        absent, removes the fields ``manager`` applied before and ``body`` no longer has (unless
        another manager owns them too); ``force`` takes back fields another manager changed
        (else: Conflict)."""
        query = [("fieldManager", manager), ("force", "true" if force else "false")]
        path = r.path(namespace, str(body["metadata"]["name"]))
        applied: dict[str, Any] = await self._call(
            "PATCH", path, query=query, body=dict(body), content_type=APPLY_PATCH
        )
        return applied

    async def create_or_replace(
        self, r: Resource, body: Mapping[str, Any], *, namespace: str | None = None, attempts: int = 1
    ) -> dict[str, Any]:
        """Create ``body``, or replace the object of its name with it (``kubectl apply``'s outcome).

        Create first: on a fresh cluster that is the one request. On AlreadyExists, PUT with the
        current resourceVersion (a concurrent writer makes it Conflict, not lost); each of
        ``attempts`` reads again. Conflict when it kept changing (or vanishing) for all of them."""
        name = str(body["metadata"]["name"])
        for _ in range(attempts):
            try:
                return await self.create(r, body, namespace=namespace)
            except errors.Conflict:
                pass
            existing = await self.get_or_none(r, name, namespace=namespace)
            if existing is None:
                continue
            metadata = {**body["metadata"], "resourceVersion": existing["metadata"]["resourceVersion"]}
            try:
                return await self.replace(r, name, {**body, "metadata": metadata}, namespace=namespace)
            except errors.Conflict:
                continue
        raise errors.Conflict(409, "Conflict", f"{r.kind} {name} kept changing while replacing it")

    async def serves(self, r: Resource) -> bool:
        """Whether the API server serves ``r`` yet (a new CRD's resource takes a moment)."""
        try:
            await self._call("GET", r.path(), query=[("limit", 1)])
        except errors.NotFound:
            return False
        return True

    async def group_versions(self, group: str) -> tuple[str, ...]:
        """The versions of API ``group`` the server serves, its preferred one first ((): none)."""
        try:
            found = await self._call("GET", f"/apis/{group}")
        except errors.NotFound:
            return ()
        versions = [str(v.get("version") or "") for v in found.get("versions") or ()]
        preferred = str((found.get("preferredVersion") or {}).get("version") or "")
        return tuple(sorted(versions, key=lambda v: v != preferred))

    async def api_resources(self, group: str, version: str) -> tuple[dict[str, Any], ...]:
        """The discovery entries (name, kind, namespaced, verbs) of ``group/version`` ((): not served)."""
        try:
            found = await self._call("GET", f"/apis/{group}/{version}")
        except errors.NotFound:
            return ()
        return tuple(dict(e) for e in found.get("resources") or ())

    async def delete(
        self,
        r: Resource,
        name: str,
        *,
        namespace: str | None = None,
        uid: str | None = None,
        propagation: str = "Background",
    ) -> dict[str, Any] | None:
        """Delete (with a uid precondition when given); None when already gone."""
        options: dict[str, Any] = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "propagationPolicy": propagation,
        }
        if uid:
            options["preconditions"] = {"uid": uid}
        try:
            found: dict[str, Any] = await self._call("DELETE", r.path(namespace, name), body=options)
        except errors.NotFound:
            return None
        return found
