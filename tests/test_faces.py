"""Every package's face (its ``__init__.py`` docstring) is its map: it names each of its modules
and sub-packages, and a map line names only what exists. A reader opens the face to find their
way; this keeps the faces true as modules come and go."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests import helpers

PACKAGES = helpers.PACKAGES
MAP_LINE = re.compile(r"^ {0,4}([a-z][a-z_0-9]*)/? {2,}\S", re.M)
"""A map line: a name at the start (up to 4 spaces in), then two spaces or more, then what it holds."""


def packages() -> list[Path]:
    return sorted(
        init.parent for package in PACKAGES for init in (helpers.ROOT / package).rglob("__init__.py")
    )


def face(package: Path) -> str:
    return ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""


def members(package: Path) -> list[str]:
    modules = [p.stem for p in package.glob("*.py") if not p.name.startswith("__")]
    subpackages = [p.name for p in package.iterdir() if (p / "__init__.py").is_file()]
    return sorted(modules + subpackages)


def named(name: str, text: str) -> bool:
    return bool(re.search(rf"(^ *{name}\b|``{name}``|`{name}`)", text, re.M))


@pytest.mark.parametrize("package", packages(), ids=lambda p: p.relative_to(helpers.ROOT).as_posix())
def test_the_face_names_every_module(package: Path) -> None:
    text = face(package)
    assert [m for m in members(package) if not named(m, text)] == []


@pytest.mark.parametrize("package", packages(), ids=lambda p: p.relative_to(helpers.ROOT).as_posix())
def test_the_face_maps_only_what_exists(package: Path) -> None:
    listed = MAP_LINE.findall(face(package))
    assert [name for name in listed if name not in members(package)] == []


@pytest.mark.parametrize(
    ("text", "name", "found"),
    [
        ("loop       bind, replay at start\n", "loop", True),
        ("apply/     intents → TCPs\n", "apply", True),
        ("``reconcile`` (pure decisions)", "reconcile", True),
        ("the reconcile loop", "reconcile", False),
        ("reconciles TCPs", "reconcile", False),
    ],
)
def test_what_names_a_module(text: str, name: str, found: bool) -> None:
    assert named(name, text) is found
