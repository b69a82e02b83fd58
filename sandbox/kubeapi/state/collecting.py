"""The cluster's background controllers, run synchronously after each write of the store.

Owns what kube-controller-manager and the apiextensions controllers would do in a real cluster:
deletion with finalizers (deletionTimestamp, removal once they are empty), the garbage collector
(ownerReferences: background cascading deletion, ``Orphan`` and ``Foreground`` propagation (the
owner waits for the dependents that block it, ``blockOwnerDeletion``),
dropping the dangling reference of an object that keeps another owner, deleting objects whose
owners are all gone), namespace termination (``Terminating`` until its content is gone), and
CRD establishment and cleanup (serving the resource; deleting its objects before the CRD goes).
Works on a ``store.Store`` through its small internal API, which ``Internals`` names (``write``,
``remove``, ``defer``, ``dependents``, ``locate``...): the store calls this module, never the
other way round; no HTTP.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from sandbox.kubeapi.kinds import resources
from sandbox.kubeapi.state import objects, watching


class Internals(Protocol):
    """What the controllers here use of ``store.Store``."""

    types: dict[watching.ResourceKey, resources.ResourceType]

    def register(self, rtype: resources.ResourceType) -> None: ...
    def unregister(self, key: watching.ResourceKey) -> None: ...
    def objects(self, key: watching.ResourceKey) -> dict[tuple[str, str], watching.Entry]: ...
    def locate(self, uid: str) -> tuple[watching.ResourceKey, watching.Entry] | None: ...
    def dependents(self, uid: str) -> list[tuple[watching.ResourceKey, watching.Entry]]: ...
    def defer(self, work: Callable[[], None]) -> None: ...
    def write(
        self, rtype: resources.ResourceType, obj: dict[str, Any], old: watching.Entry
    ) -> watching.Entry: ...
    def remove(self, rtype: resources.ResourceType, current: watching.Entry) -> watching.Entry: ...


def crd_defaults(crd: dict[str, Any], *, finalizer: str | None) -> None:
    """What the apiextensions controllers write on a CRD: cleanup finalizer and Established status."""
    if finalizer is not None:
        finalizers = crd["metadata"].setdefault("finalizers", [])
        if finalizer not in finalizers:
            finalizers.append(finalizer)
    spec = crd["spec"]
    names = dict(spec["names"])
    names.setdefault("singular", names["kind"].lower())
    names.setdefault("listKind", f"{names['kind']}List")
    conditions = (crd.get("status") or {}).get("conditions") or [{}]
    stamp = conditions[0].get("lastTransitionTime") or objects.now()
    crd["status"] = {
        "acceptedNames": names,
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "reason": "NoConflicts",
                "message": "no conflicts found",
                "lastTransitionTime": stamp,
            },
            {
                "type": "Established",
                "status": "True",
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
                "lastTransitionTime": stamp,
            },
        ],
        "storedVersions": [v["name"] for v in spec["versions"] if v.get("storage")],
    }


def delete(
    store: Internals, rtype: resources.ResourceType, current: watching.Entry, *, propagation: str
) -> tuple[watching.Entry, bool]:
    """Start or finish deleting ``current``; returns the object and whether it is gone."""
    meta = current.obj["metadata"]
    if rtype.key == objects.NAMESPACES:
        return _delete_namespace(store, rtype, current), False
    if propagation == "Orphan":
        _orphan(store, meta["uid"])
    finalizers = list(meta.get("finalizers") or [])
    if propagation == "Foreground" and objects.FOREGROUND not in finalizers:
        # Added whatever the dependents: the collector removes it once none blocks the owner.
        finalizers.append(objects.FOREGROUND)
    if not finalizers:
        return store.remove(rtype, current), True
    if objects.terminating(current) and finalizers == (meta.get("finalizers") or []):
        return current, False
    new = objects.copy_obj(current)
    new_meta = new["metadata"]
    if not new_meta.get("deletionTimestamp"):
        new_meta["deletionTimestamp"] = objects.now()
        new_meta["deletionGracePeriodSeconds"] = 0
        if new_meta.get("generation"):  # as rest.BeforeDelete does for graceful deletion
            new_meta["generation"] = int(new_meta["generation"]) + 1
    new_meta["finalizers"] = finalizers
    entry = store.write(rtype, new, current)
    uid, name = meta["uid"], meta["name"]
    if objects.FOREGROUND in finalizers:
        store.defer(lambda: _delete_dependents(store, uid))
        store.defer(lambda: _finish_foreground(store, uid))
    if rtype.key == objects.CRDS:
        store.defer(lambda: _finish_crd(store, name))
    return entry, False


def _delete_namespace(
    store: Internals, rtype: resources.ResourceType, current: watching.Entry
) -> watching.Entry:
    if objects.terminating(current):
        return current
    new = objects.copy_obj(current)
    new["metadata"]["deletionTimestamp"] = objects.now()
    new["metadata"]["deletionGracePeriodSeconds"] = 0
    new.setdefault("status", {})["phase"] = "Terminating"
    entry = store.write(rtype, new, current)
    name = new["metadata"]["name"]
    store.defer(lambda: _finish_namespace(store, name))
    return entry


def _in_namespace(store: Internals, name: str) -> list[tuple[resources.ResourceType, watching.Entry]]:
    found = []
    for key, rtype in list(store.types.items()):
        if rtype.namespaced:
            found += [(rtype, e) for (ns, _), e in store.objects(key).items() if ns == name]
    return found


def _finish_namespace(store: Internals, name: str) -> None:
    """The namespace controller: delete the content of a Terminating namespace, then the namespace."""
    ns = store.objects(objects.NAMESPACES).get(("", name))
    if ns is None or not objects.terminating(ns):
        return
    for rtype, entry in _in_namespace(store, name):
        if not objects.terminating(entry):
            delete(store, rtype, entry, propagation="Background")
    if _in_namespace(store, name):
        return  # objects with finalizers: the removal of each one calls us again
    ns = store.objects(objects.NAMESPACES)[("", name)]
    final = objects.copy_obj(ns)
    final.setdefault("spec", {})["finalizers"] = []
    store.write(store.types[objects.NAMESPACES], final, ns)


def _finish_crd(store: Internals, crd_name: str) -> None:
    """The CRD cleanup controller: delete every object of a deleted CRD, then drop its finalizer."""
    crd = store.objects(objects.CRDS).get(("", crd_name))
    if crd is None or not objects.terminating(crd):
        return
    spec = crd.obj["spec"]
    key = (spec["group"], spec["names"]["plural"])
    rtype = store.types.get(key)
    if rtype is not None:
        for entry in list(store.objects(key).values()):
            if not objects.terminating(entry):
                delete(store, rtype, entry, propagation="Background")
        if store.objects(key):
            return
    crd = store.objects(objects.CRDS)[("", crd_name)]
    final = objects.copy_obj(crd)
    final["metadata"]["finalizers"] = [
        f for f in final["metadata"].get("finalizers", []) if f != objects.CRD_FINALIZER
    ]
    if final["metadata"]["finalizers"] != crd.obj["metadata"].get("finalizers"):
        store.write(store.types[objects.CRDS], final, crd)


def _without_owner(entry: watching.Entry, uid: str) -> dict[str, Any]:
    new = objects.copy_obj(entry)
    refs = [r for r in new["metadata"].get("ownerReferences", []) if r.get("uid") != uid]
    if refs:
        new["metadata"]["ownerReferences"] = refs
    else:
        new["metadata"].pop("ownerReferences", None)
    return new


def _orphan(store: Internals, uid: str) -> None:
    for key, entry in store.dependents(uid):
        store.write(store.types[key], _without_owner(entry, uid), entry)


def _delete_dependents(store: Internals, uid: str) -> None:
    for key, entry in store.dependents(uid):
        if key in store.types and not objects.terminating(entry):
            delete(store, store.types[key], entry, propagation="Background")


def _collect(store: Internals, uid: str) -> None:
    """The garbage collector, once owner ``uid`` is gone."""
    for key, entry in store.dependents(uid):
        rtype = store.types.get(key)
        if rtype is None:
            continue
        others = [r for r in entry.obj["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
        if any(store.locate(r.get("uid", "")) is not None for r in others):
            store.write(rtype, _without_owner(entry, uid), entry)
        elif not objects.terminating(entry):
            delete(store, rtype, entry, propagation="Background")


def _finish_foreground(store: Internals, owner_uid: str) -> None:
    found = store.locate(owner_uid)
    if found is None:
        return
    key, owner = found
    if objects.FOREGROUND not in (owner.obj["metadata"].get("finalizers") or []) or _blocking(
        store, owner_uid
    ):
        return
    new = objects.copy_obj(owner)
    new["metadata"]["finalizers"] = [f for f in new["metadata"]["finalizers"] if f != objects.FOREGROUND]
    store.write(store.types[key], new, owner)


def _blocking(store: Internals, owner_uid: str) -> bool:
    """Whether a dependent still blocks its owner's foreground deletion: only a reference with
    ``blockOwnerDeletion`` does; the others are deleted too, but the owner need not wait."""
    return any(
        r.get("uid") == owner_uid and r.get("blockOwnerDeletion")
        for _, entry in store.dependents(owner_uid)
        for r in entry.obj["metadata"].get("ownerReferences") or []
    )


def _collect_if_orphaned(store: Internals, uid: str) -> None:
    """An object created (or re-owned) with owners that are all absent is garbage, as the GC finds."""
    found = store.locate(uid)
    if found is None:
        return
    key, entry = found
    refs = entry.obj["metadata"].get("ownerReferences") or []
    if refs and not objects.terminating(entry) and all(store.locate(r.get("uid", "")) is None for r in refs):
        delete(store, store.types[key], entry, propagation="Background")


def after_write(
    store: Internals, rtype: resources.ResourceType, entry: watching.Entry, old: watching.Entry | None
) -> None:
    meta = entry.obj["metadata"]
    if rtype.key == objects.CRDS and not meta.get("deletionTimestamp"):
        store.register(resources.from_crd(entry.obj))
    refs = meta.get("ownerReferences") or []
    if refs and (old is None or old.obj["metadata"].get("ownerReferences") != refs):
        uid = meta["uid"]
        store.defer(lambda: _collect_if_orphaned(store, uid))


def after_remove(store: Internals, rtype: resources.ResourceType, entry: watching.Entry) -> None:
    meta = entry.obj["metadata"]
    uid = meta["uid"]
    store.defer(lambda: _collect(store, uid))
    for owner_uid in {r.get("uid", "") for r in meta.get("ownerReferences") or []}:
        store.defer(lambda owner_uid=owner_uid: _finish_foreground(store, owner_uid))  # type: ignore[misc]
    if rtype.namespaced:
        namespace = meta.get("namespace", "")
        store.defer(lambda: _finish_namespace(store, namespace))
    if rtype.crd_name:
        crd_name = rtype.crd_name
        store.defer(lambda: _finish_crd(store, crd_name))
    if rtype.key == objects.CRDS:
        spec = entry.obj["spec"]
        store.unregister((spec["group"], spec["names"]["plural"]))
