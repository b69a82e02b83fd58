"""The attack suite (issue 10): every case tries what a hostile site, tenant or bus peer would,
and asserts the exact refusal, that nothing changed, and that every process is still alive.

Everything under tests/security carries the ``security`` marker, so the suite runs alone with
``pytest -m security``; it also runs in ``make test``. It is a permanent suite: a change that
breaks one of its cases is a regression.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.security)
