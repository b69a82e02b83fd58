"""How compose finds this checkout's stack: a project named after the checkout's directory, and
the ``.env`` that deploy/compose/engine.sh writes kept out of git and out of the images' context.
That compose reads that ``.env`` without a flag: tests/containers/test_engine.py, with the CLI."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.deploy import compose as c
from tests.deploy import manifests as m


@pytest.mark.parametrize("name", ["docker-compose.yml", "docker-compose.host.yml"])
def test_the_project_is_named_after_its_checkout(name: str) -> None:
    # A fixed `name:` makes every checkout on one engine the same stack: one's `down -v` would
    # remove the other's volumes.
    assert not re.search(r"^name:", (m.ROOT / name).read_text(), flags=re.M)


@pytest.mark.parametrize("name", [".env", "compose.env"])
def test_the_env_file_stays_out_of_git_and_of_the_build_context(name: str) -> None:
    done = subprocess.run(
        ["git", "check-ignore", "--quiet", "--no-index", name], cwd=m.ROOT, capture_output=True, check=False
    )
    assert done.returncode == 0, f"git does not ignore {name}: {done.stderr!r}"
    assert c.ignored(name)


def test_engine_sh_says_what_it_does_and_takes_no_arguments() -> None:
    # Asked for help, it says and stops: it never installs or starts anything then.
    script = str(m.ROOT / "deploy" / "compose" / "engine.sh")
    helped = subprocess.run(["bash", script, "--help"], capture_output=True, text=True, check=False)
    assert helped.returncode == 0 and helped.stdout.startswith("Make sure a Docker engine answers here")
    assert "set -euo" not in helped.stdout and not helped.stderr
    wrong = subprocess.run(["bash", script, "--bogus"], capture_output=True, text=True, check=False)
    assert wrong.returncode == 2 and "takes no arguments (got: --bogus)" in wrong.stderr
