"""README.md and the docs stay true: README is short and shows the two commands, the configuration
page's flag tables are what ``kamaji_broker.flags`` renders from the settings models now (every
hub and agent flag, its default and its docstring), the Docker page's commands read what engine.sh
printed, and ``mkdocs build --strict`` passes (a broken link, a missing anchor or a page left out of the
navigation fails it). The module map is in the packages' faces: tests/test_faces.py."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kamaji_broker import flags

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"
README_LINES = 150


def page(name: str) -> str:
    return (DOCS / name).read_text()


def test_the_readme_is_short_and_shows_the_two_commands() -> None:
    assert "make sandbox" in README and "make test" in README
    assert len(README.splitlines()) <= README_LINES


def test_the_readme_links_every_page_of_the_site() -> None:
    pages = sorted(p.relative_to(ROOT).as_posix() for p in DOCS.rglob("*.md") if p.name != "index.md")
    assert [p for p in pages if f"]({p})" not in README] == []


def test_the_page_has_a_flag_table_for_each_settings_model() -> None:
    assert sorted(flags.tables(page("configuration.md"))) == sorted(flags.MODELS)


@pytest.mark.parametrize("name", sorted(flags.MODELS))
def test_every_flag_is_in_its_generated_table(name: str) -> None:
    """The generated table has a row for every field, in order: the check below cannot pass on an
    empty table."""
    model = flags.MODELS[name]
    rows = flags.table(model).splitlines()[2:]
    assert [row.split(" | ")[0].removeprefix("| ").strip("`") for row in rows] == [
        flags.flag(field) for field in model.model_fields
    ]


@pytest.mark.parametrize("name", sorted(flags.MODELS))
def test_the_flag_tables_are_generated_from_the_settings(name: str) -> None:
    model = flags.MODELS[name]
    on_page = flags.tables(page("configuration.md")).get(name)
    assert on_page == flags.table(model), (
        f"docs/configuration.md's {name} flags are not what {model.__module__}.{model.__name__} says "
        "(a field added, its default or its docstring changed): run python -m kamaji_broker.flags"
    )


def test_mkdocs_build_strict_passes(tmp_path: Path) -> None:
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    assert mkdocs, "mkdocs is in the test extra"
    done = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "index.html").is_file()


def _docker_commands() -> list[list[str]]:
    """The shell commands of the "With Docker" page, as argv."""
    section = page("getting-started/docker.md")
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    return [
        shlex.split(line, comments=True) for block in blocks for line in block.splitlines() if line.strip()
    ]


def test_every_compose_command_reads_what_engine_sh_printed() -> None:
    """The images engine.sh chose reach every compose command, not just the first (without them
    ``run --rm e2e`` pulls the official image, which no registry may serve)."""
    commands = _docker_commands()
    (engine,) = [args for args in commands if "deploy/compose/engine.sh" in args]
    assert engine[0] == "deploy/compose/engine.sh", "root needs no sudo, and a machine may have none"
    assert engine[1] == ">", engine
    env_file = engine[2]
    compose = [args for args in commands if args[:2] == ["docker", "compose"]]
    assert len(compose) >= 5
    if env_file != ".env":  # the one compose reads from the checkout without being told
        missing = [" ".join(a) for a in compose if f"--env-file {env_file}" not in " ".join(a)]
        assert missing == [], f"compose commands without --env-file {env_file}"
