"""README.md stays true: the two commands are there, and every hub and agent flag is documented."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_settings import BaseSettings

from agent.settings import AgentSettings
from hub.settings import HubSettings
from kamaji_broker import flags

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_the_two_commands() -> None:
    assert "make sandbox" in README and "make test" in README


@pytest.mark.parametrize("model", [HubSettings, AgentSettings], ids=["hub", "agent"])
def test_every_flag_is_documented(model: type[BaseSettings]) -> None:
    missing = [flags.flag(name) for name in model.model_fields if f"`{flags.flag(name)}`" not in README]
    assert missing == []


def test_no_placeholder_left() -> None:
    assert "SANDBOX-WALKTHROUGH" not in README and "BENCHMARK-TABLE" not in README


PACKAGES = ("protocol", "common", "hub", "agent", "sandbox", "kamaji_broker")


def _module_map() -> dict[str, str]:
    """README's module map: each directory's row (``| `dir/` | ... |``) → the row's text."""
    layout = README[README.index("## Layout") :]
    rows: dict[str, str] = {}
    for line in layout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`") and cells[0].endswith("/`"):
            rows[cells[0].strip("`").rstrip("/")] = cells[1]
    return rows


def test_the_module_map_names_every_module() -> None:
    root = Path(__file__).resolve().parents[1]
    rows = _module_map()
    missing = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if path.name.startswith("__"):
                continue
            directory = path.parent.relative_to(root).as_posix()
            if f"`{path.stem}`" not in rows.get(directory, ""):
                missing.append(path.relative_to(root).as_posix())
    assert missing == [], "README's Layout does not name these modules in their directory's row"


def test_the_module_map_names_only_what_exists() -> None:
    root = Path(__file__).resolve().parents[1]
    assert all((root / directory).is_dir() for directory in _module_map())
