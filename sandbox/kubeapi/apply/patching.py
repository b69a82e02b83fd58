"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902, as kube-apiserver applies it) on plain
JSON values.

Owns the patch algorithms the PATCH verb applies; the handler picks one by Content-Type.
Strategic merge patch is answered with the merge-patch algorithm (documented deviation: lists
are replaced, not merged by key, and ``$patch`` directives are not interpreted). Pure: inputs
are never mutated; errors are ``PatchError`` (the server answers them 422/400).
"""

from __future__ import annotations

import copy
import json
from typing import Any


class PatchError(ValueError):
    """The patch document is malformed or cannot be applied to the target."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def parse_pointer(pointer: Any) -> list[str]:
    """RFC 6901 pointer → reference tokens. The whole document (``""``) is no target here: the
    real server applies an operation only below the root."""
    if not isinstance(pointer, str) or not pointer.startswith("/"):
        raise PatchError(f"invalid JSON pointer {pointer!r}: must start with '/'")
    return [_unescape(token) for token in pointer[1:].split("/")]


def _atoi(token: str) -> int:
    """Go's strconv.Atoi: an optional sign, then decimal digits (leading zeros allowed)."""
    digits = token[1:] if token[:1] in ("+", "-") else token
    if not digits.isascii() or not digits.isdigit():
        raise PatchError(f"invalid array index {token!r}")
    return int(token)


def _index(container: list[Any], token: str, *, for_add: bool) -> int:
    """An index into ``container``: negative ones count from the end, ``-`` is the end for add."""
    size = len(container) + (1 if for_add else 0)
    if for_add and token == "-":
        return len(container)
    index = _atoi(token)
    if index < 0:
        index += size
    if not 0 <= index < size:
        raise PatchError(f"array index {token} out of bounds")
    return index


def _parent(doc: Any, tokens: list[str]) -> Any:
    current = doc
    for token in tokens[:-1]:
        if isinstance(current, dict) and token in current:
            current = current[token]
        elif isinstance(current, list):
            current = current[_index(current, token, for_add=False)]
        else:
            raise PatchError(f"path not found: {token!r}")
    if not isinstance(current, dict | list):
        raise PatchError(f"path not found: {tokens[-1]!r} is below a scalar")
    return current


def _get(parent: dict[str, Any] | list[Any], last: str) -> Any:
    """The value at ``last`` of ``parent``: a missing member reads as null (an index must exist)."""
    if isinstance(parent, dict):
        return parent.get(last)
    return parent[_index(parent, last, for_add=False)]


def _add(doc: Any, tokens: list[str], value: Any) -> None:
    parent = _parent(doc, tokens)
    if isinstance(parent, dict):
        parent[tokens[-1]] = value
    else:
        parent.insert(_index(parent, tokens[-1], for_add=True), value)


def _remove(doc: Any, tokens: list[str]) -> Any:
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"unable to remove nonexistent key: {last}")
        return parent.pop(last)
    return parent.pop(_index(parent, last, for_add=False))


def _replace(doc: Any, tokens: list[str], value: Any) -> None:
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value  # a missing member is set: the real server does not check
    else:
        parent[_index(parent, last, for_add=False)] = value


def _test(doc: Any, tokens: list[str], value: Any) -> None:
    found = _get(_parent(doc, tokens), tokens[-1])
    if _canonical(found) != _canonical(value):
        raise PatchError(f"testing value /{'/'.join(tokens)} failed")


def _canonical(value: Any) -> str:
    # JSON as text: true is not 1, 1 is not 1.0; object members in any order.
    return json.dumps(value, sort_keys=True)


def _operation(doc: Any, op: Any) -> None:
    if not isinstance(op, dict) or op.get("op") not in _KINDS:
        raise PatchError(f"unexpected kind of operation: {op!r}")
    kind, path = op["op"], parse_pointer(op.get("path"))
    value = copy.deepcopy(op.get("value"))  # a missing value is null, as the real server takes it
    if kind == "add":
        _add(doc, path, value)
    elif kind == "remove":
        _remove(doc, path)
    elif kind == "replace":
        _replace(doc, path, value)
    elif kind == "test":
        _test(doc, path, value)
    else:
        source = parse_pointer(op.get("from"))
        if kind == "move":
            _add(doc, path, _remove(doc, source))
        else:  # copy: a missing member copies as null
            _add(doc, path, copy.deepcopy(_get(_parent(doc, source), source[-1])))


_KINDS = frozenset({"add", "remove", "replace", "move", "copy", "test"})


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 as kube-apiserver applies it: operations in order, atomically (the input is never
    mutated). Laxer than the RFC where the real server is: a missing ``value`` is null, replace
    sets a missing object member, copy from a missing member copies null, array indices take a
    sign and leading zeros (negative ones count from the end)."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        _operation(doc, op)
    return doc
