"""The metadata the apiserver maintains on writes: names, uid, timestamps, generation, preconditions.

Owns what the real server does to ``metadata`` on create (generateName, server-owned fields
dropped, uid, creationTimestamp, generation 1), on update (name and namespace must match the URL,
resourceVersion and uid preconditions are 409 Conflict, server-owned fields are kept, no new
finalizers once deleting, generation bumps when the spec changes; a patch's uid is a field, not a
precondition: immutable, 422) and on delete (uid and
resourceVersion preconditions; the namespaces the cluster needs are never deleted), and when a
deleted object is finalized. Used by ``store``.
Pure: mutates only the objects it is given and raises ``errors.ApiError``.
"""

from __future__ import annotations

import datetime
import json
import random
import uuid
from typing import Any

from sandbox.kubeapi import errors, options
from sandbox.kubeapi.apply import fieldsets, managedfields
from sandbox.kubeapi.kinds import resources
from sandbox.kubeapi.state import objects

_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
#: Set by the server only: a client's values are dropped on create and replaced on update.
_SERVER_OWNED = ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion", "selfLink")
_KEPT_ON_UPDATE = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "namespace",
    "resourceVersion",
)


def of(body: dict[str, Any]) -> dict[str, Any]:
    """The body's ``metadata`` (created empty when absent); 400 when it is not an object."""
    meta = body.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise errors.bad_request("metadata must be an object")
    return meta


def namespace_mismatch() -> errors.ApiError:
    return errors.bad_request(
        "the namespace of the provided object does not match the namespace sent on the request"
    )


def name_new(rtype: resources.ResourceType, meta: dict[str, Any]) -> None:
    """Generate the name from ``generateName`` when there is none; 422 when neither is given."""
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = meta["generateName"] + "".join(random.choices(_GENERATE_ALPHABET, k=5))
    if not meta.get("name"):
        cause = errors.Cause(
            "FieldValueRequired", "Required value: name or generateName is required", "metadata.name"
        )
        raise errors.invalid(rtype.kind, "", [cause], group=rtype.group)


def stamp_new(rtype: resources.ResourceType, meta: dict[str, Any]) -> None:
    """Drop what only the server sets; set uid, creationTimestamp and generation."""
    for server_owned in _SERVER_OWNED:
        meta.pop(server_owned, None)
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = objects.now()
    if rtype.uses_generation:
        meta["generation"] = 1
    else:
        meta.pop("generation", None)


def name_put(meta: dict[str, Any], name: str) -> None:
    """A PUT body's name must be the URL's (or absent: the URL's is taken)."""
    if meta.get("name") and meta["name"] != name:
        raise errors.bad_request(
            f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
        )
    meta["name"] = name


def check_put(
    rtype: resources.ResourceType, namespace: str, meta: dict[str, Any], current: dict[str, Any]
) -> None:
    """The namespace must match the URL; resourceVersion and uid, when given, the current object's."""
    if rtype.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
        raise namespace_mismatch()
    have = current["metadata"]
    if meta.get("resourceVersion") and meta["resourceVersion"] != have["resourceVersion"]:
        raise errors.conflict(rtype.plural, meta["name"], group=rtype.group)
    if meta.get("uid") and meta["uid"] != have["uid"]:
        raise _uid_conflict(rtype, meta["name"], meta["uid"], have["uid"])


#: What the NamespaceLifecycle admission plugin keeps: the namespaces a cluster is made with.
IMMORTAL_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})


def check_delete(rtype: resources.ResourceType, meta: dict[str, Any], deletion: options.Deletion) -> None:
    """DeleteOptions preconditions against the current object's ``meta``."""
    if rtype.key == objects.NAMESPACES and meta["name"] in IMMORTAL_NAMESPACES:
        raise errors.forbidden("namespaces", meta["name"], "this namespace may not be deleted")
    uid, resource_version = deletion.uid, deletion.resource_version
    if uid and uid != meta["uid"]:
        raise _uid_conflict(rtype, meta["name"], uid, meta["uid"])
    if resource_version and resource_version != meta["resourceVersion"]:
        raise errors.conflict(
            rtype.plural,
            meta["name"],
            group=rtype.group,
            why=f"Precondition failed: ResourceVersion in precondition: {resource_version}, "
            f"ResourceVersion in object meta: {meta['resourceVersion']}",
        )


