"""One cluster's state: objects of every resource, the resourceVersion counter, the verbs.

Owns create / get / list / update / delete / watch on in-memory objects, with optimistic
concurrency, finalizers, and the registry of served resources (built-ins plus one per CRD). What
a write does to metadata (uid, generation, preconditions, ...) is in ``metadata``; what it does
to the body in ``admission``; consistent lists at a resourceVersion in ``listing``; the uid and
ownerReference index in ``owners``. The cluster's background controllers (garbage collector,
namespace and CRD cleanup) live in ``collecting`` and run synchronously after each write. Talks
to ``watching`` for the change log; knows nothing of HTTP.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from sandbox.kubeapi import errors, options
from sandbox.kubeapi.kinds import resources
from sandbox.kubeapi.state import admission, collecting, listing, metadata, objects, owners, watching

ObjectKey = owners.ObjectKey


class Store:
    """The objects and change log of one emulated cluster."""

    def __init__(self, *, history: int = 10_000, watch_queue: int = 10_000) -> None:
        self.rv = 0
        self.history = watching.History(history)
        self.watch_queue = watch_queue
        self.types: dict[watching.ResourceKey, resources.ResourceType] = {}
        self._objects: dict[watching.ResourceKey, dict[ObjectKey, watching.Entry]] = {}
        self._owners = owners.Owners()
        self._work: deque[Callable[[], None]] = deque()
        for rtype in resources.builtins():
            self.register(rtype)
        for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.create(self.types[objects.NAMESPACES], "", {"metadata": {"name": name}}, version="v1")

    # Registry ---------------------------------------------------------------------------------

    def register(self, rtype: resources.ResourceType) -> None:
        self.types[rtype.key] = rtype
        self._objects.setdefault(rtype.key, {})

    def unregister(self, key: watching.ResourceKey) -> None:
        self.types.pop(key, None)
        self._objects.pop(key, None)
        self.history.close_all(key)

    def resolve(self, group: str, version: str, plural: str) -> resources.ResourceType | None:
        rtype = self.types.get((group, plural))
        return rtype if rtype is not None and version in rtype.versions else None

    def objects(self, key: watching.ResourceKey) -> dict[ObjectKey, watching.Entry]:
        return self._objects.get(key, {})

    def locate(self, uid: str) -> tuple[watching.ResourceKey, watching.Entry] | None:
        """The resource and current object with this uid, if it exists."""
        where = self._owners.where(uid)
        if where is None:
            return None
        entry = self._objects.get(where[0], {}).get(where[1])
        return None if entry is None else (where[0], entry)

    def dependents(self, uid: str) -> list[tuple[watching.ResourceKey, watching.Entry]]:
        found = []
        for key, okey in self._owners.dependents(uid):
            entry = self._objects.get(key, {}).get(okey)
            if entry is not None:
                found.append((key, entry))
        return found

    # Reads ------------------------------------------------------------------------------------

    def get(self, rtype: resources.ResourceType, namespace: str, name: str) -> watching.Entry:
        entry = self._objects[rtype.key].get((namespace, name))
        if entry is None:
            raise errors.not_found(rtype.plural, name, group=rtype.group)
        return entry

    def list_page(
        self,
        rtype: resources.ResourceType,
        filter_: watching.Filter,
        *,
        limit: int = 0,
        continue_token: str = "",
        resource_version: int | None = None,
    ) -> listing.Page:
        """A consistent page: the state at the token's (or the given exact) resourceVersion."""
        start: ObjectKey | None = None
        rv = self.rv if resource_version is None else resource_version
        if continue_token:
            rv, start = listing.resume(continue_token, self.history)
        view = self._objects.get(rtype.key, {})
        if rv < self.rv:
            view = listing.snapshot(view, self.history, rtype.key, rv)
        return listing.page(view, filter_, rv=rv, limit=limit, start=start)

    def watch(
        self, filter_: watching.Filter, resource_version: str | None
    ) -> tuple[list[tuple[str, watching.Entry]], watching.Watcher]:
        """Initial events (synthetic ADDED, or the replay since the rv) and the live watcher."""
        watcher = watching.Watcher(filter_, self.watch_queue)
        initial: list[tuple[str, watching.Entry]] = []
        if resource_version in (None, "", "0"):
            view = self._objects.get(filter_.key, {})
            initial = [
                ("ADDED", view[k]) for k in sorted(view, key=listing.order) if filter_.matches(view[k].obj)
            ]
        else:
            rv = options.parse_rv(resource_version)
            self.history.check(rv)
            for event in self.history.since(rv, filter_.key):
                kind = watcher.translate(event)
                if kind is not None:
                    initial.append((kind, event.entry))
        self.history.subscribe(watcher)
        return initial, watcher

    # Writes -----------------------------------------------------------------------------------

    def create(
        self,
        rtype: resources.ResourceType,
        namespace: str,
        body: dict[str, Any],
        *,
        version: str,
        write: options.Write = options.PLAIN_WRITE,
    ) -> watching.Entry:
        meta = metadata.of(body)
        self._check_namespace(rtype, namespace, meta)
        metadata.name_new(rtype, meta)
        admission.check_identity(rtype, body, version=version)
        if rtype.has_status and rtype.crd_name:
            body.pop("status", None)  # the status subresource owns it
        given = meta.pop("managedFields", None)
        admission.admit(rtype, body, version=version, write=write)
        if (namespace, meta["name"]) in self._objects[rtype.key]:
            raise errors.already_exists(rtype.plural, meta["name"], group=rtype.group)
        metadata.stamp_new(rtype, meta)
        metadata.manage(rtype, None, body, given, write=write, version=version)
        if rtype.key == objects.CRDS:
            collecting.crd_defaults(body, finalizer=objects.CRD_FINALIZER)
        if write.dry_run:
            meta["resourceVersion"] = str(self.rv)
            return watching.Entry(body)
        entry = self._write(rtype, body, "ADDED", None)
        self._drain()
        return entry

    def _check_namespace(self, rtype: resources.ResourceType, namespace: str, meta: dict[str, Any]) -> None:
        if not rtype.namespaced:
            meta.pop("namespace", None)
            return
        if meta.get("namespace") and meta["namespace"] != namespace:
            raise metadata.namespace_mismatch()
        meta["namespace"] = namespace
        ns = self._objects[objects.NAMESPACES].get(("", namespace))
        if ns is None:
            raise errors.not_found("namespaces", namespace)
        if ns.obj["metadata"].get("deletionTimestamp"):
            raise errors.forbidden(
                rtype.plural,
                str(meta.get("name") or meta.get("generateName", "")),
                f"unable to create new content in namespace {namespace} because it is being terminated",
                group=rtype.group,
            )

    def update(
        self,
        rtype: resources.ResourceType,
        namespace: str,
        name: str,
        body: dict[str, Any],
        *,
        version: str,
        subresource: str = "",
        write: options.Write = options.PLAIN_WRITE,
    ) -> watching.Entry:
        """PUT semantics: replace the object (or only its status for ``subresource="status"``)."""
        meta = metadata.of(body)
        metadata.name_put(meta, name)
        current = self._objects[rtype.key].get((namespace, name))
        if current is None:
            if rtype.create_on_update and not subresource:
                return self.create(rtype, namespace, body, version=version, write=write)
            raise errors.not_found(rtype.plural, name, group=rtype.group)
        metadata.check_put(rtype, namespace, meta, current.obj)
        admission.check_identity(rtype, body, version=version)
        given = None if subresource else meta.get("managedFields")
        new = admission.merge_subresource(rtype, current, body, subresource)
        admission.admit(rtype, new, version=version, write=write)
        metadata.keep_server_fields(rtype, current.obj, new, bump=subresource != "status")
        metadata.manage(rtype, current.obj, new, given, write=write, version=version, subresource=subresource)
        if rtype.key == objects.CRDS:
            collecting.crd_defaults(new, finalizer=None)
        if new == current.obj:
            return current  # a no-op write changes nothing, not even the resourceVersion
        if write.dry_run:
            return watching.Entry(new)
        entry = self.write(rtype, new, current)
        self._drain()
        return entry

    def delete(
        self,
        rtype: resources.ResourceType,
        namespace: str,
        name: str,
        *,
        deletion: options.Deletion = options.PLAIN_DELETE,
    ) -> tuple[watching.Entry, bool]:
        """Delete (or start deleting): returns the object and whether it is gone already."""
        current = self.get(rtype, namespace, name)
        metadata.check_delete(rtype, current.obj["metadata"], deletion)
        if deletion.dry_run:
            return current, False
        entry, gone = collecting.delete(self, rtype, current, propagation=deletion.propagation)
        self._drain()
        return entry, gone

    # Internals shared with ``collecting`` ------------------------------------------------------

    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def defer(self, work: Callable[[], None]) -> None:
        """Queue controller work to run once the current write is complete."""
        self._work.append(work)

    def _drain(self) -> None:
        while self._work:
            self._work.popleft()()

    def _commit(
        self, rtype: resources.ResourceType, obj: dict[str, Any], kind: str, old: watching.Entry | None
    ) -> watching.Entry:
        """Give ``obj`` the next resourceVersion, store (or, DELETED, drop) it, index it, log it."""
        meta = obj["metadata"]
        rv = self.next_rv()
        meta["resourceVersion"] = str(rv)
        entry = watching.Entry(obj)
        okey = (meta.get("namespace", ""), meta["name"])
        gone = kind == "DELETED"
        if gone:
            self._objects[rtype.key].pop(okey, None)
        else:
            self._objects[rtype.key][okey] = entry
        self._owners.index((rtype.key, okey), old.obj if old else None, None if gone else obj)
        self.history.record(watching.Event(rv, kind, rtype.key, entry, old))
        return entry

    def _write(
        self, rtype: resources.ResourceType, obj: dict[str, Any], kind: str, old: watching.Entry | None
    ) -> watching.Entry:
        entry = self._commit(rtype, obj, kind, old)
        collecting.after_write(self, rtype, entry, old)
        if old is not None:
            old.compact()
        return entry

    def write(
        self, rtype: resources.ResourceType, obj: dict[str, Any], old: watching.Entry
    ) -> watching.Entry:
        """An update of an existing object (by a client's PUT or a controller): removes it once finalized."""
        if metadata.finalized(rtype, obj):
            return self._remove(rtype, old, final=obj)
        return self._write(rtype, obj, "MODIFIED", old)

    def _remove(
        self, rtype: resources.ResourceType, current: watching.Entry, *, final: dict[str, Any] | None = None
    ) -> watching.Entry:
        obj = final if final is not None else objects.copy_obj(current)
        entry = self._commit(rtype, obj, "DELETED", current)
        collecting.after_remove(self, rtype, entry)
        current.compact()
        return entry

    def remove(self, rtype: resources.ResourceType, current: watching.Entry) -> watching.Entry:
        return self._remove(rtype, current)
