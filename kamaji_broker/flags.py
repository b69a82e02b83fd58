"""Command-line flags from a pydantic settings model, errors that name the flag, and the flag tables.

Every field of the model becomes ``--field-name`` (booleans are switches). A flag given on the
command line wins over the environment variable (``<PREFIX><FIELD>``), which wins over the
default. Validation errors are reported per flag, e.g. ``--orphan-grace: invalid duration 'x'``.

A field's ``--help`` is its attribute docstring and its default as one would type it
(``default_text``). The configuration page's flag tables are rendered from the same two:
each sits between ``<!-- flags: NAME -->`` and ``<!-- /flags -->`` in docs/configuration.md,
NAME one of ``MODELS``, a row per field (flag, environment variable, default, docstring).
``python -m kamaji_broker.flags`` rewrites them in place; ``--check`` only says whether they are
current (tests/test_readme.py asserts they are).
"""

from __future__ import annotations

import argparse
import re
import sys
import typing
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pydantic
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from agent.settings import AgentSettings
from common import durations
from hub.settings import HubSettings

S = TypeVar("S", bound=BaseSettings)

SECRET = "(secret)"
"""What stands for the default of a secret field, in ``--help`` and on the page alike."""


def flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def env(model: type[BaseSettings], field: str) -> str:
    """The environment variable of ``field``: ``<env_prefix><FIELD>``, upper case."""
    prefix = str(model.model_config.get("env_prefix") or "")
    return f"{prefix}{field}".upper()


def _metadata(annotation: Any) -> Iterator[Any]:
    """Everything an annotation is made of, ``Annotated`` metadata included, at any depth
    (``Duration | None`` hides the duration's validator inside an ``Optional``)."""
    yield annotation
    if typing.get_origin(annotation) is typing.Annotated:
        yield from annotation.__metadata__
    for arg in typing.get_args(annotation):
        yield from _metadata(arg)


def _parts(info: FieldInfo) -> Iterator[Any]:
    yield from info.metadata
    yield from _metadata(info.annotation)


def is_secret(info: FieldInfo) -> bool:
    """A field of a secret type: its default is never shown."""
    secrets = (pydantic.SecretStr, pydantic.SecretBytes)
    return any(isinstance(p, type) and issubclass(p, secrets) for p in _parts(info))


def is_duration(info: FieldInfo) -> bool:
    return any(getattr(p, "func", None) is durations.parse for p in _parts(info))


def duration_text(seconds: float) -> str:
    """Seconds as ``durations.parse`` reads them back: 3600 → ``1h``, 90 → ``1m30s``, 0.5 → ``500ms``."""
    ms = round(seconds * 1000)
    if ms == 0:
        return "0s"
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    secs, ms = divmod(ms, 1000)
    parts = zip((hours, minutes, secs, ms), ("h", "m", "s", "ms"), strict=True)
    return "".join(f"{n}{unit}" for n, unit in parts if n)


def default_text(info: FieldInfo) -> str:
    """The default as one would give it to the flag; ``""`` when there is none to show (no value,
    an empty one, a switch that is off), ``SECRET`` for a secret. Not for a required field."""
    default = info.default
    if is_secret(info):
        return SECRET
    if default is None or default == "" or default is False:
        return ""
    if default is True:
        return "on"
    if is_duration(info) and isinstance(default, int | float):
        return duration_text(default)
    return str(default)


def add(parser: argparse.ArgumentParser, model: type[BaseSettings]) -> None:
    for name, info in model.model_fields.items():
        default = default_text(info) if not info.is_required() else ""
        note = " (required)" if info.is_required() else f" (default: {default})" if default else ""
        helptext = f"{info.description or ''}{note} [env {env(model, name)}]".strip().replace("%", "%%")
        if info.annotation is bool:
            parser.add_argument(flag(name), dest=name, action="store_true", default=None, help=helptext)
        else:
            parser.add_argument(flag(name), dest=name, default=None, metavar=name.upper(), help=helptext)


class SettingsError(ValueError):
    """Invalid or missing settings; the message has one line per flag."""


