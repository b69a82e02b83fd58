"""Comments and docs stand on their own: none points at what a reader of the repository cannot
open (a tracker's issue by number, or a design document kept outside the repository). Each file
git tracks is read; a hit names the file, the line and the text."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests import helpers

POINTERS = re.compile(r"\b[Ii]ssues? #?\d+\b|\bDESIGN\b|§")
"""An issue by number (``issue 10``, ``issues #3``), the design document (``DESIGN``), a section
sign (``§4``)."""
ITSELF = "tests/test_comments.py"


def tracked() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=helpers.ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [p for p in listed.split("\0") if p and p != ITSELF]


def pointers() -> list[str]:
    found = []
    for rel in tracked():
        try:
            text = (helpers.ROOT / rel).read_text()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue  # binary, a submodule, or deleted in the work tree
        for number, line in enumerate(text.splitlines(), 1):
            if POINTERS.search(line):
                found.append(f"{rel}:{number}: {line.strip()}")
    return found


@pytest.mark.parametrize(
    ("line", "points"),
    [
        ("# far below the default (issue 10).", True),
        ("see issues #3 and 4", True),
        ("as DESIGN §4 says", True),
        ("the credential's issue time", False),
        ("re-issue the credential", False),
        ("Generous by design: the old hub grew", False),
    ],
)
def test_what_counts_as_a_pointer(line: str, points: bool) -> None:
    assert bool(POINTERS.search(line)) is points


def test_no_comment_or_doc_points_outside_the_repository() -> None:
    assert pointers() == []
