"""The Kamaji simulator's Kubernetes calls: the only module of ``sandbox.kamaji`` that imports
kubernetes_asyncio.

Owns a thin, typed seam over kubernetes_asyncio: plain ``dict`` objects in and out (camelCase, as
on the wire), list and watch of TenantControlPlanes, TCP and status patches, Secrets and CRDs.
Library and transport errors are translated in one place (:func:`_translated`) into the small tree
below, so the rest of the package never sees ``ApiException`` or aiohttp::

    KubeError              any failed call; .status is the HTTP code (0: no answer)
    ├── NotFound           404
    ├── Conflict           409 (stale resourceVersion or AlreadyExists; .reason tells which)
    ├── Gone               410 (a watch or list resourceVersion expired: relist)
    ├── Invalid            422 (the object violates the schema; .message lists the fields)
    └── Unavailable        no answer, 429 or 5xx: retry with backoff

Talks to one API server, whichever the ApiClient points at (the emulator or a real cluster).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import aiohttp
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

__all__ = [
    "GROUP",
    "PLURAL",
    "VERSION",
    "Conflict",
    "Gone",
    "Invalid",
    "Kube",
    "KubeError",
    "NotFound",
    "Unavailable",
    "WatchEvent",
    "new_api_client",
]

GROUP: Final = "kamaji.clastix.io"
VERSION: Final = "v1alpha1"
PLURAL: Final = "tenantcontrolplanes"

_MERGE_PATCH: Final = "application/merge-patch+json"


class KubeError(Exception):
    """A Kubernetes API call failed; ``status`` is the HTTP code (0 when no answer came back)."""

    def __init__(self, status: int, reason: str = "", message: str = "") -> None:
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.message = message


class NotFound(KubeError):
    pass


class Conflict(KubeError):
    pass


class Gone(KubeError):
    pass


class Invalid(KubeError):
    pass


class Unavailable(KubeError):
    pass


_BY_STATUS: Final[dict[int, type[KubeError]]] = {404: NotFound, 409: Conflict, 410: Gone, 422: Invalid}


def _error(status: int, body: str | bytes | None, fallback_reason: str = "") -> KubeError:
    """A KubeError from an HTTP status and a Kubernetes ``Status`` body (if it is one)."""
    reason, message = fallback_reason, ""
    if body:
        try:
            decoded = json.loads(body)
        except ValueError:
            decoded = None
        if isinstance(decoded, Mapping):
            reason = str(decoded.get("reason") or reason)
            message = str(decoded.get("message") or "")
    kind = _BY_STATUS.get(status)
    if kind is None:
        kind = Unavailable if status in (0, 429) or status >= 500 else KubeError
    return kind(status, reason, message)


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except ApiException as exc:
        raise _error(int(exc.status or 0), exc.body, str(exc.reason or "")) from exc
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise Unavailable(0, type(exc).__name__, str(exc)) from exc


@dataclass(frozen=True)
class WatchEvent:
    """One watch event: ADDED, MODIFIED, DELETED or BOOKMARK, with the object as a dict."""

    type: str
    object: dict[str, Any]

    @property
    def resource_version(self) -> str:
        return str((self.object.get("metadata") or {}).get("resourceVersion") or "")


class Kube:
    """Typed calls on one cluster through a caller-owned kubernetes_asyncio ``ApiClient``."""

    def __init__(self, api_client: Any) -> None:
        self._api_client = api_client
        # Held as Any: the bundled stubs omit keyword arguments the runtime accepts (``_content_type``,
        # without which a dict body goes out as a JSON patch) and want typed models where the
        # runtime takes plain dicts. This class is the typed surface instead.
        self._custom: Any = client.CustomObjectsApi(api_client)
        self._core: Any = client.CoreV1Api(api_client)
        self._extensions: Any = client.ApiextensionsV1Api(api_client)

    def _to_dict(self, model: Any) -> dict[str, Any]:
        # Typed models (V1Secret, ...) to the wire's camelCase dicts, so callers see one shape.
        data = self._api_client.sanitize_for_serialization(model)
        if not isinstance(data, dict):
            raise TypeError(f"expected an object, got {type(data).__name__}")
        return data

    # TenantControlPlanes

    async def list_tcps(self) -> tuple[list[dict[str, Any]], str]:
        """Every TCP in every namespace, and the list's resourceVersion to watch from."""
        with _translated():
            found = await self._custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
        return list(found.get("items") or ()), str((found.get("metadata") or {}).get("resourceVersion") or "")

    async def watch_tcps(
        self, resource_version: str, *, timeout_seconds: int
    ) -> AsyncGenerator[WatchEvent, None]:
        """TCP events after ``resource_version`` until the server ends the watch.

        Raises :class:`Gone` when the server no longer has that version (relist then), whether
        it answers 410 up front or sends an ERROR event mid-stream.
        """
        with _translated():
            response = await self._custom.list_cluster_custom_object(
                GROUP,
                VERSION,
                PLURAL,
                watch=True,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=timeout_seconds,
                _preload_content=False,
                # The server closes the watch after timeout_seconds; the client gives it slack.
                _request_timeout=aiohttp.ClientTimeout(sock_connect=10, sock_read=timeout_seconds + 30),
            )
        try:
            if response.status != 200:
                raise _error(response.status, await response.read(), str(response.reason or ""))
            while True:
                with _translated():
                    line = await response.content.readline()
                if not line:
                    return
                if not line.strip():
                    continue
                event = json.loads(line)
                kind, obj = str(event.get("type") or ""), event.get("object") or {}
                if kind == "ERROR":
                    raise _error(int(obj.get("code") or 0), json.dumps(obj), str(obj.get("reason") or ""))
                yield WatchEvent(type=kind, object=obj)
        finally:
            response.release()

    async def get_tcp(self, namespace: str, name: str) -> dict[str, Any]:
        with _translated():
            found: dict[str, Any] = await self._custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name
            )
        return found

    async def patch_tcp(self, namespace: str, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """A JSON merge patch of the main resource (metadata, spec); put a resourceVersion in it to lock."""
        with _translated():
            patched: dict[str, Any] = await self._custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, dict(patch), _content_type=_MERGE_PATCH
            )
        return patched

    async def patch_tcp_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> dict[str, Any]:
        """A JSON merge patch of ``.status`` through the status subresource."""
        with _translated():
            patched: dict[str, Any] = await self._custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, namespace, PLURAL, name, {"status": dict(status)}, _content_type=_MERGE_PATCH
            )
        return patched

    # Secrets

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Secret, or None when it does not exist."""
        try:
            with _translated():
                found = await self._core.read_namespaced_secret(name, namespace)
        except NotFound:
            return None
        return self._to_dict(found)

    async def create_secret(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        with _translated():
            created = await self._core.create_namespaced_secret(namespace, dict(body))
        return self._to_dict(created)

    async def replace_secret(self, namespace: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """PUT; with ``metadata.resourceVersion`` in ``body`` it fails with Conflict if stale."""
        with _translated():
            replaced = await self._core.replace_namespaced_secret(name, namespace, dict(body))
        return self._to_dict(replaced)

    # CustomResourceDefinitions

    async def get_crd(self, name: str) -> dict[str, Any] | None:
        try:
            with _translated():
                found = await self._extensions.read_custom_resource_definition(name)
        except NotFound:
            return None
        return self._to_dict(found)

    async def create_crd(self, body: Mapping[str, Any]) -> dict[str, Any]:
        with _translated():
            created = await self._extensions.create_custom_resource_definition(dict(body))
        return self._to_dict(created)

    async def replace_crd(self, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        with _translated():
            replaced = await self._extensions.replace_custom_resource_definition(name, dict(body))
        return self._to_dict(replaced)

    async def serves(self, group: str, version: str, plural: str) -> bool:
        """Whether the API server serves ``group/version/plural`` yet (a new CRD takes a moment)."""
        try:
            with _translated():
                await self._custom.list_cluster_custom_object(group, version, plural, limit=1)
        except NotFound:
            return False
        return True


async def new_api_client(kubeconfig: str | Path, *, context: str | None = None) -> Any:
    """A kubernetes_asyncio ApiClient for a kubeconfig file; the caller closes it."""
    return await config.new_client_from_config(config_file=str(kubeconfig), context=context)
