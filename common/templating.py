"""clusterctl's variables: list and substitute ``${VAR}`` / ``${VAR:=default}`` in a YAML text.

Pure; the one substitution helper of the project (the release's components file, the cluster
templates of ``deploy/templates`` and the sandbox that creates clusters from them). It follows
what clusterctl's simple processor does (drone/envsubst after turning ``${ VAR }`` into
``${VAR}``), for the forms a provider's files use:

- ``${VAR}`` — required: substituting without a value for it fails, naming every missing one
  (clusterctl: "value for variables [A, B] is not set");
- ``${VAR:=default}`` and ``${VAR:-default}`` — the default when VAR is unset or empty;
  ``${VAR=default}`` and ``${VAR-default}`` — the default when VAR is unset;
- ``$$`` — a literal ``$``.

Anything else envsubst would read as an expression (``$VAR`` without braces, ``${VAR/a/b}``,
``${#VAR}``) is refused here with the offending text, rather than substituted as envsubst would
do behind the author's back. A ``$`` before any other character is left as it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_TOKEN = re.compile(
    r"\$(?:"
    r"(?P<dollar>\$)"
    rf"|\{{\s*(?P<name>{_NAME})\s*(?:(?P<op>:=|:-|=|-)(?P<default>[^}}]*))?\}}"
    rf"|(?P<bad>\{{[^}}]*\}}?|{_NAME})"
    r")"
)


@dataclass(frozen=True)
class Variable:
    name: str
    default: str | None
    """None: required (``${VAR}``); otherwise the text after ``:=`` (``""`` for ``${VAR:=}``)."""
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


def _variable(match: re.Match[str]) -> Variable | None:
    if match.group("bad") is not None:
        found = match.group(0)
        raise TemplateError(f"unsupported expression {found!r}: write ${{NAME}} or ${{NAME:=default}}")
    if match.group("dollar") is not None:
        return None
    op = match.group("op")
    if op is None:
        return Variable(match.group("name"), None)
    return Variable(match.group("name"), match.group("default"), when_empty=op.startswith(":"))


def variables(text: str) -> list[Variable]:
    """Every variable of ``text``, sorted by name; a name's first occurrence says whether it has a
    default (as clusterctl's ``GetVariables``, which ``clusterctl generate yaml --list-variables``
    prints)."""
    seen: dict[str, Variable] = {}
    for match in _TOKEN.finditer(text):
        v = _variable(match)
        if v is not None:
            seen.setdefault(v.name, v)
    return [seen[name] for name in sorted(seen)]


def substitute(text: str, values: Mapping[str, str]) -> str:
    """``text`` with each variable replaced by its value in ``values`` or its default.

    Raises ``MissingVariables`` naming every required variable ``values`` lacks (clusterctl
    checks the required ones against the default of their first occurrence), ``TemplateError``
    for an unsupported expression.
    """
    missing = [v.name for v in variables(text) if v.required and v.name not in values]
    if missing:
        raise MissingVariables(missing)

    def replace(match: re.Match[str]) -> str:
        v = _variable(match)
        if v is None:
            return "$"
        value = values.get(v.name)
        if v.default is not None and (value is None or (v.when_empty and value == "")):
            return v.default
        return value or ""

    return _TOKEN.sub(replace, text)
