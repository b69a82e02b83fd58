"""clusterctl's variable substitution (``${VAR}``, ``${VAR:=default}``), for templates we ship.

Owns what ``clusterctl generate cluster`` and ``clusterctl init`` do to a YAML file's text before
applying it (Cluster API's ``yamlprocessor.SimpleProcessor`` on ``drone/envsubst``), so the
sandbox and the tests read ``deploy/templates/`` exactly as clusterctl would:

- ``${VAR}`` is VAR's value. ``${VAR:=word}`` (and ``=``, ``:-``, ``:?``, ``:+``, which drone's
  envsubst treats alike) is the value, or ``word`` when VAR is unset or empty; ``word`` may hold
  ``${OTHER}``. A dash without a colon belongs to the name (``${A-b}`` is variable ``A-b``).
- ``${ VAR }`` (blanks inside) is read as ``${VAR}``, clusterctl's legacy form.
- ``$$`` is a literal ``$`` (``$${VAR}`` stays ``${VAR}``) and ``$VAR`` without braces is text;
  outside ``${...}``, ``\\\\`` and ``\\/`` lose their backslash, as in drone's scanner.
- A variable is required when it has no default; ``substitute`` refuses a text whose required
  variables are not all given, naming every missing one (a variable given as "" is given).
  Like clusterctl, only outermost variables are listed and checked: ``OTHER`` inside a default
  becomes "" when unset.
- The other bash forms drone knows (``${#V}``, ``${V:1}``, ``${V/a/b}``, ``${V^^}``, ...) are
  refused with ``TemplateError`` naming them: our templates do not use them.

Pure: talks to nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = ["MissingVariables", "TemplateError", "Variable", "substitute", "variables"]

_LEGACY: Final = re.compile(r"\$\{(\s+[A-Za-z0-9_$]+\s+|\s+[A-Za-z0-9_$]+|[A-Za-z0-9_$]+\s+)\}")
_NAME: Final = re.compile(r"[^\W]|-")
_DEFAULT_OPERATORS: Final = (":=", ":-", ":?", ":+", "=")


class TemplateError(ValueError):
    """The text is not a template clusterctl (or we) can read; the message says where."""


class MissingVariables(TemplateError):
    """Required variables without a value; ``names`` sorted, as clusterctl lists them."""

    def __init__(self, names: list[str]) -> None:
        self.names = sorted(names)
        super().__init__(
            f"value for variables [{', '.join(self.names)}] is not set. Please set the value using "
            "environment variables or the clusterctl config file"
        )


@dataclass(frozen=True)
class Variable:
    """One variable as ``clusterctl generate cluster --list-variables`` describes it."""

    name: str
    required: bool
    default: str = ""
    """Its default as written, nested variables shown as ``${NAME}``."""


@dataclass(frozen=True)
class _Ref:
    name: str
    default: tuple[str | _Ref, ...] | None
    """None: no default operator (required)."""


_Node = str | _Ref


class _Parser:
    """drone/envsubst's grammar, restricted to plain and default substitutions."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def where(self, at: int) -> str:
        line = self.text.count("\n", 0, at) + 1
        snippet = self.text[at : at + 40].split("\n", 1)[0]
        return f"line {line}: {snippet!r}"

    def document(self) -> list[_Node]:
        nodes: list[_Node] = []
        text: list[str] = []
        while self.pos < len(self.text):
            char = self.text[self.pos]
            pair = self.text[self.pos : self.pos + 2]
            if pair == "${":
                nodes += ["".join(text)] if text else []
                text = []
                nodes.append(self.reference())
                continue
            if pair in ("$$", "\\\\", "\\/"):  # the escaped character stays, its escape goes
                char = pair[1]
                self.pos += 1
            text.append(char)
            self.pos += 1
        return nodes + (["".join(text)] if text else [])

    def reference(self) -> _Ref:
        start = self.pos
        self.pos += 2
        name_start = self.pos
        while self.pos < len(self.text) and _NAME.fullmatch(self.text[self.pos]):
            self.pos += 1
        name = self.text[name_start : self.pos]
        if self.pos >= len(self.text):
            raise TemplateError(f"bad substitution (no closing brace) at {self.where(start)}")
        if not name:
            raise TemplateError(f"unsupported or bad substitution at {self.where(start)}")
        if self.text.startswith("}", self.pos):
            self.pos += 1
            return _Ref(name, None)
        operator = next((op for op in _DEFAULT_OPERATORS if self.text.startswith(op, self.pos)), None)
        if operator is None:
            raise TemplateError(
                f"unsupported substitution at {self.where(start)}: only ${{VAR}} and ${{VAR:=default}}"
            )
        self.pos += len(operator)
        return _Ref(name, self.default(start))

    def default(self, start: int) -> tuple[_Node, ...]:
        parts: list[_Node] = []
        while self.pos < len(self.text):
            if self.text[self.pos] == "}":
                self.pos += 1
                return tuple(parts)
            if self.text.startswith("${", self.pos):
                parts.append(self.reference())
                continue
            ends = [i for i in (self.text.find("}", self.pos), self.text.find("${", self.pos)) if i >= 0]
            end = min(ends, default=len(self.text))
            parts.append(self.text[self.pos : end])
            self.pos = end
        raise TemplateError(f"bad substitution (no closing brace) at {self.where(start)}")


def _parse(text: str) -> list[_Node]:
    converted = _LEGACY.sub(lambda m: re.sub(r"\s", "", m.group(0)), text)
    return _Parser(converted).document()


def _first(nodes: list[_Node]) -> dict[str, _Ref]:
    """Each outermost variable's first occurrence (clusterctl describes a variable by it)."""
    first: dict[str, _Ref] = {}
    for node in nodes:
        if isinstance(node, _Ref):
            first.setdefault(node.name, node)
    return first


def _shown(nodes: tuple[_Node, ...]) -> str:
    return "".join(n if isinstance(n, str) else f"${{{n.name}}}" for n in nodes)


def variables(text: str) -> list[Variable]:
    """Every (outermost) variable of ``text``, once, by name; the first occurrence describes it.

    ``${VAR:=}`` is listed as not required, yet ``substitute`` wants a value for it: clusterctl's
    listing and its check differ there (an empty default is no default to the check)."""
    first = _first(_parse(text))
    return [Variable(n, first[n].default is None, _shown(first[n].default or ())) for n in sorted(first)]


def _evaluate(nodes: tuple[_Node, ...] | list[_Node], values: Mapping[str, str]) -> str:
    out = []
    for node in nodes:
        if isinstance(node, str):
            out.append(node)
            continue
        value = values.get(node.name, "")
        out.append(value if value or not node.default else _evaluate(node.default, values))
    return "".join(out)


def substitute(text: str, values: Mapping[str, str]) -> str:
    """``text`` with every variable replaced; MissingVariables if a required one has no value."""
    nodes = _parse(text)
    missing = [n for n, ref in _first(nodes).items() if not ref.default and n not in values]
    if missing:
        raise MissingVariables(missing)
    return _evaluate(nodes, values)
