"""Kubernetes protobuf request bodies of the built-in kinds kubectl creates imperatively.

``kubectl create namespace|secret|configmap`` (typed client-go clients) send
``application/vnd.kubernetes.protobuf`` and never fall back to JSON, so the emulator decodes the
``k8s\\x00`` envelope (runtime.Unknown) and the generated messages of Namespace, Secret,
ConfigMap, Lease and SelfSubjectAccessReview (``kubectl auth can-i``) into the JSON form it
stores. Responses are always JSON (clients list it in Accept). Other kinds answer 415. Pure: a
small protobuf wire-format reader and field tables.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

from sandbox.kubeapi import errors

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

# A field is (json name, kind); kind is a scalar name, ("msg", fields), ("map", kind) or ("list", kind).
Fields = dict[int, tuple[str, Any]]

_TIME: Fields = {1: ("seconds", "int"), 2: ("nanos", "int")}
_OWNER_REF: Fields = {
    1: ("kind", "str"),
    3: ("name", "str"),
    4: ("uid", "str"),
    5: ("apiVersion", "str"),
    6: ("controller", "bool"),
    7: ("blockOwnerDeletion", "bool"),
}
_OBJECT_META: Fields = {
    1: ("name", "str"),
    2: ("generateName", "str"),
    3: ("namespace", "str"),
    5: ("uid", "str"),
    6: ("resourceVersion", "str"),
    7: ("generation", "int"),
    10: ("deletionGracePeriodSeconds", "int"),
    11: ("labels", ("map", "str")),
    12: ("annotations", ("map", "str")),
    13: ("ownerReferences", ("list", ("msg", _OWNER_REF))),
    14: ("finalizers", ("list", "str")),
}
_LEASE_SPEC: Fields = {
    1: ("holderIdentity", "str"),
    2: ("leaseDurationSeconds", "int"),
    3: ("acquireTime", "microtime"),
    4: ("renewTime", "microtime"),
    5: ("leaseTransitions", "int"),
    6: ("strategy", "str"),
    7: ("preferredHolder", "str"),
}

_RESOURCE_ATTRIBUTES: Fields = {
    1: ("namespace", "str"),
    2: ("verb", "str"),
    3: ("group", "str"),
    4: ("version", "str"),
    5: ("resource", "str"),
    6: ("subresource", "str"),
    7: ("name", "str"),
}
_REVIEW_SPEC: Fields = {
    1: ("resourceAttributes", ("msg", _RESOURCE_ATTRIBUTES)),
    2: ("nonResourceAttributes", ("msg", {1: ("path", "str"), 2: ("verb", "str")})),
}

KINDS: dict[str, Fields] = {
    "Namespace": {
        1: ("metadata", ("msg", _OBJECT_META)),
        2: ("spec", ("msg", {1: ("finalizers", ("list", "str"))})),
    },
    "Secret": {
        1: ("metadata", ("msg", _OBJECT_META)),
        2: ("data", ("map", "bytes")),
        3: ("type", "str"),
        4: ("stringData", ("map", "str")),
        5: ("immutable", "bool"),
    },
    "ConfigMap": {
        1: ("metadata", ("msg", _OBJECT_META)),
        2: ("data", ("map", "str")),
        3: ("binaryData", ("map", "bytes")),
        4: ("immutable", "bool"),
    },
    "Lease": {1: ("metadata", ("msg", _OBJECT_META)), 2: ("spec", ("msg", _LEASE_SPEC))},
    # `kubectl auth can-i`
    "SelfSubjectAccessReview": {1: ("metadata", ("msg", _OBJECT_META)), 2: ("spec", ("msg", _REVIEW_SPEC))},
}


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def varint(self) -> int:
        result = shift = 0
        while True:
            if self.pos >= len(self.data):
                raise ValueError("truncated varint")
            byte = self.data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7

    def fields(self) -> list[tuple[int, int, Any]]:
        """(field number, wire type, value): ints for varints and fixed, bytes for length-delimited."""
        out: list[tuple[int, int, Any]] = []
        while self.pos < len(self.data):
            key = self.varint()
            number, wire = key >> 3, key & 7
            if wire == 0:
                out.append((number, wire, self.varint()))
            elif wire == 2:
                size = self.varint()
                if self.pos + size > len(self.data):
                    raise ValueError("truncated field")
                out.append((number, wire, self.data[self.pos : self.pos + size]))
                self.pos += size
            elif wire in (1, 5):
                width = 8 if wire == 1 else 4
                out.append((number, wire, int.from_bytes(self.data[self.pos : self.pos + width], "little")))
                self.pos += width
            else:
                raise ValueError(f"unsupported wire type {wire}")
        return out


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _scalar(kind: str, value: Any) -> Any:
    if kind == "str":
        return bytes(value).decode()
    if kind == "bytes":
        return base64.b64encode(bytes(value)).decode()
    if kind == "int":
        return _signed(value)
    if kind == "bool":
        return bool(value)
    if kind in ("time", "microtime"):
        stamp = _message(bytes(value), _TIME)
        moment = datetime.fromtimestamp(stamp.get("seconds", 0), UTC)
        if kind == "time":
            return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.get('nanos', 0) // 1000:06d}Z"
    raise ValueError(f"unknown kind {kind}")


def _value(kind: Any, value: Any) -> Any:
    if isinstance(kind, tuple) and kind[0] == "msg":
        return _message(bytes(value), kind[1])
    return _scalar(kind, value)


def _message(data: bytes, fields: Fields) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, _, value in _Reader(data).fields():
        if number not in fields:
            continue  # a field we do not model (managedFields, status, ...)
        name, kind = fields[number]
        if isinstance(kind, tuple) and kind[0] == "map":
            entry = {n: v for n, _, v in _Reader(bytes(value)).fields()}
            out.setdefault(name, {})[_scalar("str", entry.get(1, b""))] = _scalar(kind[1], entry.get(2, b""))
        elif isinstance(kind, tuple) and kind[0] == "list":
            out.setdefault(name, []).append(_value(kind[1], value))
        else:
            decoded = _value(kind, value)
            if decoded != "":  # proto2 sends empty optional strings; Go's JSON omits them (omitempty)
                out[name] = decoded
    return out


def decode(raw: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object; 415 for kinds we do not decode, 400 for bad bytes."""
    if not raw.startswith(MAGIC):
        raise errors.bad_request("the protobuf request body lacks the k8s\\x00 envelope prefix")
    try:
        unknown = {n: v for n, _, v in _Reader(raw[len(MAGIC) :]).fields()}
        type_meta = {n: bytes(v).decode() for n, _, v in _Reader(bytes(unknown.get(1, b""))).fields()}
        api_version, kind = type_meta.get(1, ""), type_meta.get(2, "")
        if kind not in KINDS:
            raise errors.unsupported_media_type(
                f"the emulator decodes protobuf only for {', '.join(sorted(KINDS))}; "
                f"send {kind or 'this'} as JSON"
            )
        obj = _message(bytes(unknown.get(2, b"")), KINDS[kind])
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.bad_request(f"the protobuf request body could not be decoded: {exc}") from exc
    return {"apiVersion": api_version, "kind": kind, **obj}