def check_patched(rtype: resources.ResourceType, name: str, meta: Any, live: dict[str, Any] | None) -> None:
    """A patch's result (an apply's config) against the object it patches, in the real server's
    order: its resourceVersion, when given, is a precondition (409); its uid is a field, not a
    precondition: another object's is 422 (uid is immutable); an apply naming one when there is
    no object is 409 (it would create an object of another uid)."""
    meta = meta if isinstance(meta, dict) else {}
    given = meta.get("uid")
    if live is None:
        if given:
            why = f"uid mismatch: the provided object specified uid {given}, and no existing object was found"
            raise errors.conflict(rtype.plural, name, group=rtype.group, why=why)
        return
    have = live["metadata"]
    if meta.get("resourceVersion") and meta["resourceVersion"] != have["resourceVersion"]:
        raise errors.conflict(rtype.plural, name, group=rtype.group)
    if given and given != have["uid"]:
        message = f'Invalid value: "{given}": field is immutable'
        cause = errors.Cause("FieldValueInvalid", message, "metadata.uid")
        raise errors.invalid(rtype.kind, name, [cause], group=rtype.group)


def _uid_conflict(rtype: resources.ResourceType, name: str, given: str, actual: str) -> errors.ApiError:
    return errors.conflict(
        rtype.plural,
        name,
        group=rtype.group,
        why=f"Precondition failed: UID in precondition: {given}, UID in object meta: {actual}",
    )


def keep_server_fields(
    rtype: resources.ResourceType, old: dict[str, Any], new: dict[str, Any], *, bump: bool
) -> None:
    """Carry the server's fields from ``old`` to ``new``; with ``bump``, a new spec bumps generation."""
    meta, old_meta = new["metadata"], old["metadata"]
    for field in _KEPT_ON_UPDATE:
        if field in old_meta:
            meta[field] = old_meta[field]
        else:
            meta.pop(field, None)
    meta.pop("selfLink", None)
    if old_meta.get("deletionTimestamp"):
        _no_new_finalizers(rtype, old_meta, meta)
    if bump and rtype.uses_generation and _spec_of(new, rtype) != _spec_of(old, rtype):
        meta["generation"] = int(old_meta.get("generation", 0)) + 1


def _no_new_finalizers(rtype: resources.ResourceType, old_meta: dict[str, Any], meta: dict[str, Any]) -> None:
    added = set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
    if added:
        cause = errors.Cause(
            "FieldValueForbidden",
            "Forbidden: no new finalizers can be added if the object is being deleted, "
            f"found new finalizers {json.dumps(sorted(added))}",
            "metadata.finalizers",
        )
        raise errors.invalid(rtype.kind, meta["name"], [cause], group=rtype.group)


def finalized(rtype: resources.ResourceType, obj: dict[str, Any]) -> bool:
    """Deleted and nothing left to wait for (a namespace also waits for its spec.finalizers)."""
    meta = obj["metadata"]
    if not meta.get("deletionTimestamp") or meta.get("finalizers"):
        return False
    return not (rtype.key == objects.NAMESPACES and (obj.get("spec") or {}).get("finalizers"))


def _spec_of(obj: dict[str, Any], rtype: resources.ResourceType) -> dict[str, Any]:
    """What generation tracks: everything but metadata (and status when it is a subresource)."""
    skip = {"metadata", "status"} if rtype.has_status else {"metadata"}
    return {k: v for k, v in obj.items() if k not in skip}


def manage(
    rtype: resources.ResourceType,
    old: dict[str, Any] | None,
    new: dict[str, Any],
    given: Any,
    *,
    write: options.Write,
    version: str,
    subresource: str = "",
) -> None:
    """Set ``new``'s managedFields: an Apply's (``given``), the client's own when it changed them
    (an empty entry resets them; one entry the real server could not read leaves them as they
    were), else the old ones with ``write.manager``'s Update recorded."""
    current = (old or {}).get("metadata", {}).get("managedFields")
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    taken = given is not None and fieldsets.readable(given) and not fieldsets.same(given, current)
    if write.operation == "Apply" or taken:
        managed = fieldsets.encode(fieldsets.decode(given))
    else:
        schema = managedfields.with_meta(rtype.schemas.get(version) or {})
        managed = managedfields.updated(
            old, new, current, manager=write.manager, schema=schema,
            api_version=rtype.api_version(version), now=now, subresource=subresource,
        )  # fmt: skip
    if managed:
        new["metadata"]["managedFields"] = managed
    else:
        new["metadata"].pop("managedFields", None)
