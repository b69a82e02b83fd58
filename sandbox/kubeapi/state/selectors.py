"""Label and field selectors: parse the query-string syntax, match objects.

Owns the grammar of ``labelSelector`` (``=``, ``==``, ``!=``, ``in``, ``notin``, ``key``,
``!key``, and the numeric ``>``/``<``) and ``fieldSelector`` (``=``, ``==``, ``!=`` on the
fields a resource declares; ``metadata.name`` and ``metadata.namespace`` everywhere), with the
validation errors the real apiserver answers (400 BadRequest). Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sandbox.kubeapi import errors

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY_RE = re.compile(rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_NAME}$")
_VALUE_RE = re.compile(rf"^({_NAME})?$")
_TOKEN_RE = re.compile(r"\s*(\(|\)|,|!=|==|=|!|>|<|[^\s(),!=<>]+)")


@dataclass(frozen=True)
class Requirement:
    """One label requirement; ``op`` is one of ``in notin exists !exists gt lt``."""

    key: str
    op: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op == "in":
            return present and labels[self.key] in self.values
        if self.op == "notin":
            return not present or labels[self.key] not in self.values
        if not present:
            return False
        try:
            have, want = int(labels[self.key]), int(next(iter(self.values)))
        except ValueError:
            return False
        return have > want if self.op == "gt" else have < want


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(req.matches(labels) for req in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def _fail(selector: str, why: str) -> errors.ApiError:
    return errors.bad_request(f'unable to parse requirement: {why} (in selector "{selector}")')


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _TOKEN_RE.match(text, pos)
        if match is None:  # pragma: no cover - the pattern matches any non-space character
            raise _fail(text, f"unexpected character at {pos}")
        out.append(match.group(1))
        pos = match.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


def _check_key(selector: str, key: str) -> str:
    if not _KEY_RE.fullmatch(key) or len(key) > 316:
        raise _fail(
            selector, f'key: Invalid value: "{key}": name part must consist of alphanumeric characters'
        )
    return key


def _check_value(selector: str, value: str) -> str:
    if not _VALUE_RE.fullmatch(value):
        raise _fail(
            selector,
            f'values[0]: Invalid value: "{value}": a valid label must be an empty string or '
            "consist of alphanumeric characters, '-', '_' or '.'",
        )
    return value


def parse_labels(selector: str) -> LabelSelector:
    """Parse a ``labelSelector`` query value; raises ApiError 400 on bad syntax."""
    tokens = _tokens(selector)
    reqs: list[Requirement] = []
    i = 0

    def take() -> str:
        nonlocal i
        if i >= len(tokens):
            raise _fail(selector, "unexpected end of selector")
        i += 1
        return tokens[i - 1]

    while tokens:
        token = take()
        if token == "!":
            reqs.append(Requirement(_check_key(selector, take()), "!exists"))
        else:
            key = _check_key(selector, token)
            if i >= len(tokens) or tokens[i] == ",":
                reqs.append(Requirement(key, "exists"))
            else:
                op = take()
                if op in ("=", "==", "!=") and (i >= len(tokens) or tokens[i] == ","):
                    reqs.append(
                        Requirement(key, "in" if op != "!=" else "notin", frozenset([""]))
                    )  # key= is key==""
                else:
                    reqs.append(_operation(selector, key, op, take))
        if i == len(tokens):
            break
        if take() != ",":
            raise _fail(selector, f"found '{tokens[i - 1]}', expected: ',' or 'end of string'")
        if i == len(tokens):
            raise _fail(selector, "found 'end of string', expected: identifier")
    return LabelSelector(tuple(reqs))


def _operation(selector: str, key: str, op: str, take: Callable[[], str]) -> Requirement:
    if op in ("=", "=="):
        return Requirement(key, "in", frozenset([_check_value(selector, _value(selector, take()))]))
    if op == "!=":
        return Requirement(key, "notin", frozenset([_check_value(selector, _value(selector, take()))]))
    if op in (">", "<"):
        value = take()
        if not re.fullmatch(r"-?\d+", value):
            raise _fail(selector, f"for 'Gt', 'Lt' operators, the value must be an integer, got {value!r}")
        return Requirement(key, "gt" if op == ">" else "lt", frozenset([value]))
    if op in ("in", "notin"):
        if take() != "(":
            raise _fail(selector, "found identifier, expected: '('")
        values: set[str] = set()
        while True:
            token = take()
            if token == ")":
                break
            if token == ",":
                continue
            values.add(_check_value(selector, token))
        return Requirement(key, op, frozenset(values))
    raise _fail(selector, f"found '{op}', expected: in, notin, =, ==, !=, gt, lt")


def _value(selector: str, token: str) -> str:
    if token in (",", "(", ")", "!", "=", "==", "!="):
        raise _fail(selector, f"found '{token}', expected: identifier")
    return token


# Field selectors ----------------------------------------------------------------------------

_FIELD_RE = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*(==|!=|=)\s*(.*?)\s*$")


@dataclass(frozen=True)
class FieldRequirement:
    path: tuple[str, ...]
    value: str
    negate: bool

    def matches(self, obj: Mapping[str, Any]) -> bool:
        current: Any = obj
        for part in self.path:
            current = current.get(part) if isinstance(current, Mapping) else None
        text = (
            "" if current is None else (str(current).lower() if isinstance(current, bool) else str(current))
        )
        return (text == self.value) != self.negate


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(req.matches(obj) for req in self.requirements)

    def exact_name(self) -> str | None:
        """The name when the selector pins ``metadata.name=x`` (a fast path for the store)."""
        for req in self.requirements:
            if req.path == ("metadata", "name") and not req.negate:
                return req.value
        return None


def parse_fields(selector: str, *, supported: frozenset[str]) -> FieldSelector:
    """Parse a ``fieldSelector``; ``supported`` lists the dotted fields the resource allows."""
    reqs: list[FieldRequirement] = []
    for part in (p for p in selector.split(",") if p.strip()):
        match = _FIELD_RE.match(part)
        if match is None:
            raise errors.bad_request(f"invalid selector: '{selector}'; can't understand '{part}'")
        field_name, op, value = match.groups()
        if field_name not in supported and field_name not in ("metadata.name", "metadata.namespace"):
            raise errors.bad_request(f"field label not supported: {field_name}")
        reqs.append(FieldRequirement(tuple(field_name.split(".")), value, op == "!="))
    return FieldSelector(tuple(reqs))
