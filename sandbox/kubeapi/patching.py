"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902) on plain JSON values.

Owns the patch algorithms the PATCH verb applies; the handler picks one by Content-Type.
Strategic merge patch is answered with the merge-patch algorithm (documented deviation: lists
are replaced, not merged by key, and ``$patch`` directives are not interpreted). Pure: inputs
are never mutated; errors are ``PatchError`` (the server answers them 422/400).
"""

from __future__ import annotations

import copy
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


def parse_pointer(pointer: str) -> list[str]:
    """RFC 6901 pointer → reference tokens; ``""`` is the whole document."""
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f"invalid JSON pointer {pointer!r}: must start with '/'")
    return [_unescape(token) for token in pointer[1:].split("/")]


def _index(container: list[Any], token: str, *, for_add: bool) -> int:
    if for_add and token == "-":
        return len(container)
    if not token.isdigit() or (token.startswith("0") and token != "0"):
        raise PatchError(f"invalid array index {token!r}")
    index = int(token)
    limit = len(container) if for_add else len(container) - 1
    if index > limit:
        raise PatchError(f"array index {index} out of bounds")
    return index


def _parent(doc: Any, tokens: list[str]) -> Any:
    current = doc
    for token in tokens[:-1]:
        if isinstance(current, dict):
            if token not in current:
                raise PatchError(f"path not found: missing key {token!r}")
            current = current[token]
        elif isinstance(current, list):
            current = current[_index(current, token, for_add=False)]
        else:
            raise PatchError(f"path not found: {token!r} is below a scalar")
    return current


def _get(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path not found: missing key {last!r}")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, for_add=False)]
    raise PatchError(f"path not found: {last!r} is below a scalar")


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, for_add=True), value)
    else:
        raise PatchError(f"cannot add below a scalar at {last!r}")
    return doc


def _remove(doc: Any, tokens: list[str]) -> tuple[Any, Any]:
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"unable to remove nonexistent key: {last}")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, for_add=False))
    raise PatchError(f"cannot remove below a scalar at {last!r}")


def _operation(doc: Any, op: Any) -> Any:
    if not isinstance(op, dict) or "op" not in op or "path" not in op:
        raise PatchError(f"invalid operation {op!r}: 'op' and 'path' are required")
    kind, path = op["op"], parse_pointer(op["path"])
    if kind in ("add", "replace", "test") and "value" not in op:
        raise PatchError(f"operation {kind!r} needs a 'value'")
    if kind == "add":
        return _add(doc, path, copy.deepcopy(op["value"]))
    if kind == "remove":
        return _remove(doc, path)[0]
    if kind == "replace":
        doc, _ = _remove(doc, path) if path else (doc, None)
        return _add(doc, path, copy.deepcopy(op["value"]))
    if kind in ("move", "copy"):
        if "from" not in op:
            raise PatchError(f"operation {kind!r} needs a 'from'")
        source = parse_pointer(op["from"])
        if kind == "move":
            if path[: len(source)] == source and path != source:
                raise PatchError("cannot move a value into one of its children")
            doc, value = _remove(doc, source)
        else:
            value = copy.deepcopy(_get(doc, source))
        return _add(doc, path, value)
    if kind == "test":
        if _get(doc, path) != op["value"] or not _same_types(_get(doc, path), op["value"]):
            raise PatchError(f"testing value {op['path']} failed")
        return doc
    raise PatchError(f"unexpected kind of operation: {kind!r}")


def _same_types(a: Any, b: Any) -> bool:
    # JSON has one number type, but true == 1 in Python must not pass a test.
    return isinstance(a, bool) == isinstance(b, bool)


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902: apply ``operations`` in order, atomically (the input is never mutated)."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        doc = _operation(doc, op)
    return doc
