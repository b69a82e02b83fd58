"""One cluster's state: objects of every resource, the resourceVersion counter, the verbs.

Owns create / get / list / update / delete / watch on in-memory objects, with the metadata the
real apiserver maintains (uid, resourceVersion from one monotonic counter, generation,
creationTimestamp, generateName, deletionTimestamp), optimistic concurrency (409 Conflict),
finalizers, and the registry of served resources (built-ins plus one per CRD). The cluster's
background controllers (garbage collector, namespace and CRD cleanup) live in ``collecting``
and run synchronously after each write. Talks to ``watching`` for the change log; knows nothing
of HTTP.
"""

from __future__ import annotations

import json
import random
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sandbox.kubeapi import admission, collecting, errors, objects, options, resources, watching

ObjectKey = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


@dataclass
class Page:
    entries: list[watching.Entry]
    rv: int
    continue_token: str = ""
    remaining: int | None = None


class Store:
    """The objects and change log of one emulated cluster."""

    def __init__(self, *, history: int = 10_000, watch_queue: int = 10_000) -> None:
        self.rv = 0
        self.history = watching.History(history)
        self.watch_queue = watch_queue
        self.types: dict[watching.ResourceKey, resources.ResourceType] = {}
        self._objects: dict[watching.ResourceKey, dict[ObjectKey, watching.Entry]] = {}
        self._uids: dict[str, tuple[watching.ResourceKey, ObjectKey]] = {}
        self._dependents: dict[str, set[tuple[watching.ResourceKey, ObjectKey]]] = {}
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
        where = self._uids.get(uid)
        if where is None:
            return None
        entry = self._objects.get(where[0], {}).get(where[1])
        return None if entry is None else (where[0], entry)

    def dependents(self, uid: str) -> list[tuple[watching.ResourceKey, watching.Entry]]:
        found = []
        for key, okey in sorted(self._dependents.get(uid, ())):
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
    ) -> Page:
        """A consistent page: the state at the token's (or the given exact) resourceVersion."""
        start: ObjectKey | None = None
        rv = self.rv if resource_version is None else resource_version
        if continue_token:
            rv, start = options.decode_continue(continue_token)
            if rv < self.history.compacted:
                raise errors.expired(
                    "The provided continue parameter is too old to display a consistent list result. "
                    "You can start a new list without the continue parameter."
                )
        view = self._snapshot(rtype.key, rv)
        name = filter_.fields.exact_name()
        keys = [k for k in view if k[1] == name] if name is not None else list(view)
        keys.sort()
        if start is not None:
            keys = [k for k in keys if k > start]
        items: list[watching.Entry] = []
        last: ObjectKey | None = None
        for index, okey in enumerate(keys):
            entry = view[okey]
            if not filter_.matches(entry.obj):
                continue
            if limit and len(items) == limit:
                filtered = not filter_.labels.empty or bool(filter_.fields.requirements)
                token = options.encode_continue(rv, last) if last is not None else ""
                return Page(items, rv, token, None if filtered else len(keys) - index)
            items.append(entry)
            last = okey
        return Page(items, rv)

    def _snapshot(self, key: watching.ResourceKey, rv: int) -> dict[ObjectKey, watching.Entry]:
        current = self._objects.get(key, {})
        if rv >= self.rv:
            return current
        self.history.check(rv)
        view = dict(current)
        for event in reversed(self.history.newer_than(rv)):
            if event.key != key:
                continue
            meta = event.entry.obj["metadata"]
            okey = (meta.get("namespace", ""), meta["name"])
            if event.type == "ADDED":
                view.pop(okey, None)
            elif event.old is not None:
                view[okey] = event.old
        return view

    def watch(
        self, filter_: watching.Filter, resource_version: str | None
    ) -> tuple[list[tuple[str, watching.Entry]], watching.Watcher]:
        """Initial events (synthetic ADDED, or the replay since the rv) and the live watcher."""
        watcher = watching.Watcher(filter_, self.watch_queue)
        initial: list[tuple[str, watching.Entry]] = []
        if resource_version in (None, "", "0"):
            view = self._objects.get(filter_.key, {})
            initial = [("ADDED", view[k]) for k in sorted(view) if filter_.matches(view[k].obj)]
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
        dry_run: bool = False,
        field_validation: str = "Warn",
        warnings: list[str] | None = None,
    ) -> watching.Entry:
        meta = body.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        self._check_namespace(rtype, namespace, meta)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(random.choices(_GENERATE_ALPHABET, k=5))
        if not meta.get("name"):
            raise errors.invalid(
                rtype.kind,
                "",
                [
                    errors.Cause(
                        "FieldValueRequired",
                        "Required value: name or generateName is required",
                        "metadata.name",
                    )
                ],
                group=rtype.group,
            )
        admission.check_identity(rtype, body, version=version)
        if rtype.has_status and rtype.crd_name:
            body.pop("status", None)  # the status subresource owns it
        admission.admit(rtype, body, version=version, field_validation=field_validation, warnings=warnings)
        okey = (namespace, meta["name"])
        if okey in self._objects[rtype.key]:
            raise errors.already_exists(rtype.plural, meta["name"], group=rtype.group)
        for server_owned in (
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "resourceVersion",
            "selfLink",
        ):
            meta.pop(server_owned, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = objects.now()
        if rtype.uses_generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if rtype.key == objects.CRDS:
            collecting.crd_defaults(body, finalizer=objects.CRD_FINALIZER)
        if dry_run:
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
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
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
        dry_run: bool = False,
        field_validation: str = "Warn",
        warnings: list[str] | None = None,
    ) -> watching.Entry:
        """PUT semantics: replace the object (or only its status for ``subresource="status"``)."""
        meta = body.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            )
        meta["name"] = name
        current = self._objects[rtype.key].get((namespace, name))
        if current is None:
            if rtype.create_on_update and not subresource:
                return self.create(
                    rtype,
                    namespace,
                    body,
                    version=version,
                    dry_run=dry_run,
                    field_validation=field_validation,
                    warnings=warnings,
                )
            raise errors.not_found(rtype.plural, name, group=rtype.group)
        if rtype.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        if (
            meta.get("resourceVersion")
            and meta["resourceVersion"] != current.obj["metadata"]["resourceVersion"]
        ):
            raise errors.conflict(rtype.plural, name, group=rtype.group)
        if meta.get("uid") and meta["uid"] != current.obj["metadata"]["uid"]:
            raise errors.conflict(
                rtype.plural,
                name,
                group=rtype.group,
                why=f"Precondition failed: UID in precondition: {meta['uid']}, "
                f"UID in object meta: {current.obj['metadata']['uid']}",
            )
        admission.check_identity(rtype, body, version=version)
        new = self._merge_subresource(rtype, current, body, subresource)
        admission.admit(rtype, new, version=version, field_validation=field_validation, warnings=warnings)
        self._keep_server_fields(rtype, current.obj, new, bump=subresource != "status")
        if rtype.key == objects.CRDS:
            collecting.crd_defaults(new, finalizer=None)
        if new == current.obj:
            return current  # a no-op write changes nothing, not even the resourceVersion
        if dry_run:
            return watching.Entry(new)
        if _finalized(rtype, new):
            entry = self._remove(rtype, current, final=new)
        else:
            entry = self._write(rtype, new, "MODIFIED", current)
        self._drain()
        return entry

    def _merge_subresource(
        self, rtype: resources.ResourceType, current: watching.Entry, body: dict[str, Any], subresource: str
    ) -> dict[str, Any]:
        if subresource == "status":
            new = objects.copy_obj(current)
            if "status" in body:
                new["status"] = body["status"]
            else:
                new.pop("status", None)
            return new
        if rtype.has_status:
            body.pop("status", None)
            if "status" in current.obj:
                body["status"] = objects.copy_obj(current)["status"]
        return body

    def _keep_server_fields(
        self, rtype: resources.ResourceType, old: dict[str, Any], new: dict[str, Any], *, bump: bool
    ) -> None:
        meta, old_meta = new["metadata"], old["metadata"]
        for field in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "namespace",
            "resourceVersion",
        ):
            if field in old_meta:
                meta[field] = old_meta[field]
            else:
                meta.pop(field, None)
        meta.pop("selfLink", None)
        if old_meta.get("deletionTimestamp"):
            added = set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
            if added:
                raise errors.invalid(
                    rtype.kind,
                    meta["name"],
                    [
                        errors.Cause(
                            "FieldValueForbidden",
                            "Forbidden: no new finalizers can be added if the object is being deleted, "
                            f"found new finalizers {json.dumps(sorted(added))}",
                            "metadata.finalizers",
                        )
                    ],
                    group=rtype.group,
                )
        if bump and rtype.uses_generation and _spec_of(new, rtype) != _spec_of(old, rtype):
            meta["generation"] = int(old_meta.get("generation", 0)) + 1

    def delete(
        self,
        rtype: resources.ResourceType,
        namespace: str,
        name: str,
        *,
        propagation: str = "Background",
        uid: str | None = None,
        resource_version: str | None = None,
        dry_run: bool = False,
    ) -> tuple[watching.Entry, bool]:
        """Delete (or start deleting): returns the object and whether it is gone already."""
        current = self.get(rtype, namespace, name)
        meta = current.obj["metadata"]
        if uid and uid != meta["uid"]:
            raise errors.conflict(
                rtype.plural,
                name,
                group=rtype.group,
                why=f"Precondition failed: UID in precondition: {uid}, UID in object meta: {meta['uid']}",
            )
        if resource_version and resource_version != meta["resourceVersion"]:
            raise errors.conflict(
                rtype.plural,
                name,
                group=rtype.group,
                why=f"Precondition failed: ResourceVersion in precondition: {resource_version}, "
                f"ResourceVersion in object meta: {meta['resourceVersion']}",
            )
        if dry_run:
            return current, False
        entry, gone = collecting.delete(self, rtype, current, propagation=propagation)
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

    def _write(
        self, rtype: resources.ResourceType, obj: dict[str, Any], kind: str, old: watching.Entry | None
    ) -> watching.Entry:
        meta = obj["metadata"]
        rv = self.next_rv()
        meta["resourceVersion"] = str(rv)
        entry = watching.Entry(obj)
        okey = (meta.get("namespace", ""), meta["name"])
        self._objects[rtype.key][okey] = entry
        self._index(rtype.key, okey, old.obj if old else None, obj)
        self.history.record(watching.Event(rv, kind, rtype.key, entry, old))
        collecting.after_write(self, rtype, entry, old)
        if old is not None:
            old.compact()
        return entry

    def write(
        self, rtype: resources.ResourceType, obj: dict[str, Any], old: watching.Entry
    ) -> watching.Entry:
        """A controller's update of an existing object (no admission, no generation bump)."""
        if _finalized(rtype, obj):
            return self._remove(rtype, old, final=obj)
        return self._write(rtype, obj, "MODIFIED", old)

    def _remove(
        self, rtype: resources.ResourceType, current: watching.Entry, *, final: dict[str, Any] | None = None
    ) -> watching.Entry:
        obj = final if final is not None else objects.copy_obj(current)
        meta = obj["metadata"]
        rv = self.next_rv()
        meta["resourceVersion"] = str(rv)
        entry = watching.Entry(obj)
        okey = (meta.get("namespace", ""), meta["name"])
        self._objects[rtype.key].pop(okey, None)
        self._index(rtype.key, okey, current.obj, None)
        self.history.record(watching.Event(rv, "DELETED", rtype.key, entry, current))
        collecting.after_remove(self, rtype, entry)
        current.compact()
        return entry

    def remove(self, rtype: resources.ResourceType, current: watching.Entry) -> watching.Entry:
        return self._remove(rtype, current)

    def _index(
        self,
        key: watching.ResourceKey,
        okey: ObjectKey,
        old: dict[str, Any] | None,
        new: dict[str, Any] | None,
    ) -> None:
        where = (key, okey)
        old_owners = _owner_uids(old)
        new_owners = _owner_uids(new)
        for uid in old_owners - new_owners:
            deps = self._dependents.get(uid)
            if deps is not None:
                deps.discard(where)
                if not deps:
                    del self._dependents[uid]
        for uid in new_owners - old_owners:
            self._dependents.setdefault(uid, set()).add(where)
        if new is None and old is not None:
            self._uids.pop(old["metadata"]["uid"], None)
        elif new is not None:
            self._uids[new["metadata"]["uid"]] = where


def _finalized(rtype: resources.ResourceType, obj: dict[str, Any]) -> bool:
    """Deleted and nothing left to wait for (a namespace also waits for its spec.finalizers)."""
    meta = obj["metadata"]
    if not meta.get("deletionTimestamp") or meta.get("finalizers"):
        return False
    return not (rtype.key == objects.NAMESPACES and (obj.get("spec") or {}).get("finalizers"))


def _owner_uids(obj: dict[str, Any] | None) -> set[str]:
    if obj is None:
        return set()
    return {
        ref["uid"]
        for ref in obj["metadata"].get("ownerReferences") or []
        if isinstance(ref, dict) and "uid" in ref
    }


def _spec_of(obj: dict[str, Any], rtype: resources.ResourceType) -> dict[str, Any]:
    """What generation tracks: everything but metadata (and status when it is a subresource)."""
    skip = {"metadata", "status"} if rtype.has_status else {"metadata"}
    return {k: v for k, v in obj.items() if k not in skip}
