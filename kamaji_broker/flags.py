"""Command-line flags from a pydantic settings model, and errors that name the flag.

Every field of the model becomes ``--field-name`` (booleans are switches). A flag given on the
command line wins over the environment variable (``<PREFIX><FIELD>``), which wins over the
default. Validation errors are reported per flag, e.g. ``--orphan-grace: invalid duration 'x'``.
"""

from __future__ import annotations

import argparse
from typing import Any, TypeVar

import pydantic
from pydantic_settings import BaseSettings

S = TypeVar("S", bound=BaseSettings)


def flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def add(parser: argparse.ArgumentParser, model: type[BaseSettings]) -> None:
    prefix = str(model.model_config.get("env_prefix") or "")
    for name, info in model.model_fields.items():
        env = f"{prefix}{name}".upper()
        text = (info.description or "").replace("%", "%%")
        default = "" if info.is_required() else f" (default: {info.default})"
        helptext = f"{text}{default} [env {env}]".strip()
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
