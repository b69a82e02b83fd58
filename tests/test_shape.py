"""The code stays readable in an afternoon: small modules, short functions, few parameters, folders
a reader takes in at a glance.

Measured on the product packages (not tests, not bench): a module over ``MODULE_LINES`` lines, a
function over ``FUNCTION_LINES`` lines, a constructor taking more than ``CONSTRUCTOR_PARAMS``
parameters or a folder holding more than ``FOLDER_MODULES`` modules (its face, ``__init__.py``,
and its sub-packages not counted) fails here, naming the place and what it measures. A module
that reaches a limit becomes a folder, not a prefixed sibling.
"""

from __future__ import annotations

import ast

import pytest

from tests.helpers import PACKAGES, ROOT

MODULE_LINES = 300
FUNCTION_LINES = 50
CONSTRUCTOR_PARAMS = 6
FOLDER_MODULES = 15


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.ClassDef):
            found += _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append((prefix + node.name, node))
            found += _functions(node, f"{prefix}{node.name}.")
    return found


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    return len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) - 1  # not self


def excesses() -> dict[str, str]:
    """Every place over a limit (``module path``, ``function path:Name``, ``constructor path:Class``)
    → what it measures."""
    found: dict[str, str] = {}
    for package in PACKAGES:
        for folder in sorted({p.parent for p in (ROOT / package).rglob("__init__.py")}):
            modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
            if len(modules) > FOLDER_MODULES:
                rel = folder.relative_to(ROOT).as_posix()
                found[f"folder {rel}/"] = f"{len(modules)} modules (at most {FOLDER_MODULES})"
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            source = path.read_text()
            lines = len(source.splitlines())
            if lines > MODULE_LINES:
                found[f"module {rel}"] = f"{lines} lines (at most {MODULE_LINES})"
            for name, fn in _functions(ast.parse(source)):
                length = (fn.end_lineno or fn.lineno) - fn.lineno + 1
                if length > FUNCTION_LINES:
                    found[f"function {rel}:{name}"] = f"{length} lines (at most {FUNCTION_LINES})"
                if fn.name == "__init__" and _params(fn) > CONSTRUCTOR_PARAMS:
                    hint = "pass the settings and a dependencies struct"
                    found[f"constructor {rel}:{name.removesuffix('.__init__')}"] = (
                        f"{_params(fn)} parameters (at most {CONSTRUCTOR_PARAMS}: {hint})"
                    )
    return found


def test_nothing_exceeds_a_limit() -> None:
    found = excesses()
    assert not found, "\n".join(f"{place}: {what}" for place, what in sorted(found.items()))


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_is_measured(package: str) -> None:
    assert list((ROOT / package).rglob("*.py")), f"{package} has no modules: is PACKAGES stale?"