def load(model: type[S], args: argparse.Namespace) -> S:
    given: dict[str, Any] = {
        n: getattr(args, n) for n in model.model_fields if getattr(args, n, None) is not None
    }
    try:
        return model(**given)
    except pydantic.ValidationError as exc:
        lines = []
        for err in exc.errors():
            where = flag(str(err["loc"][0])) if err["loc"] else "settings"
            message = str(err["msg"]).removeprefix("Value error, ")
            if err["type"] == "missing":
                message = "required (give the flag or set its environment variable)"
            lines.append(f"{where}: {message}")
        raise SettingsError("\n".join(lines)) from None


# -- The configuration page's tables ------------------------------------------------------------

MODELS: Mapping[str, type[BaseSettings]] = {"hub": HubSettings, "agent": AgentSettings}
"""The tables by marker name: ``<!-- flags: hub -->`` holds ``HubSettings``."""

PAGE = Path("docs/configuration.md")
"""The page with the tables, from the repository's root."""

_SECTION = re.compile(r"(<!-- flags: (?P<name>[\w-]+) -->\n)(?P<table>.*?)(<!-- /flags -->)", re.S)
_CODE = re.compile(r"(``?)(.+?)\1", re.S)
"""A code span, reStructuredText's ````x```` (as the docstrings write it) or Markdown's ```x```."""
_FLAG = re.compile(r'(?<![\w`-])--[a-z][a-z0-9-]*[a-z0-9](?:="")?')
"""A flag named in running text (``--in-cluster``, ``--namespace=""``): shown as code on the page."""
_SPECIAL = str.maketrans({"|": r"\|", "*": r"\*", "<": "&lt;", ">": "&gt;"})
"""What Markdown would read as a cell's end, emphasis or an HTML tag outside a code span."""


class UndocumentedField(ValueError):
    """A field without an attribute docstring: its flag would have no meaning on the page or in ``--help``."""


def markdown(text: str) -> str:
    """A docstring as one line of a Markdown table cell: newlines folded, ````x```` and flags as
    ```x```, Markdown's special characters escaped outside code spans."""
    text = " ".join(text.split())
    out, last = [], 0
    for m in _CODE.finditer(text):
        out.append(_prose(text[last : m.start()]))
        out.append("`" + m.group(2).replace("|", r"\|") + "`")
        last = m.end()
    out.append(_prose(text[last:]))
    return "".join(out)


def _prose(text: str) -> str:
    return _FLAG.sub(lambda m: f"`{m[0]}`", text.translate(_SPECIAL))


def table(model: type[BaseSettings]) -> str:
    """The Markdown table of ``model``'s flags, a row per field in the model's order."""
    rows = ["| flag | environment variable | default | meaning |", "|---|---|---|---|"]
    for name, info in model.model_fields.items():
        if not info.description:
            raise UndocumentedField(f"{model.__name__}.{name} ({flag(name)}) has no docstring")
        if info.is_required():
            default = "required"
        else:
            shown = default_text(info)
            default = f"`{shown}`" if shown and shown != SECRET else shown
        cells = (f"`{flag(name)}`", f"`{env(model, name)}`", default, markdown(info.description))
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def tables(page: str) -> dict[str, str]:
    """The tables in ``page`` as they are, by marker name."""
    return {m["name"]: m["table"] for m in _SECTION.finditer(page)}


def render(page: str) -> str:
    """``page`` with every marked table rendered afresh; a marker naming no model is an error."""
    unknown = sorted(set(tables(page)) - set(MODELS))
    if unknown:
        raise ValueError(
            f"flag tables of unknown settings: {', '.join(unknown)} (known: {', '.join(MODELS)})"
        )
    return _SECTION.sub(lambda m: m[1] + table(MODELS[m["name"]]) + m[4], page)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m kamaji_broker.flags", description="Rewrite the flag tables of the configuration page."
    )
    p.add_argument("--page", type=Path, default=PAGE, help=f"the page to rewrite (default {PAGE})")
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table is stale")
    args = p.parse_args(argv)
    try:
        before = args.page.read_text()
        after = render(before)
    except (ValueError, OSError) as exc:
        print(f"flags: error: {exc}", file=sys.stderr)
        return 1
    missing = sorted(set(MODELS) - set(tables(before)))
    if missing:
        print(f"flags: error: {args.page} has no table of {', '.join(missing)}", file=sys.stderr)
        return 1
    if after == before:
        return 0
    if args.check:
        print(f"flags: {args.page} is stale: run python -m kamaji_broker.flags", file=sys.stderr)
        return 1
    args.page.write_text(after)
    print(args.page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
