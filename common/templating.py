"""clusterctl's variables: list and substitute ``${VAR}`` / ``${VAR:=default}`` in a YAML text.

Pure; the one substitution helper of the project (the release's components file, the cluster
templates of ``deploy/templates`` and the sandbox that creates clusters from them). It follows
what clusterctl's simple processor does (drone/envsubst after turning ``${ VAR }`` into
``${VAR}``), for the forms a provider's files use:

- ``${VAR}`` — required: substituting without a value for it fails, naming every missing one
  (clusterctl: "value for variables [A, B] is not set");
- ``${VAR:=default}`` and ``${VAR:-default}`` — the default when VAR is unset or empty;
  ``${VAR=default}`` and ``${VAR-default}`` — the default when VAR is unset;
- a default may hold variables itself (``${TARGET:=${NAMESPACE}}``); as in clusterctl, those
  are neither listed nor required, and one without a value there is empty;
- ``$$`` — a literal ``$``.

Anything else envsubst would read as an expression (``$VAR`` without braces, ``${VAR/a/b}``,
``${#VAR}``, an unclosed ``${``) is refused here naming the offending text, rather than
substituted as envsubst would do behind the author's back. A ``$`` before any other character is
left as it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_NAME = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*")
_OPS = (":=", ":-", "=", "-")
_BARE = re.compile(r"[A-Za-z_]")


@dataclass(frozen=True)
class Variable:
    name: str
    default: str | None
    """None: required (``${VAR}``); otherwise the default's text (``""`` for ``${VAR:=}``), a
    variable in it written ``${NAME}`` (clusterctl's ``--list-variables``)."""
    when_empty: bool = True
    """Whether an empty value also takes the default (``:=``, ``:-``), not only an unset one."""

    @property
    def required(self) -> bool:
        return self.default is None


class TemplateError(ValueError):
    """The text holds an expression this module (and a careful author) does not use."""


class MissingVariables(ValueError):
    """Required variables without a value; ``names`` sorted, all of them named in the message."""

    def __init__(self, names: list[str]) -> None:
        self.names = sorted(names)
        super().__init__(f"value for variables [{', '.join(self.names)}] is not set")


@dataclass(frozen=True)
class _Ref:
    """One ``${...}``: the variable, and its default as parsed nodes (None: required)."""

    name: str
    default: tuple[_Node, ...] | None
    when_empty: bool


_Node = str | _Ref


def _parse(text: str, start: int = 0, *, nested: bool = False) -> tuple[list[_Node], int]:
    """Nodes of ``text`` from ``start``, to its end or (``nested``) to the ``}`` closing a default;
    and the index after what was read."""
    nodes: list[_Node] = []
    i = start
    while i < len(text):
        if nested and text[i] == "}":
            return nodes, i + 1
        if text[i] != "$":
            j = i + 1
            while j < len(text) and text[j] != "$" and not (nested and text[j] == "}"):
                j += 1
            nodes.append(text[i:j])
            i = j
        elif text.startswith("$$", i):
            nodes.append("$")
            i += 2
        elif text.startswith("${", i):
            ref, i = _parse_ref(text, i)
            nodes.append(ref)
        elif _BARE.match(text, i + 1):
            raise TemplateError(f"unsupported expression {text[i : i + 20]!r}: write ${{NAME}}")
        else:
            nodes.append("$")
            i += 1
    if nested:
        raise TemplateError(
            f"unsupported expression {text[max(0, start - 20) : start + 20]!r}: no closing }}"
        )
    return nodes, i


def _parse_ref(text: str, at: int) -> tuple[_Ref, int]:
    """The ``${...}`` at ``at``, and the index after its ``}``."""
    name = _NAME.match(text, at + 2)
    if name is not None:
        i = name.end()
        if text.startswith("}", i):
            return _Ref(name.group(1), None, True), i + 1
        for op in _OPS:
            if text.startswith(op, i):
                default, end = _parse(text, i + len(op), nested=True)
                return _Ref(name.group(1), tuple(default), op.startswith(":")), end
    close = text.find("}", at)
    found = text[at : close + 1] if close >= 0 else text[at : at + 20]
    raise TemplateError(f"unsupported expression {found!r}: write ${{NAME}} or ${{NAME:=default}}")


def _text(nodes: tuple[_Node, ...]) -> str:
    return "".join(n if isinstance(n, str) else f"${{{n.name}}}" for n in nodes)


def variables(text: str) -> list[Variable]:
    """Every variable of ``text``, sorted by name; a name's first occurrence says whether it has a
    default (as clusterctl's ``GetVariables``, which ``--list-variables`` prints)."""
    seen: dict[str, Variable] = {}
    for node in _parse(text)[0]:
        if isinstance(node, _Ref) and node.name not in seen:
            default = None if node.default is None else _text(node.default)
            seen[node.name] = Variable(node.name, default, when_empty=node.when_empty)
    return [seen[name] for name in sorted(seen)]


def _evaluate(nodes: list[_Node] | tuple[_Node, ...], values: Mapping[str, str]) -> str:
    out: list[str] = []
    for node in nodes:
        if isinstance(node, str):
            out.append(node)
            continue
        value = values.get(node.name)
        if node.default is not None and (value is None or (node.when_empty and value == "")):
            out.append(_evaluate(node.default, values))
        else:
            out.append(value or "")
    return "".join(out)


def substitute(text: str, values: Mapping[str, str]) -> str:
    """``text`` with each variable replaced by its value in ``values`` or its default.

    Raises ``MissingVariables`` naming every required variable ``values`` lacks (clusterctl
    checks the required ones as their first occurrence says), ``TemplateError`` for an
    unsupported expression.
    """
    missing = [v.name for v in variables(text) if v.required and v.name not in values]
    if missing:
        raise MissingVariables(missing)
    return _evaluate(_parse(text)[0], values)
