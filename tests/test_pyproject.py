"""pyproject.toml installs without a word from setuptools: what a newcomer's first ``make`` prints."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SPDX_SETUPTOOLS = "77.0"
"""The first setuptools that reads ``project.license`` as an SPDX expression (an older one
refuses the string)."""


def test_the_build_needs_a_setuptools_that_reads_an_spdx_license() -> None:
    (setuptools,) = [Requirement(r) for r in PYPROJECT["build-system"]["requires"]]
    assert setuptools.name == "setuptools"
    assert isinstance(PYPROJECT["project"]["license"], str), "an SPDX expression, not a table"
    assert not setuptools.specifier.contains("76.99"), "an isolated build could pick one too old"
    assert setuptools.specifier.contains(SPDX_SETUPTOOLS)


@pytest.mark.timeout(120)
def test_installing_prints_no_setuptools_warning(tmp_path: Path) -> None:
    # The metadata build that `pip install -e .` runs, with the test extra's setuptools: no
    # package index needed, and what setuptools says about pyproject.toml is said here too.
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-build-isolation",
         "--no-index", "--quiet", "-e", str(ROOT)],
        cwd=tmp_path, capture_output=True, text=True, timeout=110, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    output = done.stdout + done.stderr
    assert "deprecated" not in output.lower(), output
    assert "Warning" not in output, output
